#!/usr/bin/env python3
"""Builds a single-layer OCI image-layout tarball from local files.

No registry is reachable from the test machines, so test images (busybox,
pause, netadmin) are assembled at build time from host binaries. Dynamically
linked host programs come in with --host-binary and --host-dir: each file
lands at its host path, with the shared libraries and the dynamic loader
that `ldd` names for it, also at their host paths. The output is what
`ctr -n k8s.io images import FILE` accepts: oci-layout, index.json and
blobs/sha256/{layer tar.gz, config, manifest}, with the full image
reference in the index annotations (io.containerd.image.name and
org.opencontainers.image.ref.name). Output is byte-for-byte reproducible:
fixed mtimes, owners and entry order, and a gzip header without a timestamp.

Example:
  build_oci_image.py --ref capsule.test/pause:latest --out pause.tar \
      --file build/pause:/pause:0755 --entrypoint '["/pause"]'
  build_oci_image.py --ref capsule.test/netadmin:latest --out netadmin.tar \
      --busybox /bin/busybox --host-binary /usr/sbin/xtables-nft-multi \
      --host-dir /usr/lib/x86_64-linux-gnu/xtables \
      --symlink /usr/sbin/iptables:xtables-nft-multi --cmd '["sh"]'
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import sys
import tarfile

# A fixed timestamp (2020-01-01T00:00:00Z) for every tar entry and the
# config's "created", so rebuilding the same inputs gives the same digests.
FIXED_MTIME = 1577836800
FIXED_CREATED = "2020-01-01T00:00:00Z"

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"

# Directories every image gets, with their modes (FHS layout; /tmp sticky).
BASE_DIRS = {
    "bin": 0o755, "dev": 0o755, "etc": 0o755, "proc": 0o755, "root": 0o700,
    "sbin": 0o755, "sys": 0o755, "tmp": 0o1777, "usr": 0o755,
    "usr/bin": 0o755, "usr/sbin": 0o755, "var": 0o755, "run": 0o755,
}

ETC_PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
ETC_GROUP = "root:x:0:\nnogroup:x:65534:\n"


class BuildError(Exception):
    pass


def go_arch():
    """The host architecture in OCI/Go naming (amd64, arm64, ...)."""
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError as e:
        raise BuildError(f"{path}: {e.strerror}") from e


def elf_segment_types(path):
    """The p_type of every program header of the ELF file at `path`."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise BuildError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise BuildError(f"{path}: only 64-bit little-endian ELF is supported")
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3A], "little")
    return {int.from_bytes(data[phoff + i * phentsize:phoff + i * phentsize + 4], "little")
            for i in range(phnum)}


PT_DYNAMIC = 2  # from elf.h
PT_INTERP = 3


def is_static_elf(path):
    """True when the ELF file at `path` has no PT_INTERP program header."""
    return PT_INTERP not in elf_segment_types(path)


def needs_shared_libs(path):
    """True for a dynamic program or a shared library (PT_INTERP or
    PT_DYNAMIC): what `ldd` can list dependencies for."""
    return bool({PT_DYNAMIC, PT_INTERP} & elf_segment_types(path))


class Layer:
    """Collects entries of one layer and writes them as a reproducible tar."""

    def __init__(self):
        self.entries = {}  # path in image (no leading '/') -> TarInfo, bytes

    def _info(self, path, kind, mode):
        info = tarfile.TarInfo(path)
        info.type = kind
        info.mode = mode
        info.mtime = FIXED_MTIME
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    def add_dir(self, path, mode=0o755):
        path = path.strip("/")
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            parent = "/".join(parts[:i])
            existing = self.entries.get(parent)
            if existing is not None and existing[0].type != tarfile.DIRTYPE:
                raise BuildError(f"/{path}: /{parent} is already in the image and not a directory")
            if existing is None:
                m = mode if parent == path else BASE_DIRS.get(parent, 0o755)
                self.entries[parent] = (self._info(parent, tarfile.DIRTYPE, m), None)

    def add_bytes(self, path, data, mode=0o644):
        path = path.strip("/")
        if "/" in path:
            self.add_dir(path.rsplit("/", 1)[0], BASE_DIRS.get(path.rsplit("/", 1)[0], 0o755))
        info = self._info(path, tarfile.REGTYPE, mode)
        info.size = len(data)
        self.entries[path] = (info, data)

    def add_file(self, src, dest, mode=None, what="--file"):
        try:
            with open(src, "rb") as f:
                data = f.read()
            st = os.stat(src)
        except OSError as e:
            raise BuildError(f"{what} {src}: {e.strerror}") from e
        self.add_bytes(dest, data, mode if mode is not None else (st.st_mode & 0o7777))

    def add_symlink(self, path, target):
        path = path.strip("/")
        if "/" in path:
            self.add_dir(path.rsplit("/", 1)[0], BASE_DIRS.get(path.rsplit("/", 1)[0], 0o755))
        info = self._info(path, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.entries[path] = (info, None)

    def tar_bytes(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            # Parents sort before children, so extraction order is valid.
            for path in sorted(self.entries):
                info, data = self.entries[path]
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return buf.getvalue()


def gzip_bytes(data):
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=6, mtime=0, filename="") as gz:
        gz.write(data)
    return buf.getvalue()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def add_busybox(layer, busybox):
    """/bin/busybox plus one symlink per applet at its usual path."""
    if not is_static_elf(busybox):
        raise BuildError(f"{busybox} is dynamically linked; install busybox-static")
    layer.add_file(busybox, "bin/busybox", 0o755)
    try:
        out = subprocess.run([busybox, "--list-full"], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise BuildError(f"{busybox} --list-full: {e}") from e
    for applet in out.split():
        # linuxrc is an initrd hook, not a command; the busybox path itself is
        # the real file.
        if applet in ("linuxrc", "bin/busybox"):
            continue
        layer.add_symlink(applet, "/bin/busybox")


# `ldd` lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)",
# "/lib64/ld-linux-x86-64.so.2 (0x...)", "libfoo.so.1 => not found".
LDD_RESOLVED = re.compile(r"^\s*(\S+)\s+=>\s+(/\S+)\s+\(0x[0-9a-f]+\)$")
LDD_LOADER = re.compile(r"^\s*(/\S+)\s+\(0x[0-9a-f]+\)$")
LDD_MISSING = re.compile(r"^\s*(\S+)\s+=>\s+not found")


def shared_deps(path, what):
    """The absolute host paths of the shared libraries and loader `ldd` names
    for the dynamic ELF file at `path` (the vDSO left out)."""
    try:
        res = subprocess.run(["ldd", path], capture_output=True, text=True)
    except OSError as e:
        raise BuildError(f"{what} {path}: cannot run ldd: {e.strerror}") from e
    if res.returncode != 0:
        raise BuildError(f"{what} {path}: ldd failed: {(res.stderr or res.stdout).strip()}")
    deps = []
    for line in res.stdout.splitlines():
        m = LDD_MISSING.match(line)
        if m:
            raise BuildError(f"{what} {path}: shared library {m.group(1)} not found on the host")
        m = LDD_RESOLVED.match(line) or LDD_LOADER.match(line)
        if m:
            deps.append(m.group(m.lastindex))
        elif line.strip() and not line.strip().startswith("linux-vdso") and \
                line.strip() != "statically linked":
            raise BuildError(f"{what} {path}: unexpected ldd output line {line.strip()!r}")
    return deps


class HostTree:
    """Copies host paths into a layer at the same paths: symlinks as symlinks
    (and what they point at), directories recursively, and for every dynamic
    ELF file the shared libraries `ldd` lists. Parent directories become real
    directories in the image even where the host's are symlinks (a merged-/usr
    host's /lib -> usr/lib): the loader finds libraries at the path ldd gave."""

    def __init__(self, layer):
        self.layer = layer
        self.done = set()

    def add(self, path, what, follow_deps=True):
        path = os.path.normpath(path)
        if not os.path.isabs(path):
            raise BuildError(f"{what} {path}: must be an absolute path")
        if path in self.done:
            return
        self.done.add(path)
        try:
            st = os.lstat(path)
        except OSError as e:
            raise BuildError(f"{what} {path}: {e.strerror}; is its package installed?") from e
        if os.path.islink(path):
            target = os.readlink(path)
            self.layer.add_symlink(path, target)
            resolved = target if os.path.isabs(target) else os.path.join(os.path.dirname(path), target)
            self.add(resolved, f"{what} {path} ->", follow_deps)
        elif os.path.isdir(path):
            self.layer.add_dir(path, st.st_mode & 0o7777)
            for name in sorted(os.listdir(path)):
                self.add(os.path.join(path, name), what, follow_deps)
        elif os.path.isfile(path):
            self.layer.add_file(path, path, st.st_mode & 0o7777, what)
            if follow_deps and is_elf(path) and needs_shared_libs(path):
                for dep in shared_deps(path, what):
                    self.add(dep, f"{what} {path} needs", follow_deps=False)
        else:
            raise BuildError(f"{what} {path}: not a regular file, directory or symlink")


def parse_spec(spec, what, parts_min, parts_max):
    parts = spec.split(":")
    if not parts_min <= len(parts) <= parts_max or not all(parts[:parts_min]):
        raise BuildError(f"{what} {spec!r}: malformed")
    return parts


def build_layer(args):
    layer = Layer()
    for d, mode in BASE_DIRS.items():
        layer.add_dir(d, mode)
    layer.add_bytes("etc/passwd", ETC_PASSWD.encode())
    layer.add_bytes("etc/group", ETC_GROUP.encode())
    if args.busybox:
        add_busybox(layer, args.busybox)
    host = HostTree(layer)
    for path in args.host_binary:
        if not os.path.isfile(path):
            raise BuildError(f"--host-binary {path}: no such file; is its package installed?")
        host.add(path, "--host-binary")
    for path in args.host_dir:
        if not os.path.isdir(path):
            raise BuildError(f"--host-dir {path}: no such directory; is its package installed?")
        host.add(path, "--host-dir")
    for spec in args.file:
        parts = parse_spec(spec, "--file", 2, 3)
        mode = int(parts[2], 8) if len(parts) == 3 else None
        if not os.path.isfile(parts[0]):
            raise BuildError(f"--file {parts[0]}: no such file")
        # --file copies no libc: an ELF program must be static (dynamic ones
        # come in with --host-binary, which brings their libraries).
        if is_elf(parts[0]) and not is_static_elf(parts[0]):
            raise BuildError(f"--file {parts[0]}: dynamically linked; use --host-binary")
        layer.add_file(parts[0], parts[1], mode)
    for spec in args.symlink:
        link, target = parse_spec(spec, "--symlink", 2, 2)
        layer.add_symlink(link, target)
    return layer.tar_bytes()


def json_list(value, flag):
    if value is None:
        return None
    try:
        v = json.loads(value)
    except json.JSONDecodeError as e:
        raise BuildError(f"{flag}: not JSON: {e}") from e
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise BuildError(f"{flag}: must be a JSON list of strings")
    return v


def build_image(args):
    layer_tar = build_layer(args)
    layer_gz = gzip_bytes(layer_tar)
    run_config = {"Env": args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                  "WorkingDir": "/"}
    entrypoint = json_list(args.entrypoint, "--entrypoint")
    cmd = json_list(args.cmd, "--cmd")
    if entrypoint is not None:
        run_config["Entrypoint"] = entrypoint
    if cmd is not None:
        run_config["Cmd"] = cmd
    config = {
        "created": FIXED_CREATED,
        "architecture": args.arch,
        "os": "linux",
        "config": run_config,
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer_tar)]},
        "history": [{"created": FIXED_CREATED, "created_by": "capsule build_oci_image.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": sha256(config_bytes),
                   "size": len(config_bytes)},
        "layers": [{"mediaType": MEDIA_LAYER_GZIP, "digest": sha256(layer_gz),
                    "size": len(layer_gz)}],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [{
            "mediaType": MEDIA_MANIFEST,
            "digest": sha256(manifest_bytes),
            "size": len(manifest_bytes),
            "platform": {"architecture": args.arch, "os": "linux"},
            # containerd names the image from io.containerd.image.name, else
            # from ref.name; a full reference is kept as is by `ctr import`.
            "annotations": {"io.containerd.image.name": args.ref,
                            "org.opencontainers.image.ref.name": args.ref},
        }],
    }
    index_bytes = json.dumps(index, sort_keys=True, separators=(",", ":")).encode()
    blobs = [layer_gz, config_bytes, manifest_bytes]
    return index_bytes, blobs


def write_layout(out_path, index_bytes, blobs):
    layout = Layer()
    layout.add_bytes("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
    layout.add_bytes("index.json", index_bytes)
    for blob in blobs:
        layout.add_bytes("blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob)
    # Layout directories are plain 0755, not the image's FHS modes.
    for path, (info, _) in layout.entries.items():
        if info.type == tarfile.DIRTYPE:
            info.mode = 0o755
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(layout.tar_bytes())
    os.replace(tmp, out_path)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ref", required=True, help="full image reference, e.g. capsule.test/busybox:latest")
    p.add_argument("--out", required=True, help="output OCI layout tarball")
    p.add_argument("--arch", default=go_arch(), help="OCI architecture (default: host's)")
    p.add_argument("--busybox", help="static busybox to install with its applet symlinks")
    p.add_argument("--file", action="append", default=[], metavar="SRC:DEST[:MODE]",
                   help="host file to copy into the image (octal MODE)")
    p.add_argument("--host-binary", action="append", default=[], metavar="PATH",
                   help="host program to copy at the same path, with the shared libraries "
                        "and loader ldd lists for it (repeatable)")
    p.add_argument("--host-dir", action="append", default=[], metavar="PATH",
                   help="host directory to copy recursively at the same path, with the "
                        "ldd dependencies of each dynamic ELF file in it (repeatable)")
    p.add_argument("--symlink", action="append", default=[], metavar="LINK:TARGET",
                   help="symlink in the image; applied last, so it may replace a "
                        "busybox applet link (repeatable)")
    p.add_argument("--env", action="append", metavar="K=V", help="image Env (default: a PATH)")
    p.add_argument("--entrypoint", metavar="JSON", help='e.g. \'["/pause"]\'')
    p.add_argument("--cmd", metavar="JSON", help='e.g. \'["sh"]\'')
    args = p.parse_args(argv)
    if "/" not in args.ref or ":" not in args.ref.rsplit("/", 1)[1]:
        p.error(f"--ref {args.ref!r}: want a full reference like registry.example/name:tag")
    try:
        index_bytes, blobs = build_image(args)
        write_layout(args.out, index_bytes, blobs)
    except BuildError as e:
        print(f"build_oci_image: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
