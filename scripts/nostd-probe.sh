#!/usr/bin/env bash
# Proves lro-core is no_std and allocation-free on the host target (no extra target needed):
# builds a #![no_std] binary without a global allocator that drives the engine, runs it, and
# checks that it imports no allocator symbol.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --manifest-path nostd-probe/Cargo.toml --target-dir target/nostd-probe
bin=target/nostd-probe/release/nostd-probe
"$bin" || { echo "nostd-probe: the engine did not coalesce as expected (exit $?)"; exit 1; }
imports=$(nm -D "$bin" | awk '$1 == "U" {print $2}')
if echo "$imports" | grep -Eq '^(malloc|calloc|realloc|free|__rust_alloc|__rg_alloc)'; then
  echo "nostd-probe: allocator symbols linked:"; echo "$imports"; exit 1
fi
echo "nostd-probe: ok (no_std, no allocator; imports: $(echo $imports | tr '\n' ' '))"
if rustup target list --installed 2>/dev/null | grep -q '^thumbv7em-none-eabihf$'; then
  cargo build -p lro-core --target thumbv7em-none-eabihf
  echo "nostd-probe: lro-core also builds for thumbv7em-none-eabihf"
else
  echo "nostd-probe: thumbv7em-none-eabihf not installed here, embedded cross-build skipped"
fi
