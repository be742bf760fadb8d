#!/usr/bin/env bash
# The ring on a real MAC model, end to end: the Linux kernel's TCP client sends data through a
# TAP device to firmware running under QEMU on an emulated NXP ENET (`mcimx6ul-evk`,
# Cortex-A7). The MAC's receive DMA fills drivers-myri's ring, frames go through lro-core into
# smoltcp, and the firmware hashes (SHA-256) what smoltcp received. Prints
#   mac-e2e: <bytes> bytes byte-exact, <frames> frames -> <segments> segments
# and exits 0 only when the firmware's hash matches the hash of the data sent.
#
# Needs root, /dev/net/tun, ip (iproute2), qemu-system-arm and the Rust library source of
# scripts/rust-src.sh; exit status 3 (reason printed) when one is missing, so CI can skip.
# Gives up after MAC_E2E_TIMEOUT seconds (default 240). Everything runs in a network
# namespace of its own (fw<pid>ns) holding the TAP device (fw<pid>t, 198.18.0.1/24; the
# firmware is 198.18.0.2); both go away on exit, also on failure.
#
#   scripts/firmware-mac-e2e.sh                 # 4 MiB
#   MAC_E2E_BYTES=16777216 scripts/firmware-mac-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bytes=${MAC_E2E_BYTES:-4194304}
timeout_s=${MAC_E2E_TIMEOUT:-240}
skip() { echo "mac-e2e: skipped: $*"; exit 3; }
[ "$(id -u)" = 0 ] || skip "needs root (a TAP device and a network namespace)"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
command -v qemu-system-arm >/dev/null || skip "qemu-system-arm is not installed (Debian: apt-get install qemu-system-arm)"
exports=$(scripts/rust-src.sh) || skip "no Rust library source for -Zbuild-std (scripts/rust-src.sh above)"
eval "$exports"

tmp=$(mktemp -d)
tag=fw$$
ns=${tag}ns
tap=${tag}t
qpid=
cpid=
cleanup() {
  # The client too: left running it would keep the namespace (and its TAP) alive for up to
  # $timeout_s seconds after the name is gone.
  for pid in $qpid $cpid; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! cargo build --quiet --release --manifest-path firmware/Cargo.toml -p fw-mac-e2e \
    -Zbuild-std=core --target armv7a-none-eabi 2>"$tmp/build.err"; then
  cat "$tmp/build.err"
  echo "mac-e2e: firmware build FAILED"
  exit 1
fi
elf=${CARGO_TARGET_DIR:-firmware/target}/armv7a-none-eabi/release/fw-mac-e2e

ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" tuntap add dev "$tap" mode tap
ip -n "$ns" addr add 198.18.0.1/24 dev "$tap"
ip -n "$ns" link set "$tap" up

head -c "$bytes" /dev/urandom >"$tmp/data"
sent=$(sha256sum "$tmp/data" | cut -d' ' -f1)

ip netns exec "$ns" timeout "$timeout_s" qemu-system-arm -M mcimx6ul-evk -m 256M \
  -nographic -monitor none -serial none -semihosting-config enable=on,target=native \
  -kernel "$elf" -nic "tap,ifname=$tap,script=no,downscript=no" >"$tmp/qemu.out" 2>&1 &
qpid=$!

for _ in $(seq 100); do
  grep -q '^mac-e2e: fw listening' "$tmp/qemu.out" && break
  kill -0 "$qpid" 2>/dev/null || break
  sleep 0.2
done
if ! grep -q '^mac-e2e: fw listening' "$tmp/qemu.out"; then
  cat "$tmp/qemu.out"
  echo "mac-e2e: the firmware did not come up FAILED"
  exit 1
fi

# The kernel's TCP stack, through bash's /dev/tcp: connect, send the file, close.
start=$(date +%s.%N)
ip netns exec "$ns" timeout "$timeout_s" bash -c \
  'exec 3<>/dev/tcp/198.18.0.2/5201 && cat "$1" >&3 && exec 3>&-' _ "$tmp/data" &
cpid=$!
while kill -0 "$cpid" 2>/dev/null && kill -0 "$qpid" 2>/dev/null; do
  sleep 0.1
done
# The firmware reports and exits once it has read the client's FIN. The client is done when
# its data sits in the kernel's send buffer (up to all of it), so the firmware gets a minute
# more after that; a client still sending when QEMU has gone gets five seconds.
if kill -0 "$qpid" 2>/dev/null; then
  for _ in $(seq 600); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
else
  for _ in $(seq 50); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
fi
kill "$cpid" "$qpid" 2>/dev/null || true
client_rc=0
wait "$cpid" || client_rc=$?
cpid=
set +e
wait "$qpid"
rc=$?
set -e
qpid=
end=$(date +%s.%N)
if [ $client_rc -ne 0 ]; then
  cat "$tmp/qemu.out"
  echo "mac-e2e: the TCP client did not finish sending (exit status $client_rc) FAILED"
  exit 1
fi

line=$(grep '^mac-e2e: fw bytes=' "$tmp/qemu.out" || true)
field() { tr ' ' '\n' <<<"$line" | sed -n "s/^$1=//p" | head -n1; }
got_bytes=$(field bytes)
got_hash=$(field sha256)
if [ $rc -ne 0 ] || [ -z "$line" ]; then
  cat "$tmp/qemu.out"
  echo "mac-e2e: the firmware did not report (QEMU exit status $rc) FAILED"
  exit 1
fi
echo "mac-e2e: firmware: ${line#mac-e2e: fw }"
echo "mac-e2e: $(awk -v a="$start" -v b="$end" -v n="$bytes" 'BEGIN { printf "%.1f s wall clock, %.2f MB/s", b - a, n / (b - a) / 1e6 }')"
if [ "$got_bytes" != "$bytes" ] || [ "$got_hash" != "$sent" ]; then
  echo "mac-e2e: sent $bytes bytes sha256 $sent; the firmware received $got_bytes bytes sha256 $got_hash FAILED"
  exit 1
fi
echo "mac-e2e: $got_bytes bytes byte-exact, $(field frames) frames -> $(field segments) segments"
