#!/usr/bin/env bash
# Prints the path of a guest kernel for engine_vm_test: $CAPSULE_GUEST_KERNEL
# if set, else DEST/vmlinuz, fetched once from Debian's linux-image-amd64
# package (apt-get download + dpkg-deb; the host's /boot is never touched).
set -euo pipefail
dest=${1:?usage: guest_kernel.sh DEST_DIR}
if [[ -n "${CAPSULE_GUEST_KERNEL:-}" ]]; then
  echo "$CAPSULE_GUEST_KERNEL"
  exit 0
fi
if [[ -s "$dest/vmlinuz" ]]; then
  echo "$dest/vmlinuz"
  exit 0
fi
mkdir -p "$dest"
work=$(mktemp -d "$dest/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[[ -n "$pkg" ]] || { echo "guest_kernel.sh: no linux-image package found by apt-cache" >&2; exit 1; }
(cd "$work" && apt-get download -q "$pkg" >&2)
dpkg-deb --fsys-tarfile "$work"/*.deb | tar -x -C "$work" --wildcards './boot/vmlinuz-*'
cp "$work"/boot/vmlinuz-* "$dest/vmlinuz.tmp"
mv "$dest/vmlinuz.tmp" "$dest/vmlinuz"
echo "$dest/vmlinuz"
