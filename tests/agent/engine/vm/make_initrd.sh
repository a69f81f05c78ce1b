#!/usr/bin/env bash
# Builds an initramfs whose /init is BINARY (stripped), with the shared
# libraries ldd names and a static busybox (for container rootfs and /bin/sh);
# AGENT, when given, goes to /capsule-agent (the engine runs it as the pod
# holder).
# Usage: make_initrd.sh BINARY OUT.cpio [AGENT]
set -euo pipefail
bin=${1:?usage: make_initrd.sh BINARY OUT [AGENT]}
out=${2:?usage: make_initrd.sh BINARY OUT [AGENT]}
agent=${3:-}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,tmp,etc,lib64,lib/x86_64-linux-gnu}
objcopy --strip-debug "$bin" "$stage/init"
[ -z "$agent" ] || objcopy --strip-debug "$agent" "$stage/capsule-agent"
for lib in $(ldd "$bin" $agent | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u); do
  mkdir -p "$stage$(dirname "$lib")"
  cp -L "$lib" "$stage$lib"
done
cp /bin/busybox "$stage/bin/busybox"
for applet in sh true; do ln -s busybox "$stage/bin/$applet"; done
(cd "$stage" && find . | cpio -o -H newc --quiet) > "$out.tmp"
mv "$out.tmp" "$out"
