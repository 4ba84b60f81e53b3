#!/usr/bin/env python3
"""Writes the seed corpus of the API fuzzer (tests/fuzz/corpus/).

Each seed starts the sequences the fuzzer should mutate from: one per area
of the API, spelled in the byte encoding fuzz_api.c decodes (three bytes of
configuration, then operations: an operation byte and that operation's
argument bytes). Run it again after changing the encoding:
python3 tests/fuzz/make_corpus.py
The corpus's regression_* files are not written here: they are inputs the
fuzzer found that failed once (regression_slot_bounds: a slab's tail taken
for a slot; regression_large_block_fallback: a small block where the model
planned a large one, which a heap without four free granules in a row
gives; regression_realloc_room: a span grown by realloc, which gets room for
half as much again), kept as found. After a change of the encoding they mean
something else; drop them or find them again.
"""
import os
import random
import re
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# operation byte values (op % 16 in LLVMFuzzerTestOneInput)
(ALLOC, ALLOC_HANDLE, CALLOC, ALIGNED, FREE, FREE_BAD, REALLOC, HANDLES, EPOCHS, DOMAINS,
 FREE_ALL, BURST, TOUCH, MAINTAIN) = (0, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15)
# era bytes (pick_era): the current era, 0, a future one, one likely stale,
# the one before the current, two before
ERA_CUR, ERA_ZERO, ERA_NEXT, ERA_STALE, ERA_PREV, ERA_PREV2 = 5, 0, 1, 4, 3 + 8, 3 + 16
# epoch operations (op_epochs: s % 5) and maintenance ones (op_maintain: s % 4)
ADVANCE, CLOSE, STATUS, STATS, FLUSH = 0, 1, 2, 3, 4
RESERVE_RELEASE, RESERVE_RELEASE_NULL, THREAD_FLUSH, STATS_EPOCHS = 0, 0x80, 2, 3

# configuration choices (setup, config_from in fuzz_api.c)
RING_SHIFT = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 0, 6]
BUDGETS = [1 << 20, 0, 16 << 10, 64 << 10, 20 << 10, 32 << 10, 48 << 10, 256 << 10]
THREAD_RESERVES = [256 << 10, 0, 16 << 10, 40 << 10]
POOLS = [1 << 20, 0, 64 << 10, 16 << 10]
# The size classes' count, from the core (src/internal.h).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "internal.h")) as f:
    CLASSES = int(re.search(r"#define TSLAB_CLASSES (\d+)u", f.read()).group(1))
ON_CLOSE, EAGER, NEXT_SLOT, POOLED = 0, 1, 2, 4


def u32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def size(kind, v=0, variant=0):
    """kind (pick_size, s % 12): 0 zero/tiny, 1 class boundary + 1, 2 class
    boundary, 3 block object (1 + v % 4096), 6 4 KiB (variant 1: one more),
    7 class-slab only (4 KiB .. 32 KiB), 8 32 KiB (variant 1: one more),
    9 span, 10 up to 256 bytes, 11 huge (v % 4: SIZE_MAX, max + 1, max)."""
    return bytes([kind + 12 * variant]) + u32(v)


def block(n):
    """A block-object size of exactly n bytes (1 <= n <= 4096)."""
    return size(3, n - 1)


def alloc(sz, era=ERA_CUR):
    return bytes([ALLOC]) + sz + bytes([era])


def alloc_h(sz, era=ERA_CUR):
    return bytes([ALLOC_HANDLE]) + sz + bytes([era])


def aligned(shift, sz, era=ERA_CUR):
    """An alignment of 1 << shift (shift % 4 != 0 keeps it a power of two)."""
    return bytes([ALIGNED, shift]) + sz + bytes([era])


OTHER = 0xC0  # on an operation byte: frees and handle calls from the other thread


def free(index, handle=None, double=False, other=False, double_other=None):
    """Free live object `index` (a model index, see op_free_live); `handle`
    only for objects with a handle: True frees by handle. other: from the
    other thread; the double free from the other thread than the free unless
    double_other says otherwise."""
    b = bytes([FREE | (OTHER if other else 0), index])
    if handle is not None:
        b += bytes([1 if handle else 0])
    if double_other is None:
        double_other = other
    return b + bytes([(1 if double else 0) | (2 if double and double_other != other else 0)])


def epochs(what, era=None):
    return bytes([EPOCHS, what]) + (bytes([era]) if era is not None else b"")


def free_all(era=ERA_CUR):
    return bytes([FREE_ALL, era])


def burst(n, base, era=ERA_CUR, big=False, handles=False, spread=0):
    """n (4..32) allocations of base (up to 256 bytes, 4096 when big) plus
    i * spread % 97 bytes for the i-th (spread < 64), with handles or not."""
    s = next(b for b in range(256) if b % 29 == n - 4 and (b >> 7) == big and
             ((b >> 5 & 3) == 3) == handles)
    return bytes([BURST, s, era]) + u32(base - 1 + (spread << 12))


def touch(index, rewrite=False):
    return bytes([TOUCH, index | (0x80 if rewrite else 0)])


def maintain(what):
    return bytes([MAINTAIN, what])


def setup(ring=2, policy=ON_CLOSE, budget=1 << 20, thread_reserve=256 << 10, pool=1 << 20,
          thorough=False, small_reserve=False):
    """thorough: check everything after every step (rings up to 8 slots);
    small_reserve: a 4 MiB reservation (budgets of 64 or 256 KiB only)."""
    first = RING_SHIFT.index(ring.bit_length() - 2) | (0xC0 if thorough else 0)
    config = BUDGETS.index(budget) | THREAD_RESERVES.index(thread_reserve) << 3 | POOLS.index(pool) << 5
    assert not small_reserve or config & 3 == 3
    return bytes([first, policy, config | (0x80 if small_reserve else 0)])


def seeds():
    s = {}
    # every size kind: tiny, class boundaries, block objects, 4 KiB and one
    # more, class-slab sizes, 32 KiB and one more, spans, huge
    body = b""
    for cls in list(range(0, CLASSES, 3)) + [CLASSES - 1]:
        body += alloc(size(2 - cls % 2, cls))
    body += alloc(size(0, 0)) + alloc(size(0, 5, 1)) + alloc(size(6)) + alloc(size(6, 0, 1))
    body += alloc(size(7, 9000)) + alloc(size(8)) + alloc(size(8, 0, 1)) + alloc(size(9, 70000))
    body += alloc(size(11, 1)) + alloc(size(11, 2))
    body += free(2) + free(0) + bytes([CALLOC]) + size(3, 100) + bytes([ERA_CUR, 3, 0])
    s["sizes"] = setup(8) + body
    s["sizes_era2"] = setup(8, thorough=True) + epochs(ADVANCE) + body

    body = alloc(size(3, 500)) + epochs(ADVANCE) + alloc(size(3, 64)) + epochs(CLOSE, ERA_CUR)
    body += alloc(size(3, 64)) + epochs(ADVANCE) * 3 + alloc(size(3, 64), ERA_STALE)
    body += alloc(size(3, 64), ERA_ZERO) + alloc(size(3, 64), ERA_NEXT) + epochs(STATUS, ERA_STALE)
    body += free(0) + free(0) + epochs(FLUSH) + epochs(STATS, ERA_PREV)
    s["epochs"] = setup(2) + body
    s["epochs_next_slot"] = setup(2, NEXT_SLOT) + body
    # long-lived first era, short ones around it (skip-open advance)
    body = alloc(size(3, 80)) + (epochs(ADVANCE) + alloc(size(3, 64)) + epochs(CLOSE, ERA_CUR)) * 6
    body += alloc(size(3, 80), 43) + epochs(STATUS, 43) + epochs(STATUS, ERA_STALE)
    s["epochs_skip_open"] = setup(4) + body

    body = b"".join(alloc_h(size(3, n)) for n in (10, 200, 3000))
    body += alloc_h(size(9, 1 << 16))
    body += bytes([HANDLES, 0]) + u32(1) + bytes([HANDLES, 0x80]) + u32(0)
    body += bytes([HANDLES, 1]) + u32(0) + bytes([HANDLES, 0x81]) + u32(0) + bytes([HANDLES, 2]) + u32(0)
    body += bytes([HANDLES, 0x83]) + u32(7) + u32(9) + bytes([HANDLES, 0x84 + 5 * 20]) + u32(1)
    body += free(0, True, True)
    s["handles"] = setup(2, EAGER) + body
    s["handles_blocks"] = setup(2, EAGER) + epochs(ADVANCE) + body

    # realloc: in place, moved, across the block/class/span boundaries, and
    # in a closed era (shrinks in place, cannot grow past its usable size)
    body = epochs(ADVANCE) + alloc(block(40)) + alloc(size(9, 100000))
    body += bytes([REALLOC, 1, 0]) + block(33) + bytes([REALLOC, 1, 0]) + block(20)
    body += bytes([REALLOC, 1, 0]) + size(3, 5000) + bytes([REALLOC, 1, 1]) + size(3, 10)
    body += bytes([REALLOC, 1, 0]) + size(9, 200000) + epochs(CLOSE, ERA_CUR)
    body += bytes([REALLOC, 1, 0]) + block(8) + bytes([REALLOC, 1, 0]) + size(7, 9000)
    body += bytes([REALLOC, 1, 1]) + size(3, 10) + bytes([REALLOC, 0, 0]) + u32(0)
    body += aligned(6, size(3, 24)) + aligned(20, size(3, 100)) + aligned(4, size(3, 24))
    s["realloc_aligned"] = setup(4) + body
    # alignments above the 16 KiB granule (32 KiB once came back 16 KiB-aligned)
    body = alloc(size(3, 100)) + b"".join(aligned(sh, size(3, n)) for sh in (15, 17, 18, 21)
                                          for n in (99, 20000, 40000))
    s["aligned_large"] = setup(8) + body

    body = alloc(size(3, 100)) + alloc(size(9, 50000))
    for kind in range(8):
        body += bytes([FREE_BAD, kind]) + u32(12345)
    body += free(0, None, True) + bytes([FREE_BAD, 5]) + u32(0)
    s["bad_pointers"] = setup(16) + body

    body = bytes([DOMAINS, 0]) + bytes([DOMAINS, 2, 0]) + bytes([DOMAINS, 4, 0]) + size(3, 77)
    body += bytes([DOMAINS, 1, 0, ERA_CUR]) + bytes([DOMAINS, 2, 1]) + bytes([DOMAINS, 3, 0])
    body += bytes([DOMAINS, 3, 1]) + bytes([DOMAINS, 3, 0]) + bytes([DOMAINS, 4, 0]) + size(3, 10)
    body += bytes([DOMAINS, 6, 0]) + bytes([DOMAINS, 5, 0]) + bytes([DOMAINS, 6, 0])
    s["domains"] = setup(4) + body
    s["domains_pooled"] = setup(8, POOLED) + body

    # free-all of an open era holding block objects (with handles), class
    # objects and spans; its memory serves the next era; free-all of a
    # closed era, again, and of eras that are not in the ring
    body = epochs(ADVANCE) + alloc_h(block(100)) + alloc_h(block(3000)) + alloc(size(7, 6000))
    body += alloc_h(size(9, 40000)) + aligned(6, size(3, 500)) + alloc(block(16))
    body += epochs(ADVANCE) + alloc(block(64)) + free_all(ERA_PREV) + maintain(STATS_EPOCHS)
    body += bytes([HANDLES, 1]) + u32(0) + bytes([HANDLES, 0x81]) + u32(1)
    body += bytes([FREE_BAD, 5]) + u32(2) + bytes([REALLOC, 0, 5]) + u32(3)
    body += burst(20, 200, spread=5) + epochs(CLOSE, ERA_CUR) + free_all(ERA_CUR) + free_all(ERA_CUR)
    body += free_all(ERA_ZERO) + free_all(ERA_NEXT) + free_all(ERA_STALE) + alloc(block(64), ERA_PREV)
    s["free_all"] = setup(4) + body
    s["free_all_thorough"] = setup(4, thorough=True) + body
    s["free_all_budget"] = setup(4, budget=16 << 10) + body
    # free-all of the first era (class slabs only) and of a domain's era
    body = alloc_h(size(3, 70)) + alloc(size(7, 10000)) + alloc(size(9, 30000)) + free_all(ERA_CUR)
    body += bytes([DOMAINS, 0]) + bytes([DOMAINS, 2, 0]) + bytes([DOMAINS, 4, 0]) + block(77)
    body += free_all(ERA_CUR) + bytes([DOMAINS, 4, 0]) + block(10) + bytes([DOMAINS, 3, 0])
    body += bytes([DOMAINS, 6, 0]) + maintain(STATS_EPOCHS)
    s["free_all_first_era"] = setup(2, NEXT_SLOT) + body

    # objects that outlive their era's close: blocks detached with live
    # objects are trimmed; the objects are read back, rewritten and freed
    body = epochs(ADVANCE)
    for n in (4096, 100, 3000, 2000, 4096, 64, 1500, 4096):
        body += alloc(block(n))
    body += free(1) + free(3) + alloc(size(7, 7000)) + alloc(size(9, 20000))
    body += epochs(CLOSE, ERA_CUR) + epochs(ADVANCE) + burst(10, 3000, big=True, spread=7)
    body += b"".join(touch(i, i % 2 == 1) for i in range(8))
    body += maintain(RESERVE_RELEASE) + free(0) + free(2) + epochs(STATS, ERA_PREV)
    body += b"".join(touch(i) for i in range(4)) + free(1) + free(0)
    s["outlive_close"] = setup(4) + body
    s["outlive_close_eager"] = setup(4, EAGER) + body
    s["outlive_close_no_reserve"] = setup(8, thread_reserve=0, pool=0) + body

    # small block budgets: an era moves from blocks to class slabs mid-way
    for budget, name in ((0, "budget_0"), (16 << 10, "budget_16k"), (64 << 10, "budget_64k"),
                         (20 << 10, "budget_20k")):
        body = epochs(ADVANCE) + burst(32, 2000, big=True, spread=13) + burst(32, 100, spread=3)
        body += burst(12, 4000, big=True)
        body += alloc(block(4096)) + alloc(block(16)) + free(3) + bytes([REALLOC, 1, 2]) + block(600)
        body += epochs(ADVANCE) + burst(32, 700, big=True, spread=11) + epochs(CLOSE, ERA_PREV)
        body += burst(20, 60, handles=True) + maintain(STATS_EPOCHS) + epochs(CLOSE, ERA_CUR)
        body += free_all(ERA_PREV)
        s[name] = setup(4, budget=budget, thread_reserve=16 << 10) + body
    # the fast path's choice: a slot of a class slab the era has (made by
    # an alignment above 16), where the slow path would start a new block
    body = epochs(ADVANCE) + aligned(5, block(100)) + aligned(6, block(100))
    body += alloc(block(4000)) * 4 + alloc(block(128)) * 3  # the block is full
    body += alloc(block(128)) + alloc(block(4000)) + alloc(block(112))
    s["fast_path_class"] = setup(2) + body

    # the hot reserve: epochs draining blocks into it, released on demand
    body = b""
    for _ in range(4):
        body += epochs(ADVANCE) + burst(28, 2500, big=True, spread=9) + epochs(CLOSE, ERA_CUR)
        body += maintain(RESERVE_RELEASE) * 2 + burst(5, 100)
    body += maintain(RESERVE_RELEASE_NULL) + maintain(THREAD_FLUSH) + maintain(STATS_EPOCHS)
    s["reserve"] = setup(8, thread_reserve=40 << 10, pool=64 << 10) + body
    s["reserve_pooled"] = setup(8, POOLED, thread_reserve=16 << 10, pool=16 << 10) + body

    # out of memory: spans fill the smallest reservation; allocations fail
    # and succeed again once memory is freed or released
    body = epochs(ADVANCE)
    for i in range(6):
        body += alloc(size(11, 2)) + alloc(size(9, 600000 + i))
    body += burst(32, 3000, big=True) + alloc(size(8)) + aligned(20, size(9, 1))
    body += free(0) + free(1) + maintain(RESERVE_RELEASE) + alloc(size(11, 2))
    body += epochs(CLOSE, ERA_CUR) + epochs(ADVANCE) + alloc(size(9, 900000))
    body += free_all(ERA_PREV) + alloc(size(11, 2)) + burst(32, 3000, big=True)
    s["out_of_memory"] = setup(4, budget=64 << 10, small_reserve=True) + body
    s["out_of_memory_eager"] = setup(4, EAGER, budget=256 << 10, small_reserve=True) + body

    # frees and handle calls from the other thread: into the era's blocks,
    # class slabs and spans (by pointer and by handle, double frees from
    # either thread), then closes that must wait for the other thread, a
    # free-all that finds its remote frees pending, bad pointers and handles
    # (every object has a handle, so every free names how it frees)
    body = epochs(ADVANCE)
    for n in (100, 3000, 200, 4000, 50):
        body += alloc_h(block(n))
    body += alloc_h(size(7, 9000)) + alloc_h(size(9, 40000)) + burst(32, 2000, big=True, handles=True)
    body += free(0, True, True, other=True) + free(1, False, True, other=True, double_other=False)
    body += free(2, True, other=True) + free(3, False, other=True) + free(4, False, other=True)
    body += bytes([HANDLES | OTHER, 0]) + u32(1) + bytes([HANDLES | OTHER, 0x81]) + u32(0)
    body += bytes([FREE_BAD | OTHER, 5]) + u32(0) + bytes([FREE_BAD | OTHER, 3]) + u32(7)
    body += epochs(CLOSE, ERA_CUR) + free(0, False, other=True) + epochs(ADVANCE)
    body += burst(20, 200, handles=True) + free(5, True, other=True) + free(6, False, other=True)
    body += free_all(ERA_CUR) + free(0, False, other=True) + free_all(ERA_PREV) + maintain(STATS_EPOCHS)
    s["other_thread"] = setup(4) + body
    s["other_thread_thorough"] = setup(8, thorough=True, budget=16 << 10) + body

    rng = random.Random(6)
    for i in range(4):
        s["random%d" % i] = bytes(rng.randrange(256) for _ in range(600))
    return s


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
