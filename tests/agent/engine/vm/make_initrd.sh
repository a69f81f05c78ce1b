#!/usr/bin/env bash
# Builds an initramfs whose /init is BINARY (stripped), with the shared
# libraries ldd names and a static busybox (for container rootfs and /bin/sh).
# Usage: make_initrd.sh BINARY OUT.cpio
set -euo pipefail
bin=${1:?usage: make_initrd.sh BINARY OUT}
out=${2:?usage: make_initrd.sh BINARY OUT}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,tmp,etc,lib64,lib/x86_64-linux-gnu}
objcopy --strip-debug "$bin" "$stage/init"
for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
  mkdir -p "$stage$(dirname "$lib")"
  cp -L "$lib" "$stage$lib"
done
cp /bin/busybox "$stage/bin/busybox"
for applet in sh true; do ln -s busybox "$stage/bin/$applet"; done
(cd "$stage" && find . | cpio -o -H newc --quiet) > "$out.tmp"
mv "$out.tmp" "$out"
