#!/usr/bin/env bash
# Runs lro-core as bare-metal firmware under QEMU and checks it against the host.
#
# For each board, builds firmware/replay (a slice of data/default.pcap.xz embedded in the
# image, pushed through the coalescer in bursts, counters printed over semihosting), runs it
# under qemu-system-arm, replays the same frames (the build step writes them as a pcap too)
# with `lro replay --json` on the host with the same burst, flow-table size, policy and
# checksum mode, and compares every counter. Prints one line per board,
#   firmware <machine> cortex-m4|cortex-m0: <counters> OK
# plus its footprint (sections, engine, stack high-water mark), and exits non-zero on any
# difference, a crash, a hang (QEMU_TIMEOUT seconds, default 120), a stack that reached the
# end of .bss (the firmware checks its paint), or a Toeplitz table linked into a firmware that
# never hashes.
#
# Exit status 3 (reason printed): qemu-system-arm or the library source for -Zbuild-std is
# missing, so CI can skip instead of failing.
#
#   scripts/firmware-qemu.sh            # both boards
#   scripts/firmware-qemu.sh microbit   # one
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# machine  feature     target                 core
BOARDS=(
  "mps2-an386 mps2-an386 thumbv7em-none-eabihf cortex-m4"
  "microbit   microbit   thumbv6m-none-eabi    cortex-m0"
)
only=${1:-}
timeout_s=${QEMU_TIMEOUT:-120}
if [ -n "$only" ] && ! printf '%s\n' "${BOARDS[@]}" | awk '{print $1}' | grep -qx -- "$only"; then
  echo "firmware-qemu: no board '$only' (one of: $(printf '%s\n' "${BOARDS[@]}" | awk '{print $1}' | tr '\n' ' '))" >&2
  exit 2
fi

command -v qemu-system-arm >/dev/null ||
  { echo "firmware-qemu: skipped: qemu-system-arm is not installed (Debian: apt-get install qemu-system-arm)"; exit 3; }
if ! exports=$(scripts/rust-src.sh); then
  echo "firmware-qemu: skipped: no Rust library source for -Zbuild-std (scripts/rust-src.sh above)"
  exit 3
fi

# The host tool first: RUSTC_BOOTSTRAP (below) is part of cargo's fingerprint, so building it
# after the export would rebuild the whole tool.
cargo build --quiet --release --bin lro
lro=${CARGO_TARGET_DIR:-$root/target}/release/lro
eval "$exports"

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
# Ctrl-C or a TERM ends the run (with a failure status). `timeout --foreground` below keeps
# QEMU in this process group, so Ctrl-C (sent to the group) stops it at once; a TERM sent to
# this script alone takes effect when the current QEMU run ends.
trap 'exit 130' INT TERM

# The `counters` object of lro replay's --json (every counter of the engine, by the names
# `Stats::counters` gives them, as the firmware prints them), as key=value lines.
json_kv() {
  grep -o '"counters":{[^}]*}' <<<"$1" | sed 's/^"counters":{//; s/}$//' | tr ',' '\n' |
    sed -E 's/^"([a-z_0-9.]+)":/\1=/'
}

# `key=value` of the word list in $2 whose key is $1.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n1; }

section() { # elf name -> size in bytes (0 if absent)
  local hex
  hex=$(readelf -SW "$1" | awk -v s="$2" '{ for (i = 1; i <= NF; i++) if ($i == s) { print $(i + 4); exit } }')
  echo $((16#${hex:-0}))
}

status=0
for b in "${BOARDS[@]}"; do
  read -r machine feature target core <<<"$b"
  [ -n "$only" ] && [ "$only" != "$machine" ] && continue

  if ! cargo build --release --manifest-path firmware/Cargo.toml -p fw-replay --features "$feature" \
      -Zbuild-std=core --target "$target" --message-format=json-render-diagnostics \
      >"$log/build.json" 2>"$log/build.err"; then
    cat "$log/build.err"
    echo "firmware $machine $core: build FAILED"
    status=1
    continue
  fi
  elf=${CARGO_TARGET_DIR:-firmware/target}/$target/release/fw-replay
  out_dir=$(grep '"reason":"build-script-executed"' "$log/build.json" | grep '"package_id":"[^"]*fw-replay' |
    sed -E 's/.*"out_dir":"([^"]*)".*/\1/' | tail -n1)
  [ -f "$out_dir/slice.pcap" ] || { echo "firmware $machine $core: the build step wrote no slice.pcap"; status=1; continue; }

  set +e
  timeout --foreground "$timeout_s" qemu-system-arm -M "$machine" -nographic -monitor none -serial none \
    -semihosting-config enable=on,target=native -kernel "$elf" >"$log/qemu.out" 2>&1
  rc=$?
  set -e
  head_line=$(sed -n 's/^fw: board=/board=/p' "$log/qemu.out")
  # The counters may take several lines.
  stats=$(sed -n 's/^fw: stats //p' "$log/qemu.out" | tr '\n' ' ')
  memory=$(sed -n 's/^fw: memory //p' "$log/qemu.out")
  sizing=$(sed -n 's/^fw: sizing //p' "$log/qemu.out")
  if [ $rc -ne 0 ] || [ -z "$stats" ]; then
    cat "$log/qemu.out"
    [ $rc -eq 124 ] && echo "firmware $machine $core: no result within ${timeout_s}s"
    echo "firmware $machine $core: FAILED (QEMU exit status $rc)"
    status=1
    continue
  fi

  burst=$(field burst "$head_line")
  flows=$(field flows "$head_line")
  csum=$(field csum "$head_line")
  policy=$(field policy "$head_line")
  # Not left to set -e: lro exits 3 for an input it cannot read, the status CI takes for "skipped".
  if ! host=$("$lro" replay "$out_dir/slice.pcap" --json --burst "$burst" --flows "$flows" \
      --policy "$policy" --csum "$csum"); then
    echo "firmware $machine $core: lro replay of the firmware's frames FAILED"
    status=1
    continue
  fi
  host_kv=$(json_kv "$host")

  diffs=0
  for kv in $stats; do
    k=${kv%%=*} v=${kv#*=}
    h=$(sed -n "s/^${k//./\\.}=//p" <<<"$host_kv")
    if [ "$h" != "$v" ]; then
      echo "firmware $machine: $k = $v, lro replay: ${h:-missing}"
      diffs=$((diffs + 1))
    fi
  done
  n=$(wc -w <<<"$stats")
  if [ "$n" -ne "$(wc -l <<<"$host_kv")" ]; then
    echo "firmware $machine: $n counters, lro replay: $(wc -l <<<"$host_kv")"
    diffs=$((diffs + 1))
  fi

  # Footprint. The frames blob is .rodata too; shown apart.
  blob=$(stat -c %s "$out_dir/frames.bin")
  text=$(( $(section "$elf" .text) + $(section "$elf" .vector_table) ))
  rodata=$(( $(section "$elf" .rodata) - blob ))
  data=$(section "$elf" .data)
  bss=$(section "$elf" .bss)
  stack=$(field stack "$memory")
  echo "footprint $machine: .text $text, .rodata $rodata (+ $blob frames), .data $data, .bss $bss, stack $stack bytes;" \
    "engine $(field engine "$memory") (flows $flows, $(field frames_per_segment "$head_line") frames per segment," \
    "$(field ack_memory "$head_line") ACK records), frame buffers $(field buffers "$memory");" \
    "RAM $((data + bss + stack)), flash $((text + rodata + data))"
  echo "sizing $machine: engine bytes = $(field fixed "$sizing") + N * ($(field per_flow "$sizing") + S * $(field per_frame_slot "$sizing"))" \
    "+ M * $(field per_ack_record "$sizing") (frame handle of $(field frame_handle "$sizing") bytes)"
  # Not grep -q: it exits at the first match, readelf then dies of SIGPIPE and pipefail turns
  # the match into a miss.
  if readelf -sW "$elf" | grep 'toeplitz9MICROSOFT' >/dev/null; then
    echo "firmware $machine: the Microsoft Toeplitz table (36 KiB) is linked although nothing hashes"
    diffs=$((diffs + 1))
  fi

  if [ $diffs -ne 0 ]; then
    echo "firmware $machine $core: $diffs difference(s) from lro replay (burst $burst, flows $flows, $policy, csum $csum) FAILED"
    status=1
    continue
  fi
  echo "firmware $machine $core: $(field frames_in "$stats") frames -> $(field segments "$stats") segments" \
    "($(field frames_merged "$stats") merged, $(field acks_merged "$stats") ACKs merged, $(field predicted "$stats") predicted;" \
    "burst $burst, flows $flows, $policy, csum $csum), $n counters equal to lro replay OK"
done
exit $status
