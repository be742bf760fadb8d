#!/usr/bin/env bash
# Makes the source of the Rust standard library that matches the active `rustc` available to
# `cargo build -Zbuild-std=core`, so the no_std crates build for bare-metal targets whose
# prebuilt `core` is not installed (thumbv7em-none-eabihf, thumbv6m-none-eabi,
# riscv32imac-unknown-none-elf, armv7a-none-eabi, ...) without downloading a toolchain, a
# target or a rustup component.
#
#   eval "$(scripts/rust-src.sh)"     # prints two export lines; exit 1 (and a reason) if none
#   cargo build -Zbuild-std=core --target thumbv6m-none-eabi -p lro-core
#
# Where the source comes from, first that works:
#   1. the cache: $RUST_SRC_CACHE/<rustc version>/library (default ~/.cache/lro-rust-src), so
#      only the first run on a machine pays for the download (~30 MB of compressed apt lists,
#      ~90 MB on disk until the source is unpacked, and a 6 MB package);
#   2. a tarball of the `library/` directory named rust-library-<rustc version>.tar.xz in
#      $RUST_SRC_TARBALLS (a directory; unset: not looked for);
#   3. Debian's architecture-independent `rust-src` package of the same release, from the
#      machine's own Debian mirror (the one /etc/apt names), in the suites that carry recent
#      Rust (sid, trixie-backports, forky). apt runs with a private state directory inside the
#      cache, so /etc/apt and the system's package lists stay untouched, and apt checks the
#      archive signatures as usual.
#
# The stable rustc accepts -Z flags with RUSTC_BOOTSTRAP=1; __CARGO_TESTS_ONLY_SRC_ROOT tells
# cargo where the library source is instead of the rustup component.
set -euo pipefail

ver=$(rustc -V | awk '{print $2}')            # 1.95.0, or 1.97.0-nightly
base=${ver%%-*}
case $ver in
  *-nightly|*-beta*) want="^${base%.*}\\.[0-9]+\\+" ;;  # the same minor release
  *) want="^${base//./\\.}\\+" ;;                        # Debian's build of this release
esac

cache=${RUST_SRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lro-rust-src}
dest=$cache/$ver
say() { echo "rust-src: $*" >&2; }

if [ ! -f "$dest/library/core/src/lib.rs" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  tarball=${RUST_SRC_TARBALLS:+$RUST_SRC_TARBALLS/rust-library-$ver.tar.xz}
  if [ -n "$tarball" ] && [ -f "$tarball" ]; then
    say "unpacking $tarball"
    tar -xJf "$tarball" -C "$tmp"
  else
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
      { say "no cached source, no tarball and no apt-get/dpkg-deb to fetch Debian's rust-src"; exit 1; }
    # A glob that matches nothing leaves sed/awk a missing file (exit 2): with pipefail and -e
    # that must not end the script before the next place is looked at.
    mirror=$(sed -n 's|^URIs: *\(\S*/debian\)/*$|\1|p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 || true)
    [ -n "$mirror" ] ||
      mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1 || true)
    [ -n "$mirror" ] || { say "no Debian mirror configured in /etc/apt"; exit 1; }
    apt=$cache/apt
    mkdir -p "$apt/lists/partial" "$apt/archives/partial"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    : > "$apt/sources.list"
    for suite in sid trixie-backports forky; do
      echo "deb [signed-by=$keyring] $mirror $suite main" >> "$apt/sources.list"
    done
    opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt" -o Dir::Cache::archives="$apt/archives"
          -o Debug::NoLocking=1 -o APT::Get::List-Cleanup=0)
    # apt drops to the _apt user for downloads, who cannot write into a private directory.
    [ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)
    say "looking for rust-src $base in $mirror (sid, trixie-backports, forky)"
    # A suite that is missing or signed by a key this machine does not know is skipped with a
    # warning; the others still count.
    apt-get "${opts[@]}" -qq update >&2 || true
    debver=$(apt-cache "${opts[@]}" madison rust-src 2>/dev/null | awk -v p="$want" '$3 ~ p { print $3; exit }')
    [ -n "$debver" ] || { say "Debian has no rust-src for rustc $ver: -Zbuild-std is unavailable"; exit 1; }
    say "fetching rust-src $debver"
    (cd "$tmp" && apt-get "${opts[@]}" -qq download "rust-src=$debver" >&2)
    dpkg-deb -x "$tmp"/rust-src_*.deb "$tmp/x"
    src=$(find "$tmp/x/usr/src" -maxdepth 2 -type d -name library | head -n1)
    [ -n "$src" ] && [ -f "$src/core/src/lib.rs" ] || { say "rust-src $debver has no library/core"; exit 1; }
    mv "$src" "$tmp/library"
    rm -rf "$tmp/x" "$tmp"/rust-src_*.deb "$apt/lists"   # the lists are ~90 MB, not needed again
  fi
  [ -f "$tmp/library/core/src/lib.rs" ] || { say "the source has no library/core/src/lib.rs"; exit 1; }
  # Atomic: a run cut short leaves no half-unpacked cache behind.
  rm -rf "$dest" && mkdir -p "$dest" && mv "$tmp/library" "$dest/library"
fi
echo "export RUSTC_BOOTSTRAP=1"
echo "export __CARGO_TESTS_ONLY_SRC_ROOT=$dest/library"
