#!/usr/bin/env bash
# Where smoltcp's poll CPU goes in issue 16's ACK experiment (seed 000 on real traffic), per
# data segment sent, with ACK merging off and on.
#
# usage: scripts/ack-merge-profile.sh [RUNS] [MIB]   (root, perf; defaults 4 runs of 64 MiB)
#
# Runs the test crates/drivers-myri/tests/xdp_ack_merge.rs once per mode (XDP_ACK_ONLY=off,
# then on) under `perf record` with DWARF call graphs, keeps the samples taken inside smoltcp's
# `Interface::poll` (what the test's service demand measures) and sorts each by the first
# thing on its stack it recognises:
#   payload copy   smoltcp copying the payload from its socket buffer into the frame
#   tx checksum    smoltcp summing the segment for its TCP checksum (software; no offload)
#   smoltcp tx     the rest of smoltcp's send path (TCP state, IP and Ethernet headers)
#   driver tx      the AF_XDP transmit half (UMEM chunks, TX ring, completions)
#   driver rx      the AF_XDP receive half (RX ring, chunk ownership, fill ring)
#   lro            the coalescer (lro-core) and its smoltcp adapter
#   smoltcp rx     smoltcp processing what it receives: the ACKs that reach it
#   kernel         interrupts and softirqs taken while polling
#   other          the rest
# and prints each as nanoseconds per segment: its share of the mode's poll samples times the
# poll CPU per segment the test measured (thread CPU time, so the two agree).
#
# Seed 000's sender ran netperf TCP_SENDFILE with checksum offload: it neither copied nor
# summed payload. What ACK merging can save is the "smoltcp rx" line; the copy and checksum
# lines are what this sender pays and that one did not.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-4}
mib=${2:-64}
[ "$(id -u)" = 0 ] || { echo "ack-merge-profile: needs root (namespaces, veth, XDP, AF_XDP)"; exit 1; }
command -v perf >/dev/null || { echo "ack-merge-profile: perf not found (apt-get install -y linux-perf)"; exit 1; }

build=$(cargo test --release -p drivers-myri --all-features --test xdp_ack_merge --no-run 2>&1) ||
  { echo "$build"; echo "ack-merge-profile: could not build the test binary"; exit 1; }
bin=$(echo "$build" | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
[ -x "$bin" ] || { echo "$build"; echo "ack-merge-profile: no test binary in cargo's output"; exit 1; }

tmp=$(mktemp -d /tmp/ack-merge-profile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for mode in off on; do
  XDP_ACK_ONLY=$mode XDP_ACK_RUNS=$runs XDP_ACK_MIB=$mib \
    perf record -q -F 1000 --call-graph dwarf,16384 -o "$tmp/$mode.data" \
    "$bin" --nocapture >"$tmp/$mode.log" 2>&1 || { cat "$tmp/$mode.log"; exit 1; }
  if grep -q "skipped" "$tmp/$mode.log"; then
    cat "$tmp/$mode.log"
    exit 1
  fi
  perf script -i "$tmp/$mode.data" -F ip,sym 2>/dev/null >"$tmp/$mode.stacks"
done

python3 - "$tmp" <<'PY'
import re, sys
tmp = sys.argv[1]
# First match wins, from the sampled instruction outwards.
kernel_entry = ("asm_sysvec", "asm_common_interrupt", "sysvec_", "irq_exit", "__irq_exit", "handle_softirqs", "__do_softirq")
# What a stack frame belongs to (None: not recognised); the frame nearest the sampled
# instruction that is recognised decides.
kinds = [
    ("kernel", kernel_entry),
    ("smoltcp rx", ("process_ethernet", "process_ipv4", "process_ipv6", "process_tcp", "Socket::process", "socket_ingress")),
    ("smoltcp tx", ("Repr::emit", "emit_payload", "socket_egress", "dispatch", "poll_egress")),
    ("driver rx", ("XskRx", "RxChunk", "Area::claim", "WriteFill", "collect_returned", "UmemFrame")),
    ("driver tx", ("XskTx", "TxBuffer", "TxChunk", "WriteTx", "ReadComplete", "Area::reclaim")),
    ("lro", ("lro_core::", "LroDevice", "LroRxToken", "PendingSink")),
]
def kind(f):
    for name, keys in kinds:
        if any(k in f for k in keys):
            return name
    return None
names = ["kernel", "payload copy", "tx checksum", "smoltcp tx", "driver tx", "driver rx", "lro", "smoltcp rx", "other"]
rows = {}
for mode in ("off", "on"):
    log = open(f"{tmp}/{mode}.log").read()
    m = re.search(r"poll CPU (\d+) ns per segment sent", log)
    if not m:
        sys.exit(f"ack-merge-profile: no poll CPU figure in the {mode} run:\n{log}")
    per_segment = float(m.group(1))
    counts = dict.fromkeys(names, 0)
    total = 0
    for block in open(f"{tmp}/{mode}.stacks").read().split("\n\n"):
        frames = [" ".join(l.split()[1:]) for l in block.strip().splitlines()]
        frames = [f for f in frames if f]
        if not any("Interface::poll" in f for f in frames):
            continue
        total += 1
        first = next((k for k in map(kind, frames) if k), "other")
        if first == "smoltcp tx" and frames[0].startswith("__mem"):
            first = "payload copy"
        elif first == "smoltcp tx" and any("checksum::" in f or "fill_checksum" in f for f in frames[:4]):
            first = "tx checksum"
        counts[first] += 1
    rows[mode] = (per_segment, total, counts)
def ns(mode, name):
    """ns per segment of `name`: its share of the mode's samples times the measured poll CPU."""
    per_segment, total, counts = rows[mode]
    return per_segment * counts[name] / max(total, 1)
print("ns of smoltcp poll CPU per data segment sent (perf samples inside Interface::poll)")
print(f"{'':<14}{'merging off':>13}{'merging on':>12}")
for name in names:
    print(f"{name:<14}{ns('off', name):>13.0f}{ns('on', name):>12.0f}")
print(f"{'total':<14}{rows['off'][0]:>13.0f}{rows['on'][0]:>12.0f}")
print(f"{'samples':<14}{rows['off'][1]:>13}{rows['on'][1]:>12}")
off, on = rows["off"][0], rows["on"][0]
print(f"on/off {on / off:.2f}; without the payload copy and the tx checksum in either mode: ", end="")
strip = lambda mode: ns(mode, "payload copy") + ns(mode, "tx checksum")
print(f"{(on - strip('on')) / (off - strip('off')):.2f}")
PY
