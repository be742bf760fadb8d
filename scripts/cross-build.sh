#!/usr/bin/env bash
# Builds every no_std crate of the workspace for bare-metal targets whose prebuilt `core` is not
# installed, with `-Zbuild-std=core` over the library source scripts/rust-src.sh provides.
#
#   scripts/cross-build.sh              # all targets below
#   scripts/cross-build.sh thumbv6m-none-eabi
#
# Exit 0 when every build passed; 1 when one failed; 3 (with the reason printed) when the
# standard library source cannot be had, so CI can tell "skipped" from "broken".
set -euo pipefail
cd "$(dirname "$0")/.."

# The no_std crates, in one place. A directory that does not exist (yet) is skipped, so a crate
# joins the cross-builds by being created. Each is built with --no-default-features (its no_std
# core) and, when its manifest declares the feature, once more with `test-utils` (simulated
# devices, frame builders: code firmware tests link too).
CRATES=(
  crates/lro-core
  crates/lro-gre
  crates/drivers-myri
  crates/drivers-ipoib
)
# Cortex-M4F (hard float), Cortex-M0 (no atomic compare-and-swap), RISC-V RV32IMAC.
TARGETS=(thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imac-unknown-none-elf)
[ $# -gt 0 ] && TARGETS=("$@")

if ! exports=$(scripts/rust-src.sh); then
  echo "cross-build: skipped: the Rust standard library source for $(rustc -V) cannot be had (see above)"
  exit 3
fi
eval "$exports"

has_feature() { # manifest feature
  awk -v f="$2" '/^\[/{s=($0=="[features]")} s && $1==f {found=1} END{exit !found}' "$1"
}

failed=()
for target in "${TARGETS[@]}"; do
  for dir in "${CRATES[@]}"; do
    manifest=$dir/Cargo.toml
    [ -f "$manifest" ] || continue
    sets=("")
    has_feature "$manifest" test-utils && sets+=("test-utils")
    for features in "${sets[@]}"; do
      what="$(basename "$dir") for $target${features:+ (features: $features)}"
      if cargo build --quiet -Zbuild-std=core --target "$target" --manifest-path "$manifest" \
          --target-dir target/cross --no-default-features ${features:+--features "$features"}; then
        echo "cross-build: ok  $what"
      else
        echo "cross-build: FAILED $what"
        failed+=("$what")
      fi
    done
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'cross-build: %d build(s) failed\n' "${#failed[@]}"
  exit 1
fi
