#!/usr/bin/env bash
# Side-by-side timing of `lro bench` and the DPDK GRO peer benchmark on one capture, in
# alternating runs (this kind of machine is shared and noisy: only ratios taken in one session,
# runs interleaved, mean anything).
#
#     scripts/compare-dpdk.sh PEER_DIR CAPTURE [RUNS] [BURST] [-- extra lro bench options]
#
# PEER_DIR: a built copy of shared/tools/peer-dpdk-gro (its build.sh needs libdpdk-dev,
# libpcap-dev and pkg-config); CAPTURE: pcap or pcap.xz. RUNS alternating runs (default 9),
# each the best of 20 rounds, at BURST (default 32), with trusted checksums. Prints, per
# variant, the median and the minimum of the runs' bests, their ratios to DPDK's parse+gro,
# and the median of each run's own ratio to the DPDK run beside it (paired).
# Variants: lro with full checksums (the default output), with `--out-csum partial` (no full
# TCP checksum written, as DPDK and Linux GRO), the same two under `--policy gro`, and the
# floor reference (`lro bench --floor`: a minimal coalescer of one layout with full checksums,
# timed in the same harness; what any engine measured this way costs at least).
set -euo pipefail
cd "$(dirname "$0")/.."

pos=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  pos+=("$1")
  shift
done
[ "${1:-}" = -- ] && shift
extra=("$@")
if [ ${#pos[@]} -lt 2 ] || [ ${#pos[@]} -gt 4 ]; then
  sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" # the comment block above
  exit 2
fi
peer=${pos[0]} capture=${pos[1]}
runs=${pos[2]:-9} burst=${pos[3]:-32}

[ -x "$peer/run.sh" ] && [ -x "$peer/gro_bench" ] || {
  echo "$peer: no built DPDK peer (run its build.sh first)" >&2
  exit 2
}
[ -r "$capture" ] || { echo "$capture: cannot read" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pcap=$work/capture.pcap
case $capture in
  *.xz) xz -dc "$capture" > "$pcap" ;;
  *) cp "$capture" "$pcap" ;;
esac

cargo build --release --quiet
# cargo's target directory, wherever CARGO_TARGET_DIR puts it
lro=${CARGO_TARGET_DIR:-target}/release/lro

variants=(dpdk lro lro_partial gro gro_partial floor)
opts_lro=()
opts_lro_partial=(--out-csum partial)
opts_gro=(--policy gro)
opts_gro_partial=(--policy gro --out-csum partial)
opts_floor=(--floor)

best() { # the JSON field ns_per_frame_best of one `lro bench --json` run
  sed -n 's/.*"ns_per_frame_best":\([0-9.eE+-]*\).*/\1/p'
}

for i in $(seq "$runs"); do
  for v in "${variants[@]}"; do
    if [ "$v" = dpdk ]; then
      # The peer's diagnostics go to a file, shown below when it prints no number (its
      # failure is caught there, not by pipefail, which would exit without a word).
      { "$peer/run.sh" "$pcap" "$burst" 20 2>"$work/peer.err" || true; } \
        | sed -n 's/.*parse+gro.*ns_per_frame=\([0-9.]*\).*/\1/p' >> "$work/$v"
    else
      declare -n opts="opts_$v"
      "$lro" bench "$pcap" --burst "$burst" --rounds 20 --csum trust "${opts[@]}" \
        "${extra[@]}" --json | best >> "$work/$v"
    fi
    # one number per run, or the paired ratios below would pair the wrong runs
    [ "$(wc -l < "$work/$v")" -eq "$i" ] || {
      echo "run $i: $v printed no ns per frame" >&2
      if [ "$v" = dpdk ] && [ -s "$work/peer.err" ]; then
        tail -n 20 "$work/peer.err" >&2
      fi
      exit 1
    }
  done
  echo "run $i of $runs done" >&2
done

stat() { # median and minimum of a file of numbers
  sort -g "$1" | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s %s\n", m, v[1] }'
}

read -r dmed dmin < <(stat "$work/dpdk")
printf "%-12s %10s %10s %14s %12s %14s\n" variant "median ns" "min ns" "median ratio" "min ratio" \
  "paired ratio"
for v in "${variants[@]}"; do
  read -r med min < <(stat "$work/$v")
  # each run's own ratio to the DPDK run beside it, then their median: drift slower than
  # one run cancels out of it
  paste "$work/$v" "$work/dpdk" | awk '{ printf "%.6f\n", $1 / $2 }' > "$work/$v.paired"
  read -r pmed _ < <(stat "$work/$v.paired")
  awk -v v="$v" -v med="$med" -v min="$min" -v dmed="$dmed" -v dmin="$dmin" -v pmed="$pmed" \
    'BEGIN { printf "%-12s %10.1f %10.1f %14.2f %12.2f %14.2f\n", v, med, min, med / dmed,
      min / dmin, pmed }'
done
