#!/usr/bin/env python3
"""Writes the mode-3 seeds of vsock_fuzzer (vhost-user with fds): the start
sequence QEMU 7.2 sends a vhost-user-vsock back end, as the step list
FuzzVhostUserWithFds reads. Run from this folder after changing that format."""
import struct

GET_FEATURES, SET_FEATURES, SET_OWNER, SET_MEM_TABLE = 1, 2, 3, 5
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE = 8, 9, 10, 11
SET_VRING_KICK, SET_VRING_CALL, GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES = 12, 13, 15, 16
SET_VRING_ENABLE, GET_CONFIG = 18, 24

UVA = 0x7F0000000000      # where "QEMU" maps guest RAM
PAGES = 64                # 256 KiB of RAM (a memfd)


def msg(request, payload=b"", need_reply=False, eventfd=False, memfd_pages=None):
    step = 0 | (4 if need_reply else 0) | (8 if eventfd else 0) | (16 if memfd_pages else 0)
    out = bytes([step, request]) + struct.pack("<H", len(payload)) + payload
    if memfd_pages:
        out += bytes([memfd_pages - 1])
    return out


def kick(pick):
    return bytes([1, pick])


def ram(offset, data):
    return bytes([2]) + struct.pack("<IB", offset, len(data)) + data


def start(region_size=PAGES * 4096):
    s = msg(GET_FEATURES) + msg(GET_PROTOCOL_FEATURES)
    s += msg(SET_PROTOCOL_FEATURES, struct.pack("<Q", (1 << 0) | (1 << 3) | (1 << 9)))
    s += msg(SET_OWNER) + msg(GET_CONFIG, struct.pack("<III", 0, 8, 0) + bytes(8))
    s += msg(SET_FEATURES, struct.pack("<Q", (1 << 32) | (1 << 30)), need_reply=True)
    table = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, region_size, UVA, 0)
    s += msg(SET_MEM_TABLE, table, need_reply=True, memfd_pages=PAGES)
    eventfds = 0
    for q in (0, 1):
        base = UVA + q * 0x4000
        s += msg(SET_VRING_NUM, struct.pack("<II", q, 64))
        s += msg(SET_VRING_ADDR, struct.pack("<IIQQQQ", q, 0, base, base + 0x1000, base + 0x800, 0))
        s += msg(SET_VRING_BASE, struct.pack("<II", q, 0))
        s += msg(SET_VRING_CALL, struct.pack("<Q", q), eventfd=True)
        s += msg(SET_VRING_KICK, struct.pack("<Q", q), eventfd=True)
        s += msg(SET_VRING_ENABLE, struct.pack("<II", q, 1), need_reply=True)
        eventfds += 2
    return s


# A tx descriptor (queue 1 at UVA+0x4000) holding a REQUEST packet, then its kick.
def tx_request():
    desc = struct.pack("<QIHH", 0x20000, 44, 0, 0)                    # gpa, len, flags, next
    avail = struct.pack("<HHH", 0, 1, 0)                             # flags, idx, ring[0]
    hdr = struct.pack("<QQIIIHHIII", 3, 2, 1024, 1024, 0, 1, 1, 0, 65536, 0)
    return ram(0x4000, desc) + ram(0x4800, avail) + ram(0x20000, hdr) + kick(3)


SEEDS = {
    "vhost_user_start": start(),
    "vhost_user_tx_request": start() + tx_request(),
    "vhost_user_stop": start() + msg(GET_VRING_BASE, struct.pack("<II", 0, 0)) +
                       msg(GET_VRING_BASE, struct.pack("<II", 1, 0)),
}

for name, body in SEEDS.items():
    with open(f"corpus/vsock_fuzzer/{name}", "wb") as f:
        f.write(bytes([3]) + body)
