#!/usr/bin/env python3
"""Writes the seed corpus of the API fuzzer (tests/fuzz/corpus/).

Each seed starts the sequences the fuzzer should mutate from: one per area
of the API, spelled in the byte encoding fuzz_api.c decodes (an operation
byte, then that operation's argument bytes). Run it again after changing the
encoding: python3 tests/fuzz/make_corpus.py
"""
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# operation byte values (op % 12 in LLVMFuzzerTestOneInput)
ALLOC, ALLOC_HANDLE, CALLOC, ALIGNED, FREE, FREE_BAD, REALLOC, HANDLES, EPOCHS, DOMAINS = (
    0, 2, 3, 4, 5, 7, 8, 9, 10, 11)
ERA_CUR, ERA_ZERO, ERA_NEXT, ERA_STALE = 5, 0, 1, 4


def u32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def size(kind, v=0):
    """kind: 0 tiny/zero, 1 class boundary, 3 any small, 6 small max, 7 large, 9 huge."""
    return bytes([kind]) + u32(v)


def alloc(sz, era=ERA_CUR):
    return bytes([ALLOC]) + sz + bytes([era])


def setup(ring_shift, policy):
    """policy: bit 0 eager release, bit 1 next-slot advance, bit 2 (without bit 0) pooled release."""
    return bytes([ring_shift, policy])


def seeds():
    s = {}
    body = b""
    for cls in range(0, 40, 3):
        body += alloc(size(1, cls))
    body += alloc(size(0)) + alloc(size(6)) + alloc(size(7, 70000)) + alloc(size(9, 1))
    body += bytes([FREE, 2, 1]) + bytes([FREE, 0, 0]) + bytes([CALLOC]) + size(3, 100) + bytes([ERA_CUR, 3, 0])
    s["sizes"] = setup(3, 0) + body
    body = alloc(size(3, 500)) + bytes([EPOCHS, 0]) + alloc(size(3, 64)) + bytes([EPOCHS, 1, ERA_CUR])
    body += alloc(size(3, 64)) + bytes([EPOCHS, 0]) * 3 + alloc(size(3, 64), ERA_STALE)
    body += alloc(size(3, 64), ERA_ZERO) + alloc(size(3, 64), ERA_NEXT) + bytes([EPOCHS, 2, ERA_STALE])
    body += bytes([FREE, 0, 0, FREE, 0, 0, EPOCHS, 3])
    s["epochs"] = setup(0, 0) + body
    s["epochs_next_slot"] = setup(0, 2) + body
    # long-lived first era, short ones around it (skip-open advance)
    body = alloc(size(3, 80)) + (bytes([EPOCHS, 0]) + alloc(size(3, 64)) + bytes([EPOCHS, 1, ERA_CUR])) * 6
    body += alloc(size(3, 80), 43) + bytes([EPOCHS, 2, 43, EPOCHS, 2, ERA_STALE])
    s["epochs_skip_open"] = setup(1, 0) + body
    body = b"".join(bytes([ALLOC_HANDLE]) + size(3, n) + bytes([ERA_CUR]) for n in (10, 200, 3000))
    body += bytes([ALLOC_HANDLE]) + size(7, 1 << 20) + bytes([ERA_CUR])
    body += bytes([HANDLES, 0]) + u32(1) + bytes([HANDLES, 0x80]) + u32(0)
    body += bytes([HANDLES, 1]) + u32(0) + bytes([HANDLES, 0x81]) + u32(0) + bytes([HANDLES, 2]) + u32(0)
    body += bytes([HANDLES, 0x83]) + u32(7) + u32(9) + bytes([HANDLES, 0x84 + 5 * 20]) + u32(1)
    body += bytes([FREE, 0, 1, 1])
    s["handles"] = setup(2, 1) + body
    body = alloc(size(3, 40)) + alloc(size(7, 100000))
    body += bytes([REALLOC, 1, 0]) + size(3, 5000) + bytes([REALLOC, 1, 1]) + size(3, 10)
    body += bytes([REALLOC, 1, 0]) + size(7, 200000) + bytes([EPOCHS, 1, ERA_CUR])
    body += bytes([REALLOC, 1, 0]) + size(3, 9000) + bytes([REALLOC, 0, 0, 0]) + u32(0)
    body += bytes([ALIGNED, 6]) + size(3, 24) + bytes([ERA_CUR]) + bytes([ALIGNED, 20]) + size(3, 100) + bytes([ERA_CUR])
    body += bytes([ALIGNED, 4]) + size(3, 24) + bytes([ERA_CUR])
    s["realloc_aligned"] = setup(1, 0) + body
    # alignments above the 16 KiB granule (32 KiB once came back 16 KiB-aligned)
    body = alloc(size(3, 100)) + b"".join(bytes([ALIGNED, sh]) + size(3, n) + bytes([ERA_CUR])
                    for sh in (15, 17, 18, 21) for n in (99, 20000, 40000))
    s["aligned_large"] = setup(2, 0) + body
    body = alloc(size(3, 100)) + alloc(size(7, 50000))
    for kind in range(8):
        body += bytes([FREE_BAD, kind]) + u32(12345)
    body += bytes([FREE, 0, 1]) + bytes([FREE_BAD, 5]) + u32(0)
    s["bad_pointers"] = setup(4, 0) + body
    body = bytes([DOMAINS, 0, 0]) + bytes([DOMAINS, 2, 0]) + bytes([DOMAINS, 4, 0]) + size(3, 77)
    body += bytes([DOMAINS, 1, 0, ERA_CUR]) + bytes([DOMAINS, 2, 1]) + bytes([DOMAINS, 3, 0])
    body += bytes([DOMAINS, 3, 1]) + bytes([DOMAINS, 3, 0]) + bytes([DOMAINS, 4, 0]) + size(3, 10)
    body += bytes([DOMAINS, 6, 0]) + bytes([DOMAINS, 5, 0]) + bytes([DOMAINS, 6, 0])
    s["domains"] = setup(1, 0) + body
    s["domains_pooled"] = setup(2, 4) + body
    rng = random.Random(6)
    for i in range(3):
        s["random%d" % i] = bytes(rng.randrange(256) for _ in range(600))
    return s


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
