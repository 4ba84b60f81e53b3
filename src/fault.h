/* Fault injection for tests: make the operating-system calls of src/os.c fail
 * on purpose. Process-wide, off by default, and compiled into every build (the
 * check is one relaxed load on paths that already make a system call). */
#ifndef TSLAB_FAULT_H
#define TSLAB_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tslab_fault_op {
  TSLAB_FAULT_RESERVE = 1u << 0, /* reserving address space (tslab_create) */
  TSLAB_FAULT_COMMIT = 1u << 1,  /* making reserved memory usable (growth) */
  TSLAB_FAULT_RELEASE = 1u << 2, /* returning memory to the OS (madvise): a range refused */
  TSLAB_FAULT_BATCH = 1u << 3    /* the kernel taking no batch of releases (one madvise per range) */
};

/* After `skip` more calls of the operations in `ops` succeed, make the next
 * `count` of them fail (count UINT64_MAX: until cleared). */
void tslab_fault_inject(unsigned ops, uint64_t skip, uint64_t count);

/* Stop injecting faults. */
void tslab_fault_clear(void);

/* How many faults were injected since the last tslab_fault_inject. */
uint64_t tslab_fault_injected(void);

/* Pause points for tests that must stop a thread at a precise place of a
 * protocol (for example between validating a free and acting on it, to show
 * that metadata is not reused under it). The hook runs on the thread that
 * reaches the point; NULL (the default) turns it off. */
enum tslab_hook_id {
  TSLAB_HOOK_NONOWNER_VIEWED = 1, /* a non-owner free has read the run's metadata, not yet acted on its slot */
  TSLAB_HOOK_OPEN_CURRENT = 2,    /* an advance opening its era has read `current`, not yet moved it */
  TSLAB_HOOK_CLOSE_DETACHED = 3,  /* a close has taken its era off the caches, not yet added their counts */
  TSLAB_HOOK_DRAIN_PARTWAY = 4,   /* an owner has settled one queued slab of a notification drain, more remain */
  TSLAB_HOOK_BLOCK_STOPPED = 5,   /* a block that stops bumping has its final counts, is not on the full list yet */
  TSLAB_HOOK_BLOCK_LISTED = 6,    /* that block is on its slot's full list, still the slot's bumping block */
  TSLAB_HOOK_SLAB_PARKED = 7,     /* a bin changing its current slab has parked the old one, not installed the new */
  TSLAB_HOOK_RETIRE_COUNTED = 8,  /* a retire has uncounted a run from its era, not yet cleared its owner */
  TSLAB_HOOK_BUMP_MARKED = 9,     /* a refill's bump has set the object's bits, not yet moved top */
  TSLAB_HOOK_RESERVE_TAKEN = 10,  /* a refill has taken a drained block from its reserve, not yet formatted it */
  TSLAB_HOOK_ADVANCE_CLAIMED = 11, /* an advance has claimed its slot (new era EMPTY), the old era's counts remain */
  TSLAB_HOOK_EPOCHS_LISTED = 12,   /* tslab_stats_epochs has listed the slots holding eras, not yet read them */
  TSLAB_HOOK_REMOTE_ATTACHED = 13, /* a non-owner free found its run ATTACHED, has not set its remote bit */
  TSLAB_HOOK_REMOTE_SET = 14,      /* that free has set its remote bit, has not read the mode again */
  TSLAB_HOOK_PROMOTED = 15,        /* the general path's promotion has written the mask, not cleared next_mask */
  TSLAB_HOOK_OPEN_READIED = 16,    /* an advance has readied its cache for its era, not yet made the era ACTIVE */
  TSLAB_HOOK_EXIT_PINNED = 17,     /* an exiting thread has pinned its instances, not yet flushed its caches */
  TSLAB_HOOK_CLOSE_CLOSING = 18,   /* a close has marked its era CLOSING, not yet read the era's users */
  TSLAB_HOOK_NONOWNER_FREED = 19,  /* a non-owner free of a slab or block slot took effect, is not counted yet
                                      (it holds its era slot's inflight bracket, or the slot's spin lock when
                                      the era left the ring: a test holding it there must not wait for an
                                      advance, a label or a free-all of that era) */
  TSLAB_HOOK_OBJECTS_ENDED = 20,   /* a free-all has ended its era's objects, not yet folded their counts */
  TSLAB_HOOK_SPAN_FREED = 21       /* a span's free won its exchange, is not counted yet (inflight held) */
};
void tslab_hook_set(void (*hook)(int point));

/* Entries in the calling thread's table of (instance, cache) pairs other
 * than its most recent one. */
size_t tslab_tls_table_len(void);

/* Count bits as on a CPU without the popcount instruction (use false), or
 * as this CPU can (true, the default). Only while no instance is in use. */
void tslab_fault_use_popcnt(bool use);

#endif
