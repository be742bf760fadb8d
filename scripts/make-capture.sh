#!/usr/bin/env bash
# Makes the small real captures the `lro` command-line tool ships with (data/), from the Linux
# kernel's TCP stack talking between two network namespaces joined by a veth pair, following
# ../shared/captures/README.md (the project's shared data, beside the checkout).
#
# Run as root from the repository root:
#     apt-get install -y iperf3 tcpdump ethtool xz-utils
#     scripts/make-capture.sh            # writes data/*.pcap.xz and data/bad/*
#     scripts/make-capture.sh bench      # writes data/bench/*.pcap.xz (also needs nftables)
#
# What it writes:
#   data/default.pcap.xz  IPv4, 2 parallel flows, 1.5 MB, receiver GRO off (so an ACK every
#                         second segment: many pure ACKs to merge), repeating payload (so it
#                         compresses to a few hundred KB); then IPv6 (link-local), 1 flow, 256 KB.
#                         Compiled into the `lro` binary as its default input.
#   data/small.pcap.xz    IPv4 2 flows of 96 KB + IPv6 1 flow of 64 KB, random payload, receiver
#                         GRO off: the integration tests' main input (random bytes make the
#                         payload comparison strict).
#   data/bad/*            error-path inputs: garbage bytes, a truncated pcap, an unsupported link type.
#   data/bench/ack-heavy.pcap.xz  (`bench`) IPv4, 16 parallel flows, 8 MB, the receiver ACKs every
#                         segment (`quickack 1` on its route, GRO off): a pure ACK per data frame.
#   data/bench/lossy.pcap.xz      (`bench`) IPv4, 8 parallel flows, 8 MB, 1% of the data frames
#                         dropped at random by the receiver (nftables `numgen random`; this kernel
#                         has no netem), SACK on: retransmissions, duplicate ACKs with SACK blocks.
#                         Captured on the sender's side, so the dropped frames are in it too.
#
# The committed captures were made before tcpdump ran in immediate mode, which lost the frames
# of its last buffer block: default.pcap.xz lacks its last 2 FINs, the bench captures their
# last part (9577 and 6739 frames, no FIN; their transfers' tails are not in them). They are
# kept as they are: the measurements in BENCHMARKS.md and README.md were taken on them. A run
# of this script now fails when tcpdump did not write every frame its filter took.
#
# Only the addresses 198.18.0.1 and 198.18.0.2 (RFC 2544 benchmarking range) are assigned, inside
# namespaces this script creates; the IPv6 run uses the link-local addresses the kernel gives the
# veth ends itself. The namespaces are deleted on exit, even on failure.
set -euo pipefail

out_dir="${OUT_DIR:-data}"
ns_a="lrocap-a-$$"
ns_b="lrocap-b-$$"
work="$(mktemp -d)"
tcpdump_pid=""
partial=""

cleanup() {
    set +e
    if [[ -n "$tcpdump_pid" ]]; then kill "$tcpdump_pid" 2>/dev/null; wait "$tcpdump_pid" 2>/dev/null; fi
    # Deleting a namespace kills nothing by itself: stop the iperf3 servers we started in it.
    for ns in "$ns_a" "$ns_b"; do
        if ip netns list | grep -qw "$ns"; then
            for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
            ip netns del "$ns"
        fi
    done
    rm -rf "$work"
    [[ -z "$partial" ]] || rm -f "$partial"
}
# INT/TERM must end the script: a handler that only cleaned up would return into it with
# `set +e` (from cleanup) in force, and the remaining steps would run against the deleted
# namespaces and work directory, write empty data/*.pcap.xz and exit 0.
trap cleanup EXIT
trap 'exit 130' INT TERM

need() { command -v "$1" >/dev/null || { echo "make-capture: missing $1 (apt-get install -y iperf3 tcpdump ethtool xz-utils)" >&2; exit 1; }; }
need ip; need iperf3; need tcpdump; need ethtool; need xz
[[ $(id -u) -eq 0 ]] || { echo "make-capture: must run as root (network namespaces)" >&2; exit 1; }

# tcpdump on the sender's end of the veth pair, writing `$1`. `--immediate-mode`: without it
# the kernel hands tcpdump its last block only after a timeout, and a capture stopped sooner
# loses its tail (the FINs among it).
start_tcpdump() {
    ip netns exec "$ns_a" tcpdump -i lrova -s 0 -B 65536 --immediate-mode -U -w "$1" tcp 2>"$work/tcpdump.log" &
    tcpdump_pid=$!
}

# Stops tcpdump and fails unless it wrote every frame its filter took.
stop_tcpdump() {
    kill -INT "$tcpdump_pid"
    wait "$tcpdump_pid" || true
    tcpdump_pid=""
    local captured received dropped
    captured="$(awk '/packets captured/ {print $1}' "$work/tcpdump.log")"
    received="$(awk '/packets received by filter/ {print $1}' "$work/tcpdump.log")"
    dropped="$(awk '/packets dropped by kernel/ {print $1}' "$work/tcpdump.log")"
    if [[ -z "$captured" || "$captured" != "$received" || "$dropped" != 0 ]]; then
        echo "make-capture: tcpdump lost frames:" >&2
        cat "$work/tcpdump.log" >&2
        exit 1
    fi
}

# Compresses `$1` into `$2` through a file beside it, renamed into place once whole (a rename
# in one directory, so an interrupted run never leaves a partial file where a committed
# capture was; cleanup removes the partial one).
publish() {
    partial="$2.partial.$$"
    xz -9e -T1 -c "$1" >"$partial"
    mv -f "$partial" "$2"
    partial=""
    echo "make-capture: $2 ($(stat -c %s "$2") bytes, $(stat -c %s "$1") uncompressed)"
}

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add lrova type veth peer name lrovb netns "$ns_b"
ip link set lrova netns "$ns_a"
ip -n "$ns_a" addr add 198.18.0.1/24 dev lrova
ip -n "$ns_b" addr add 198.18.0.2/24 dev lrovb
ip -n "$ns_a" link set lo up
ip -n "$ns_b" link set lo up
ip -n "$ns_a" link set lrova up
ip -n "$ns_b" link set lrovb up
# Wire-size segments with real checksums on the sender, real checksums on the ACKs, and a
# receiver without GRO so it ACKs every second segment (an ACK-heavy trace).
ip netns exec "$ns_a" ethtool -K lrova tso off gso off tx off >/dev/null
ip netns exec "$ns_b" ethtool -K lrovb tx off gro off >/dev/null

# Wait for the IPv6 link-local addresses to leave the tentative (DAD) state.
ll_b=""
for _ in $(seq 50); do
    ll_b="$(ip -n "$ns_b" -6 addr show dev lrovb scope link -tentative | awk '/inet6/ {sub("/.*", "", $2); print $2; exit}')"
    ll_a="$(ip -n "$ns_a" -6 addr show dev lrova scope link -tentative | awk '/inet6/ {print $2; exit}')"
    [[ -n "$ll_b" && -n "$ll_a" ]] && break
    sleep 0.2
done
[[ -n "$ll_b" ]] || { echo "make-capture: no IPv6 link-local address on the receiver" >&2; exit 1; }

# One capture: IPv4 run(s), then an IPv6 run. Arguments: output name, iperf3 payload options,
# IPv4 bytes in total, IPv4 parallel flows, IPv6 bytes.
capture() {
    local name="$1" payload="$2" v4_bytes="$3" v4_flows="$4" v6_bytes="$5"
    local pcap="$work/$name.pcap"
    start_tcpdump "$pcap"
    sleep 1
    ip netns exec "$ns_b" iperf3 -s -1 -D -B 198.18.0.2
    sleep 0.3
    ip netns exec "$ns_a" iperf3 -c 198.18.0.2 -n "$v4_bytes" -P "$v4_flows" -b 100M $payload >/dev/null
    ip netns exec "$ns_b" iperf3 -s -1 -D -B "$ll_b%lrovb"
    sleep 0.3
    ip netns exec "$ns_a" iperf3 -c "$ll_b%lrova" -n "$v6_bytes" -P 1 -b 50M $payload >/dev/null
    sleep 0.5
    stop_tcpdump
    publish "$pcap" "$out_dir/$name.pcap.xz"
    cp "$pcap" "$work/$name.keep"
}

# A benchmark capture: IPv4 only. Arguments: output name, parallel flows, bytes, the receiver
# ACKs every segment (1/0), per-mille of data frames the receiver drops.
bench_capture() {
    local name="$1" flows="$2" bytes="$3" quickack="$4" loss="$5"
    local pcap="$work/$name.pcap"
    if [[ "$quickack" == 1 ]]; then
        ip -n "$ns_b" route change 198.18.0.0/24 dev lrovb proto kernel scope link src 198.18.0.2 quickack 1
    fi
    if [[ "$loss" != 0 ]]; then
        ip netns exec "$ns_b" nft -f - <<NFT
table inet lrocap_loss {
    chain input {
        type filter hook input priority 0; policy accept;
        tcp dport 5201 meta length > 100 numgen random mod 1000 < $loss drop
    }
}
NFT
        ip netns exec "$ns_b" sysctl -qw net.ipv4.tcp_sack=1
        ip netns exec "$ns_a" sysctl -qw net.ipv4.tcp_sack=1
    fi
    start_tcpdump "$pcap"
    sleep 1
    ip netns exec "$ns_b" iperf3 -s -1 -D -B 198.18.0.2
    sleep 0.3
    ip netns exec "$ns_a" iperf3 -c 198.18.0.2 -n "$bytes" -P "$flows" -b 400M --repeating-payload >/dev/null
    # Retransmissions after a loss can hold a connection's close back for a while.
    sleep 2
    stop_tcpdump
    if [[ "$loss" != 0 ]]; then
        ip netns exec "$ns_b" nft delete table inet lrocap_loss
    fi
    if [[ "$quickack" == 1 ]]; then
        ip -n "$ns_b" route change 198.18.0.0/24 dev lrovb proto kernel scope link src 198.18.0.2
    fi
    publish "$pcap" "$out_dir/bench/$name.pcap.xz"
}

if [[ "${1:-}" == bench ]]; then
    command -v nft >/dev/null || { echo "make-capture: missing nft (apt-get install -y nftables)" >&2; exit 1; }
    mkdir -p "$out_dir/bench"
    bench_capture ack-heavy 16 8M 1 0
    bench_capture lossy 8 8M 0 10
    echo "make-capture: done"
    exit 0
fi

mkdir -p "$out_dir/bad"
capture default --repeating-payload 1536K 2 256K
capture small "" 192K 2 64K

# Error-path inputs.
printf 'this is not a capture file, just some text\n%.0s' 1 2 3 >"$out_dir/bad/garbage.pcap"
# The first 3000 bytes of a real pcap: the global header, whole packets, then a cut packet.
head -c 3000 "$work/small.keep" >"$out_dir/bad/truncated.pcap"
# A valid pcap header announcing link type 105 (IEEE 802.11), with one 4-byte packet.
printf '\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x69\x00\x00\x00' >"$out_dir/bad/linktype-802-11.pcap"
printf '\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x04\x00\x00\x00\x08\x00\x00\x00' >>"$out_dir/bad/linktype-802-11.pcap"
echo "make-capture: done"
