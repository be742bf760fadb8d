#!/usr/bin/env bash
# GRE-tunnelled traffic against the same traffic without the tunnel, side by side in one
# session: `lro bench` on a capture and on GRE-wrapped copies of it (examples/gre_wrap.rs), in
# alternating runs (this kind of machine is shared and noisy: only ratios taken in one session,
# runs interleaved, mean anything), then instruction counts of the engine's work per frame
# under callgrind (deterministic) when valgrind is installed.
#
#     scripts/bench-gre.sh [CAPTURE] [RUNS] [BURST] [-- extra lro bench options]
#
# CAPTURE: pcap or pcap.xz of Ethernet frames (default data/default.pcap.xz); RUNS alternating
# runs (default 9), each the best of 20 rounds, at BURST (default 32), with trusted checksums
# (`--csum trust`; CSUM=verify in the environment for software verification). Variants: the plain
# capture through the default build (which looks through GRE only when the capture carries
# some: on this capture it runs the engine without the encapsulation layer), the plain capture
# through a build without the `gre` feature (so the two should agree: what GRE support costs
# plain traffic), and the capture in GRE with K, with C+K, with K over outer IPv6, and as TEB
# (gretap), which the default build runs through the GRE engine. Prints per variant the
# frames out and aggregation ratio, the median and minimum ns per frame, the ratio of medians
# and the paired ratio (the median of each run's ratio to the plain run beside it) against the
# plain capture through the default build, and callgrind's instructions per frame.
set -euo pipefail
cd "$(dirname "$0")/.."

pos=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  pos+=("$1")
  shift
done
[ "${1:-}" = -- ] && shift
extra=("$@")
if [ ${#pos[@]} -gt 3 ]; then
  sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
  exit 2
fi
capture=${pos[0]:-data/default.pcap.xz}
runs=${pos[1]:-9} burst=${pos[2]:-32}
csum=${CSUM:-trust}
[ -r "$capture" ] || { echo "$capture: cannot read" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Both builds share the target directory: the feature sets are cached side by side, only the
# binary is copied out.
tgt=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet --no-default-features
cp "$tgt/release/lro" "$work/lro-nogre"
cargo build --release --quiet --example gre_wrap
cargo build --release --quiet
lro=$tgt/release/lro
wrap=$tgt/release/examples/gre_wrap

case $capture in
  *.xz) xz -dc "$capture" > "$work/plain.pcap" ;;
  *) cp "$capture" "$work/plain.pcap" ;;
esac
"$wrap" --flags k "$capture" "$work/k.pcap" 2>/dev/null
"$wrap" --flags ck "$capture" "$work/ck.pcap" 2>/dev/null
"$wrap" --flags k --outer v6 "$capture" "$work/k6.pcap" 2>/dev/null
"$wrap" --flags none --teb "$capture" "$work/teb.pcap" 2>/dev/null

variants=(plain nogre k ck k6 teb)
declare -A what=(
  [plain]="plain capture, default build"
  [nogre]="plain capture, built without the gre feature"
  [k]="GRE K (key), outer IPv4"
  [ck]="GRE C+K (checksum, key), outer IPv4"
  [k6]="GRE K, outer IPv6"
  [teb]="GRE TEB (gretap), outer IPv4"
)
bin() { [ "$1" = nogre ] && echo "$work/lro-nogre" || echo "$lro"; }
file() { [ "$1" = nogre ] && echo "$work/plain.pcap" || echo "$work/$1.pcap"; }
field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p"; }

for i in $(seq "$runs"); do
  for v in "${variants[@]}"; do
    out=$("$(bin "$v")" bench "$(file "$v")" --burst "$burst" --rounds 20 --csum "$csum" "${extra[@]}" --json)
    echo "$out" | field ns_per_frame_best >> "$work/$v"
    echo "$out" | field frames_out > "$work/$v.out"
    echo "$out" | field ratio > "$work/$v.ratio"
    [ "$(wc -l < "$work/$v")" -eq "$i" ] || { echo "run $i: $v printed no ns per frame" >&2; exit 1; }
  done
  echo "run $i of $runs done" >&2
done

stat() { # median and minimum of a file of numbers
  sort -g "$1" | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s %s\n", m, v[1] }'
}

instructions() { # the engine's instructions per frame (burst_once: pushes and flushes)
  if ! command -v valgrind >/dev/null 2>&1; then
    echo "-"
    return
  fi
  local frames
  frames=$("$(bin "$1")" bench "$(file "$1")" --rounds 1 --json | field frames_in)
  valgrind --tool=callgrind --toggle-collect='*burst_once*' --callgrind-out-file="$work/cg.$1" \
    "$(bin "$1")" bench "$(file "$1")" --burst "$burst" --rounds 1 --csum "$csum" "${extra[@]}" \
    >/dev/null 2>&1
  # one warm-up pass and one round
  awk -v n="$frames" '/^summary:/ { printf "%.0f", $2 / (2 * n) }' "$work/cg.$1"
}

echo "capture $capture, burst $burst, $runs alternating runs of 20 rounds, checksums $csum${extra[*]:+, extra: ${extra[*]}}"
read -r pmed _ < <(stat "$work/plain")
pins=$(instructions plain)
printf "%-52s %10s %7s %10s %8s %8s %8s %10s %8s\n" variant "frames out" ratio "median ns" "min ns" \
  "x plain" paired "instr/fr" "x plain"
for v in "${variants[@]}"; do
  read -r med min < <(stat "$work/$v")
  paste "$work/$v" "$work/plain" | awk '{ printf "%.6f\n", $1 / $2 }' > "$work/$v.paired"
  read -r paired _ < <(stat "$work/$v.paired")
  ins=$([ "$v" = plain ] && echo "$pins" || instructions "$v")
  awk -v w="${what[$v]}" -v out="$(cat "$work/$v.out")" -v r="$(cat "$work/$v.ratio")" \
    -v med="$med" -v min="$min" -v pmed="$pmed" -v paired="$paired" -v ins="$ins" -v pins="$pins" \
    'BEGIN { x = (ins != "-" && pins != "-") ? sprintf("%.2f", ins / pins) : "-"
      printf "%-52s %10d %7.2f %10.1f %8.1f %8.2f %8.2f %10s %8s\n", w, out, r, med, min,
        med / pmed, paired, ins, x }'
done
