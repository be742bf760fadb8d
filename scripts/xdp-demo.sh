#!/usr/bin/env bash
# smoltcp on AF_XDP with lro in front, fed by the kernel's TCP client, with lro and without, and
# the kernel's own TCP receiver (with its GRO) on the same veth for comparison.
#
# usage: scripts/xdp-demo.sh [MIB]        (root; MIB per transfer, default 512)
#
# Two network namespaces joined by a veth pair: xdpdemo<pid>b holds the kernel client at
# 198.18.0.1 (checksum offload, TSO and GSO off, so frames on the wire are wire-size with real
# checksums), xdpdemo<pid>a the receiving side at 198.18.0.2: the example
# crates/drivers-myri/examples/xdp_server.rs running smoltcp on an AF_XDP socket (XDP program
# attached to the veth in native mode), then the kernel's own receiver. Prints throughput,
# frames received and frames smoltcp processed for each run. Everything it creates is removed
# on exit, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

mib=${1:-512}
[ "$(id -u)" = 0 ] || { echo "xdp-demo: needs root (namespaces, veth, XDP, AF_XDP)"; exit 1; }
for tool in ip ethtool; do
  command -v "$tool" >/dev/null || { echo "xdp-demo: $tool not found (apt-get install -y iproute2 ethtool)"; exit 1; }
done

p=xdpdemo$$
nsa=${p}a nsb=${p}b ifa=${p}a ifb=${p}b
server_pid= client_pid= out= log=
cleanup() {
  status=$?
  # SIGTERM: the server detaches its XDP program on it (as on Ctrl-C), the client stops.
  # (SIGINT would not do: background jobs of a script ignore it.)
  for pid in $server_pid $client_pid; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [ "$status" != 0 ] && [ -n "$log" ] && [ -f "$log" ]; then
    echo "-- the server's output:"; cat "$log"
  fi
  [ -n "$out" ] && rm -rf "$out"
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$nsb" 2>/dev/null || true
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building the example (release)"
cargo build --release --quiet -p drivers-myri --example xdp_server --features xdp,smoltcp
bin=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/examples/xdp_server

echo "== namespaces $nsa / $nsb, veth $ifa <-> $ifb"
ip netns add "$nsa"
ip netns add "$nsb"
for ns in "$nsa" "$nsb"; do
  ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6'
  ip -n "$ns" link set lo up
done
ip link add "$ifa" netns "$nsa" type veth peer name "$ifb" netns "$nsb"
# smoltcp answers with the interface's own MAC address.
ip -n "$nsa" link set "$ifa" address 02:00:00:00:4d:20 up
ip -n "$nsb" addr add 198.18.0.1/24 dev "$ifb"
ip -n "$nsb" link set "$ifb" up
ip -n "$nsb" neigh replace 198.18.0.2 lladdr 02:00:00:00:4d:20 dev "$ifb" nud permanent
ip netns exec "$nsb" ethtool -K "$ifb" tx off tso off gso off >/dev/null

out=$(mktemp -d)
run_server() { # name, server args...
  local name=$1; shift
  log=$out/$name
  ip netns exec "$nsa" "$bin" "$ifa" --connections 1 "$@" >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    grep -q '^listening' "$out/$name" && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/$name"; echo "xdp-demo: the server did not start"; exit 1; }
    sleep 0.1
  done
  # In the background, so a Ctrl-C interrupts the wait and the trap cleans up at once.
  ip netns exec "$nsb" "$bin" --send 198.18.0.2:5201 "$mib" >"$out/$name.client" &
  client_pid=$!
  wait "$client_pid"
  client_pid=
  wait "$server_pid"
  server_pid=
  cat "$out/$name"
}

echo "== smoltcp on AF_XDP, lro on"
run_server lro
echo "== smoltcp on AF_XDP, lro off"
run_server nolro --no-lro
echo "== the kernel's own TCP receiver on the same veth (GRO on, no XDP program)"
ip -n "$nsa" addr add 198.18.0.2/24 dev "$ifa"
ip netns exec "$nsa" ethtool -K "$ifa" gro on >/dev/null 2>&1 || true
run_server kernel --kernel

echo
echo "== summary ($mib MiB per transfer)"
grep -h '^connection' "$out/lro" "$out/nolro" "$out/kernel"
