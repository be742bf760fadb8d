#!/usr/bin/env bash
# Proves lro-core, lro-gre, drivers-myri's core (ring + simulated MAC, without the smoltcp/std
# features) and drivers-ipoib's core (receive queue with copybreak, simulated HCA, receiver
# model) are no_std and allocation-free on the host target (no extra target needed): builds a
# #![no_std] binary without a global allocator that drives the engine, the GRE engine, the ring
# and the queue, runs it, and checks that it imports no allocator symbol.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --manifest-path nostd-probe/Cargo.toml --target-dir target/nostd-probe
bin=target/nostd-probe/release/nostd-probe
"$bin" || { echo "nostd-probe: the engine (exit 1), the drivers-myri ring (exit 2), the GRE engine (exit 3) or the drivers-ipoib queue or model (exit 4) did not behave as expected (exit $?)"; exit 1; }
imports=$(nm -D "$bin" | awk '$1 == "U" {print $2}')
if echo "$imports" | grep -Eq '^(malloc|calloc|realloc|free|__rust_alloc|__rg_alloc)'; then
  echo "nostd-probe: allocator symbols linked:"; echo "$imports"; exit 1
fi
echo "nostd-probe: ok (no_std, no allocator; imports: $(echo $imports | tr '\n' ' '))"
if rustup target list --installed 2>/dev/null | grep -q '^thumbv7em-none-eabihf$'; then
  cargo build -p lro-core -p drivers-myri -p drivers-ipoib --target thumbv7em-none-eabihf
  echo "nostd-probe: lro-core, drivers-myri and drivers-ipoib also build for thumbv7em-none-eabihf"
else
  echo "nostd-probe: thumbv7em-none-eabihf not installed here (scripts/cross-build.sh builds every no_std crate for it with -Zbuild-std)"
fi
