#!/bin/bash
# Fetches the guest kernel for the initrd builder, called by `make deps`:
# Debian's linux-image-amd64 resolved to its current versioned package
# (linux-image-6.1.0-NN-amd64), downloaded with `apt-get download` and
# unpacked with `dpkg -x` into the build cache. Nothing is installed on the
# host (no /boot, no /lib/modules change). depmod -b then writes the
# modules.dep the package's postinst would have made.
#
# Result: $CACHE/current -> $CACHE/<package>_<version>/ holding boot/vmlinuz-*,
# lib/modules/<release>/ and capsule-kernel.env (KERNEL_PACKAGE=, ...).
# Idempotent: a complete unpack of the candidate version is kept and reused.
#
# Environment: CAPSULE_GUEST_KERNEL_CACHE (default <repo>/.cache/guest-kernel),
# CAPSULE_GUEST_KERNEL_PKG (a versioned package to use instead of resolving
# linux-image-amd64).
set -euo pipefail

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CAPSULE_GUEST_KERNEL_CACHE:-$src_dir/.cache/guest-kernel}
meta=linux-image-amd64

log() { echo "fetch-guest-kernel: $*"; }
die() { echo "fetch-guest-kernel: error: $*" >&2; exit 1; }

for tool in apt-cache apt-get dpkg depmod; do
  command -v "$tool" >/dev/null || die "$tool not found (Debian host with kmod needed)"
done

pkg=${CAPSULE_GUEST_KERNEL_PKG:-}
if [ -z "$pkg" ]; then
  # "  Depends: linux-image-6.1.0-57-amd64" -> the versioned image package.
  pkg=$(apt-cache depends "$meta" 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
  [ -n "$pkg" ] || die "cannot resolve $meta to a versioned kernel package (apt-get update first?)"
fi
version=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')
[ -n "$version" ] && [ "$version" != "(none)" ] || die "no candidate version of $pkg in the apt archive"

dest="$cache/${pkg}_${version}"
if [ -f "$dest/capsule-kernel.env" ]; then
  log "$pkg $version already unpacked in $dest"
else
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "downloading $pkg=$version"
  # APT::Sandbox::User=root: the cache folder is root's, _apt cannot write it.
  (cd "$work" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$version" >/dev/null)
  deb=$(ls "$work"/*.deb)
  log "unpacking $(basename "$deb")"
  dpkg -x "$deb" "$work/root"
  rm -f "$deb"
  release=$(ls "$work/root/lib/modules")
  [ -n "$release" ] && [ "$(echo "$release" | wc -l)" = 1 ] || die "expected one module tree in $deb"
  ls "$work/root/boot/vmlinuz-$release" >/dev/null || die "$deb has no boot/vmlinuz-$release"
  depmod -b "$work/root" "$release"
  cat > "$work/root/capsule-kernel.env" <<ENV
KERNEL_PACKAGE=$pkg
KERNEL_VERSION=$version
KERNEL_RELEASE=$release
ENV
  rm -rf "$dest"
  mv "$work/root" "$dest"
  log "kernel $release ready in $dest"
fi

ln -sfn "$(basename "$dest")" "$cache/current"
# Older unpacks are 400 MB each and nothing points at them any more.
for old in "$cache"/linux-image-*; do
  [ "$old" = "$dest" ] || rm -rf "$old"
done
