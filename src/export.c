/* JSON and Prometheus exporters.
 *
 * Both are built only on the public snapshot calls, so they never take a lock
 * or touch a counter that the allocation fast path uses beyond what those
 * calls read; the one other thing they read is the instance's configuration,
 * which is fixed when the instance is created. Every section is read once
 * into one snapshot (a single block from the C library's malloc: the ring may
 * hold 256 epochs, too much for the stack of an arbitrary caller thread), then
 * formatted. docs/METRICS.md documents every name emitted here;
 * tests/check_export.py keeps the two in step.
 *
 * Per-thread statistics (tslab_stats_thread) are not exported: they describe
 * the calling thread's cache, and the exporter usually runs on the endpoint's
 * thread, which would get a cache of its own just to report it empty.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Epochs open longer than this are reported as leaks. Epochs are meant for
 * short phases (a request, a frame, a transaction): one open for a whole
 * second has either been forgotten or is a batch phase worth looking at.
 * Consumers wanting another threshold apply it to the per-epoch ages, which
 * are exported as well. */
#define EXPORT_LEAK_THRESHOLD_NS UINT64_C(1000000000)

/* Bumped whenever a JSON field changes meaning or disappears. */
#define EXPORT_SCHEMA_VERSION 1

/* ------------------------------------------------------------------------- */
/* Output with the snprintf contract                                         */
/* ------------------------------------------------------------------------- */

typedef struct out {
  char* buf;
  size_t cap;
  size_t len; /* length the whole document needs so far */
} out_t;

static void out_init(out_t* o, char* buf, size_t cap) {
  o->buf = buf;
  o->cap = buf ? cap : 0;
  o->len = 0;
  if (o->cap > 0) o->buf[0] = '\0';
}

static void out_mem(out_t* o, const char* s, size_t n) {
  if (o->len + 1 < o->cap) {
    size_t room = o->cap - o->len - 1;
    size_t k = n < room ? n : room;
    memcpy(o->buf + o->len, s, k);
    o->buf[o->len + k] = '\0';
  }
  o->len += n;
}

static void out_str(out_t* o, const char* s) { out_mem(o, s, strlen(s)); }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void out_fmt(out_t* o, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n;
  if (o->len < o->cap) {
    n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
  } else {
    n = vsnprintf(NULL, 0, fmt, ap);
  }
  va_end(ap);
  if (n > 0) o->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence starting at s (at most n bytes long), or
 * 0 when the bytes there are not valid UTF-8. Labels are arbitrary bytes and
 * may be cut in the middle of a character, but both formats require UTF-8. */
static size_t utf8_seq_len(const unsigned char* s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (len > n) return 0;
  unsigned cp = c & (0x7Fu >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

enum escape_style { ESCAPE_JSON, ESCAPE_PROM };

/* Writes s (at most max bytes, stops at NUL) escaped for a JSON string or a
 * Prometheus label value, without the quotes. Invalid UTF-8 becomes U+FFFD. */
static void out_escaped(out_t* o, const char* s, size_t max, enum escape_style style) {
  const unsigned char* p = (const unsigned char*)s;
  size_t n = strnlen(s, max);
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    size_t k = utf8_seq_len(p + i, n - i);
    if (k == 0) {
      out_str(o, style == ESCAPE_JSON ? "\\ufffd" : "\xEF\xBF\xBD");
      i++;
    } else if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      out_mem(o, esc, 2);
      i++;
    } else if (c == '\n') {
      out_str(o, "\\n");
      i++;
    } else if (c < 0x20 && style == ESCAPE_JSON) {
      out_fmt(o, "\\u%04x", c);
      i++;
    } else {
      out_mem(o, s + i, k);
      i += k;
    }
  }
}

/* ------------------------------------------------------------------------- */
/* Snapshot                                                                  */
/* ------------------------------------------------------------------------- */

typedef struct snapshot {
  tslab_config_t config;
  tslab_stats_global_t global;
  tslab_stats_sampling_t sampling;
  uint64_t now_ns;
  tslab_stats_class_t* classes;
  size_t n_classes;
  tslab_stats_epoch_t* epochs;
  size_t n_epochs;
  tslab_stats_label_t* labels;
  size_t n_labels;
  tslab_leak_t* leaks;
  size_t n_leaks;
  void* block;
} snapshot_t;

/* Rounds an offset up so the next array in the block is aligned for any type. */
static size_t align_up(size_t n) {
  const size_t al = _Alignof(max_align_t);
  return (n + al - 1) / al * al;
}

static int snapshot_take(tslab_t* a, snapshot_t* s) {
  memset(s, 0, sizeof *s);
  if (tslab_stats_global(a, &s->global) != TSLAB_OK) return -1;
  if (tslab_stats_sampling(a, &s->sampling) != TSLAB_OK) return -1;
  /* Set by tslab_create (max_alloc_size as granted) and never written
   * again, so a plain copy is a consistent one. */
  s->config = a->config;
  s->now_ns = tslab_now_ns();

  size_t n_classes = tslab_class_count(a);
  size_t ring = s->global.epoch_ring_size;
  /* One more than the registry holds: the "(other)" bucket may come on top. */
  size_t max_labels = TSLAB_LABELS_MAX + 1;
  size_t off_epochs = align_up(n_classes * sizeof(tslab_stats_class_t));
  size_t off_labels = off_epochs + align_up(ring * sizeof(tslab_stats_epoch_t));
  size_t off_leaks = off_labels + align_up(max_labels * sizeof(tslab_stats_label_t));
  size_t total = off_leaks + ring * sizeof(tslab_leak_t);
  char* block = malloc(total ? total : 1);
  if (!block) {
    tslab_set_error(TSLAB_ERR_OUT_OF_MEMORY);
    return -1;
  }
  s->block = block;
  s->classes = (tslab_stats_class_t*)(void*)block;
  s->epochs = (tslab_stats_epoch_t*)(void*)(block + off_epochs);
  s->labels = (tslab_stats_label_t*)(void*)(block + off_labels);
  s->leaks = (tslab_leak_t*)(void*)(block + off_leaks);

  /* One pass over the thread caches for every class, and every class from
   * the same pass. */
  s->n_classes = tslab_stats_classes(a, s->classes, n_classes);
  s->n_epochs = tslab_stats_epochs(a, s->epochs, ring);
  s->n_labels = tslab_stats_labels(a, s->labels, max_labels);
  s->n_leaks = tslab_leak_check(a, EXPORT_LEAK_THRESHOLD_NS, s->leaks, ring);
  return 0;
}

static void snapshot_free(snapshot_t* s) { free(s->block); }

/* ------------------------------------------------------------------------- */
/* Field tables shared by both formats                                       */
/* ------------------------------------------------------------------------- */

enum kind {
  K_U64,
  K_U32,
  K_SIZE,  /* size_t */
  K_I64,
  K_BOOL,
  K_NS,    /* uint64_t nanoseconds; Prometheus gets seconds */
  K_MS32,  /* uint32_t milliseconds; Prometheus gets seconds */
  K_STR,   /* char[TSLAB_LABEL_MAX] */
  K_STATE, /* tslab_epoch_state_t */
  K_RELEASE, /* tslab_release_policy_t; JSON only */
  K_ADVANCE  /* tslab_advance_policy_t; JSON only */
};

/* One field of a statistics struct. prom is NULL for fields that only make
 * sense in JSON (strings, monotonic timestamps). Consecutive fields with the
 * same prom name form one metric family, told apart by prom_label. */
typedef struct field {
  const char* json;
  enum kind kind;
  size_t off;
  const char* prom;
  const char* prom_label; /* extra `name="value"` pair, or NULL */
  const char* type;       /* "counter" or "gauge" */
  const char* help;
} field_t;

#define F(st, member, k, prom, label, type, help) \
  {#member, k, offsetof(st, member), prom, label, type, help}
#define JSON_ONLY(st, member, k) {#member, k, offsetof(st, member), NULL, NULL, NULL, NULL}

#define G(member, k, prom, label, type, help) F(tslab_stats_global_t, member, k, prom, label, type, help)
static const field_t global_fields[] = {
    G(rss_bytes, K_U64, "tslab_process_resident_bytes", NULL, "gauge",
      "Resident set size of the whole process, read from the kernel."),
    G(reserved_bytes, K_U64, "tslab_reserved_bytes", NULL, "gauge",
      "Virtual address space reserved by the instance."),
    G(committed_bytes, K_U64, "tslab_committed_bytes", NULL, "gauge",
      "Reserved bytes made readable and writable (high-water mark)."),
    G(resident_estimate_bytes, K_U64, "tslab_resident_estimate_bytes", NULL, "gauge",
      "Slab and span bytes of the instance not released to the OS."),
    G(metadata_bytes, K_U64, "tslab_metadata_bytes", NULL, "gauge",
      "Out-of-band metadata bytes in use."),
    G(live_objects, K_U64, "tslab_live_objects", NULL, "gauge", "Objects allocated and not freed."),
    G(live_bytes, K_U64, "tslab_live_bytes", NULL, "gauge",
      "Bytes of live objects, rounded up to their size classes."),
    G(slabs_in_use, K_U64, "tslab_slabs", "state=\"in_use\"", "gauge",
      "Slabs by state: in_use (formatted slabs and large spans), empty (resident in the pool), "
      "released (16 KiB granules of the committed range not resident)."),
    G(slabs_empty, K_U64, "tslab_slabs", "state=\"empty\"", "gauge", NULL),
    G(slabs_released, K_U64, "tslab_slabs", "state=\"released\"", "gauge", NULL),
    G(slabs_created_total, K_U64, "tslab_slabs_created_total", NULL, "counter",
      "Slabs put in use (formatted or taken from spares) and large spans created."),
    G(slabs_recycled_total, K_U64, "tslab_slabs_recycled_total", NULL, "counter",
      "Slabs, spans and blocks taken from the page heap that were placed in memory that "
      "served before (pool or released and reused)."),
    G(blocks_in_use, K_U64, "tslab_blocks_in_use", NULL, "gauge",
      "Mixed-size blocks (16 or 64 KiB) held by epochs: bumping, full, or detached with live objects."),
    G(blocks_created_total, K_U64, "tslab_blocks_created_total", NULL, "counter",
      "Blocks taken from the page heap (its pool of empty runs, a released run or new "
      "memory)."),
    G(blocks_reused_total, K_U64, "tslab_blocks_reused_total", NULL, "counter",
      "Blocks reused from a thread cache's hot reserve, resident already."),
    G(reserve_bytes, K_U64, "tslab_hot_reserve_bytes", NULL, "gauge",
      "Hot reserve: empty memory kept resident for the next epochs (the thread caches' "
      "drained blocks and the instance's pool of empty runs, up to its bound)."),
    G(decay_bytes, K_U64, "tslab_decay_bytes", NULL, "gauge",
      "Empty memory of open epochs the pool keeps beyond pool_resident_max until it decays "
      "(pool_decay_max, pool_decay_ms) or its epoch closes."),
    G(objects_ended_total, K_U64, "tslab_objects_ended_total", NULL, "counter",
      "Objects ended by free-all closes, also counted as frees."),
    G(epochs_freed_all_total, K_U64, "tslab_epochs_freed_all_total", NULL, "counter",
      "Free-all closes: calls that ended every object of an era still in the ring."),
    G(release_calls_total, K_U64, "tslab_release_calls_total", NULL, "counter",
      "System calls returning memory to the OS (madvise; a batched process_madvise counts once)."),
    G(release_bytes_total, K_U64, "tslab_released_bytes_total", NULL, "counter",
      "Bytes returned to the OS."),
    G(release_failures_total, K_U64, "tslab_release_failures_total", NULL, "counter",
      "Ranges the OS refused to release; the memory stayed resident."),
    G(allocations_total, K_U64, "tslab_allocations_total", NULL, "counter",
      "Successful allocations."),
    G(frees_total, K_U64, "tslab_frees_total", NULL, "counter", "Successful frees."),
    G(cross_thread_frees_total, K_U64, "tslab_cross_thread_frees_total", NULL, "counter",
      "Frees of objects allocated by another thread."),
    G(invalid_frees_total, K_U64, "tslab_invalid_frees_total", NULL, "counter",
      "Frees and handles refused because they named no live allocation."),
    G(alloc_failures_total, K_U64, "tslab_allocation_failures_total", NULL, "counter",
      "Failed allocations, all reasons."),
    G(alloc_fail_closed_total, K_U64, "tslab_allocation_failures_by_reason_total",
      "reason=\"closed\"", "counter",
      "Failed allocations by reason: closed (epoch closed), stale (era no longer in the ring), "
      "unknown (era never opened), size (bad size or alignment), oom (out of memory)."),
    G(alloc_fail_stale_total, K_U64, "tslab_allocation_failures_by_reason_total",
      "reason=\"stale\"", "counter", NULL),
    G(alloc_fail_unknown_total, K_U64, "tslab_allocation_failures_by_reason_total",
      "reason=\"unknown\"", "counter", NULL),
    G(alloc_fail_size_total, K_U64, "tslab_allocation_failures_by_reason_total",
      "reason=\"size\"", "counter", NULL),
    G(alloc_fail_oom_total, K_U64, "tslab_allocation_failures_by_reason_total",
      "reason=\"oom\"", "counter", NULL),
    G(slow_path_total, K_U64, "tslab_slow_path_total", NULL, "counter",
      "Allocations that left the fast path."),
    G(epochs_opened_total, K_U64, "tslab_epochs_opened_total", NULL, "counter", "Eras opened."),
    G(epochs_closed_total, K_U64, "tslab_epochs_closed_total", NULL, "counter", "Eras closed."),
    G(epochs_forced_close_total, K_U64, "tslab_epochs_forced_close_total", NULL, "counter",
      "Eras closed because a new era needed their ring slot."),
    G(threads_active, K_U64, "tslab_threads_active", NULL, "gauge",
      "Thread caches attached to a running thread."),
    G(thread_caches, K_U64, "tslab_thread_caches", NULL, "gauge",
      "Thread caches created (bounded by the peak number of threads)."),
    G(current_epoch, K_U64, "tslab_current_epoch", NULL, "gauge", "The current era."),
    G(epoch_ring_size, K_U32, "tslab_epoch_ring_size", NULL, "gauge", "Slots in the epoch ring."),
    G(class_count, K_U32, "tslab_size_classes", NULL, "gauge", "Number of size classes."),
};
#undef G

#define C(member, k, prom, type, help) F(tslab_stats_class_t, member, k, prom, NULL, type, help)
static const field_t class_fields[] = {
    JSON_ONLY(tslab_stats_class_t, index, K_U32),
    JSON_ONLY(tslab_stats_class_t, object_size, K_U32),
    C(slab_bytes, K_U32, "tslab_class_slab_bytes", "gauge", "Size of one slab of the class."),
    C(objects_per_slab, K_U32, "tslab_class_objects_per_slab", "gauge",
      "Objects one slab of the class holds."),
    C(allocations_total, K_U64, "tslab_class_allocations_total", "counter",
      "Successful allocations in the class."),
    C(frees_total, K_U64, "tslab_class_frees_total", "counter", "Frees in the class."),
    C(cross_thread_frees_total, K_U64, "tslab_class_cross_thread_frees_total", "counter",
      "Frees in the class of objects allocated by another thread."),
    C(slow_path_total, K_U64, "tslab_class_slow_path_total", "counter",
      "Allocations in the class that left the fast path."),
    C(live_objects, K_U64, "tslab_class_live_objects", "gauge", "Live objects of the class."),
    C(slabs, K_U64, "tslab_class_slabs", "gauge", "Slabs of the class in use."),
};
#undef C

#define E(member, k, prom, type, help) F(tslab_stats_epoch_t, member, k, prom, NULL, type, help)
static const field_t epoch_fields[] = {
    JSON_ONLY(tslab_stats_epoch_t, era, K_U64),
    JSON_ONLY(tslab_stats_epoch_t, slot, K_U32),
    JSON_ONLY(tslab_stats_epoch_t, state, K_STATE),
    JSON_ONLY(tslab_stats_epoch_t, label, K_STR),
    JSON_ONLY(tslab_stats_epoch_t, opened_ns, K_U64),
    E(age_ns, K_NS, "tslab_epoch_age_seconds", "gauge", "Time since the era was opened."),
    E(refcount, K_I64, "tslab_epoch_refcount", "gauge", "Domain references held on the era."),
    E(live_objects, K_U64, "tslab_epoch_live_objects", "gauge", "Live objects of the era."),
    E(live_bytes, K_U64, "tslab_epoch_live_bytes", "gauge",
      "Bytes of live objects of the era, rounded to size classes."),
    E(allocations_total, K_U64, "tslab_epoch_allocations_total", "counter",
      "Successful allocations in the era."),
    E(frees_total, K_U64, "tslab_epoch_frees_total", "counter", "Frees of objects of the era."),
    E(slabs, K_U64, "tslab_epoch_slabs", "gauge", "Slabs and large spans held by the era."),
    E(empty_slabs, K_U64, "tslab_epoch_empty_slabs", "gauge",
      "Empty slabs still counted for the era."),
    E(rss_estimate_bytes, K_U64, "tslab_epoch_resident_estimate_bytes", "gauge",
      "Bytes of the era's slabs that are resident."),
    E(rss_before_close_bytes, K_U64, "tslab_epoch_rss_before_close_bytes", "gauge",
      "Process RSS before the era's close: the RSS after it plus the bytes it released "
      "(0 while open, and when the close returned no run to the OS)."),
    E(rss_after_close_bytes, K_U64, "tslab_epoch_rss_after_close_bytes", "gauge",
      "Process RSS read right after the era's close (0 while open, and when the close "
      "returned no run to the OS)."),
    E(released_at_close_bytes, K_U64, "tslab_epoch_released_at_close_bytes", "gauge",
      "Bytes returned to the OS by the era's close: empty runs released and pages trimmed "
      "from blocks kept by live objects."),
    E(released_total_bytes, K_U64, "tslab_epoch_released_bytes_total", "counter",
      "Bytes of the era returned to the OS, at close and by later frees."),
    E(close_ns, K_NS, "tslab_epoch_close_duration_seconds", "gauge",
      "How long the era's close took (0 while open, and for the untimed close or free-all of a "
      "request-sized era: not forced, used by the closing thread only, in blocks only)."),
    E(forced_close, K_BOOL, "tslab_epoch_forced_close", "gauge",
      "1 when the era was closed because a new era needed its ring slot."),
};
#undef E

#define L(member, k, prom, type, help) F(tslab_stats_label_t, member, k, prom, NULL, type, help)
static const field_t label_fields[] = {
    JSON_ONLY(tslab_stats_label_t, label, K_STR),
    L(epochs_total, K_U64, "tslab_label_epochs_total", "counter", "Eras that carried the label."),
    L(allocations_total, K_U64, "tslab_label_allocations_total", "counter",
      "Successful allocations in eras carrying the label."),
    L(frees_total, K_U64, "tslab_label_frees_total", "counter",
      "Frees of objects of eras carrying the label."),
    L(cross_thread_frees_total, K_U64, "tslab_label_cross_thread_frees_total", "counter",
      "Cross-thread frees of objects of eras carrying the label."),
    L(slow_path_total, K_U64, "tslab_label_slow_path_total", "counter",
      "Slow-path allocations in eras carrying the label."),
    L(live_bytes, K_U64, "tslab_label_live_bytes", "gauge",
      "Live bytes of eras carrying the label."),
    L(open_epochs, K_U64, "tslab_label_open_epochs", "gauge", "Open eras carrying the label."),
};
#undef L

#define S(member, k, prom, type, help) F(tslab_stats_sampling_t, member, k, prom, NULL, type, help)
static const field_t sampling_fields[] = {
    S(one_in, K_U32, "tslab_slow_path_sampling_one_in", "gauge",
      "One in this many slow-path allocations is timed (0: sampling off)."),
    S(samples, K_U64, "tslab_slow_path_samples_total", "counter", "Slow-path allocations timed."),
    S(wall_ns_total, K_NS, "tslab_slow_path_sampled_wall_seconds_total", "counter",
      "Wall-clock time of the timed slow-path allocations."),
    S(cpu_ns_total, K_NS, "tslab_slow_path_sampled_cpu_seconds_total", "counter",
      "Thread CPU time of the timed slow-path allocations."),
    S(wall_ns_max, K_NS, "tslab_slow_path_sampled_wall_seconds_max", "gauge",
      "Longest wall-clock time of one timed slow-path allocation."),
    S(wait_ns_total, K_NS, "tslab_slow_path_sampled_wait_seconds_total", "counter",
      "Wall minus CPU time of the timed slow-path allocations: time the thread was not running."),
};
#undef S

/* The configuration the instance runs with (tslab_config_t). epoch_ring_size
 * is exported under global as well, where Prometheus gets it; the policies
 * are labels of tslab_config_info. */
#define CF(member, k, prom, help) F(tslab_config_t, member, k, prom, NULL, "gauge", help)
static const field_t config_fields[] = {
    JSON_ONLY(tslab_config_t, epoch_ring_size, K_U32),
    CF(reserve_bytes, K_SIZE, "tslab_config_reserve_bytes",
       "Virtual address space the configuration asks the instance to reserve."),
    CF(pool_resident_max, K_SIZE, "tslab_config_pool_resident_max_bytes",
       "Bound of the instance's part of the hot reserve: empty slab bytes its pool keeps."),
    CF(thread_reserve_max, K_SIZE, "tslab_config_thread_reserve_max_bytes",
       "Bound of each thread cache's part of the hot reserve: drained block bytes it keeps."),
    CF(pool_decay_max, K_SIZE, "tslab_config_pool_decay_max_bytes",
       "Empty bytes of open epochs the pool may keep beyond pool_resident_max until they decay."),
    CF(pool_decay_ms, K_MS32, "tslab_config_pool_decay_seconds",
       "How long memory kept by decay stays resident."),
    CF(block_budget, K_SIZE, "tslab_config_block_budget_bytes",
       "Bytes each thread may bump-allocate per epoch in blocks (0: blocks off)."),
    CF(max_alloc_size, K_SIZE, "tslab_config_max_alloc_size_bytes",
       "Largest request the instance accepts."),
    JSON_ONLY(tslab_config_t, release_policy, K_RELEASE),
    JSON_ONLY(tslab_config_t, advance_policy, K_ADVANCE),
};
#undef CF

#define K(member, k, prom, type, help) F(tslab_leak_t, member, k, prom, NULL, type, help)
static const field_t leak_fields[] = {
    JSON_ONLY(tslab_leak_t, era, K_U64),
    JSON_ONLY(tslab_leak_t, label, K_STR),
    K(age_ns, K_NS, "tslab_leak_age_seconds", "gauge", "Age of an era reported as a leak."),
    K(refcount, K_I64, "tslab_leak_refcount", "gauge",
      "Domain references held on an era reported as a leak."),
    K(live_bytes, K_U64, "tslab_leak_live_bytes", "gauge",
      "Live bytes of an era reported as a leak."),
    K(too_old, K_BOOL, "tslab_leak_too_old", "gauge",
      "1 when the era is open longer than the leak threshold."),
    K(refcount_stuck, K_BOOL, "tslab_leak_refcount_stuck", "gauge",
      "1 when the era's refcount is above zero while it is older than the leak threshold."),
};
#undef K
#undef F
#undef JSON_ONLY

#define COUNT(t) (sizeof(t) / sizeof((t)[0]))

static const char* release_policy_name(tslab_release_policy_t p) {
  switch (p) {
    case TSLAB_RELEASE_ON_CLOSE:
      return "on_close";
    case TSLAB_RELEASE_EAGER:
      return "eager";
    case TSLAB_RELEASE_POOLED:
      return "pooled";
  }
  return "unknown";
}

static const char* advance_policy_name(tslab_advance_policy_t p) {
  switch (p) {
    case TSLAB_ADVANCE_SKIP_OPEN:
      return "skip_open";
    case TSLAB_ADVANCE_NEXT_SLOT:
      return "next_slot";
  }
  return "unknown";
}

static const char* state_name(tslab_epoch_state_t st) {
  switch (st) {
    case TSLAB_EPOCH_EMPTY:
      return "empty";
    case TSLAB_EPOCH_ACTIVE:
      return "active";
    case TSLAB_EPOCH_CLOSING:
      return "closing";
  }
  return "unknown";
}

/* Prometheus wants seconds; printed from integer nanoseconds, so exactly. */
static void out_seconds(out_t* o, uint64_t ns) {
  out_fmt(o, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

/* Writes a number field; Prometheus wants seconds where JSON keeps exact ns. */
static void out_value(out_t* o, const void* item, const field_t* f, int prom) {
  const char* p = (const char*)item + f->off;
  uint64_t u;
  switch (f->kind) {
    case K_U64:
      memcpy(&u, p, sizeof u);
      out_fmt(o, "%" PRIu64, u);
      return;
    case K_NS:
      memcpy(&u, p, sizeof u);
      if (prom) {
        out_seconds(o, u);
      } else {
        out_fmt(o, "%" PRIu64, u);
      }
      return;
    case K_U32: {
      uint32_t v;
      memcpy(&v, p, sizeof v);
      out_fmt(o, "%" PRIu32, v);
      return;
    }
    case K_MS32: {
      uint32_t v;
      memcpy(&v, p, sizeof v);
      if (prom) {
        out_seconds(o, (uint64_t)v * 1000000u);
      } else {
        out_fmt(o, "%" PRIu32, v);
      }
      return;
    }
    case K_SIZE: {
      size_t v;
      memcpy(&v, p, sizeof v);
      out_fmt(o, "%zu", v);
      return;
    }
    case K_I64: {
      int64_t v;
      memcpy(&v, p, sizeof v);
      out_fmt(o, "%" PRId64, v);
      return;
    }
    case K_BOOL: {
      bool v;
      memcpy(&v, p, sizeof v);
      if (prom) {
        out_str(o, v ? "1" : "0");
      } else {
        out_str(o, v ? "true" : "false");
      }
      return;
    }
    case K_STR:
      out_str(o, "\"");
      out_escaped(o, p, TSLAB_LABEL_MAX, ESCAPE_JSON);
      out_str(o, "\"");
      return;
    case K_STATE: {
      tslab_epoch_state_t st;
      memcpy(&st, p, sizeof st);
      out_fmt(o, "\"%s\"", state_name(st));
      return;
    }
    case K_RELEASE: {
      tslab_release_policy_t rp;
      memcpy(&rp, p, sizeof rp);
      out_fmt(o, "\"%s\"", release_policy_name(rp));
      return;
    }
    case K_ADVANCE: {
      tslab_advance_policy_t ap;
      memcpy(&ap, p, sizeof ap);
      out_fmt(o, "\"%s\"", advance_policy_name(ap));
      return;
    }
  }
}

/* ------------------------------------------------------------------------- */
/* JSON                                                                      */
/* ------------------------------------------------------------------------- */

static void json_object(out_t* o, const void* item, const field_t* fields, size_t n) {
  out_str(o, "{");
  for (size_t i = 0; i < n; i++) {
    out_fmt(o, "%s\"%s\":", i ? "," : "", fields[i].json);
    out_value(o, item, &fields[i], 0);
  }
  out_str(o, "}");
}

static void json_array(out_t* o, const char* name, const void* items, size_t stride, size_t count,
                       const field_t* fields, size_t n) {
  out_fmt(o, ",\n\"%s\":[", name);
  for (size_t i = 0; i < count; i++) {
    out_str(o, i ? ",\n " : "\n ");
    json_object(o, (const char*)items + i * stride, fields, n);
  }
  out_str(o, "]");
}

size_t tslab_export_json(tslab_t* a, char* buf, size_t cap) {
  snapshot_t s;
  if (snapshot_take(a, &s) != 0) {
    snapshot_free(&s);
    return 0;
  }
  out_t o;
  out_init(&o, buf, cap);
  out_fmt(&o, "{\"schema_version\":%d,\"time_ns\":%" PRIu64 ",\"leak_threshold_ns\":%" PRIu64,
          EXPORT_SCHEMA_VERSION, s.now_ns, EXPORT_LEAK_THRESHOLD_NS);
  out_str(&o, ",\n\"global\":");
  json_object(&o, &s.global, global_fields, COUNT(global_fields));
  out_str(&o, ",\n\"sampling\":");
  json_object(&o, &s.sampling, sampling_fields, COUNT(sampling_fields));
  out_str(&o, ",\n\"config\":");
  json_object(&o, &s.config, config_fields, COUNT(config_fields));
  json_array(&o, "classes", s.classes, sizeof *s.classes, s.n_classes, class_fields,
             COUNT(class_fields));
  json_array(&o, "epochs", s.epochs, sizeof *s.epochs, s.n_epochs, epoch_fields,
             COUNT(epoch_fields));
  json_array(&o, "labels", s.labels, sizeof *s.labels, s.n_labels, label_fields,
             COUNT(label_fields));
  json_array(&o, "leaks", s.leaks, sizeof *s.leaks, s.n_leaks, leak_fields, COUNT(leak_fields));
  out_str(&o, "}\n");
  snapshot_free(&s);
  return o.len;
}

/* ------------------------------------------------------------------------- */
/* Prometheus text exposition format 0.0.4                                   */
/* ------------------------------------------------------------------------- */

/* Writes the label set identifying one item of a per-item section (without
 * braces). */
typedef void (*item_labels_fn)(out_t* o, const void* item);

static void labels_class(out_t* o, const void* item) {
  const tslab_stats_class_t* c = item;
  out_fmt(o, "class=\"%" PRIu32 "\"", c->object_size);
}

static void labels_epoch(out_t* o, const void* item) {
  const tslab_stats_epoch_t* e = item;
  out_fmt(o, "epoch=\"%" PRIu64 "\",slot=\"%" PRIu32 "\",state=\"%s\",label=\"", e->era, e->slot,
          state_name(e->state));
  out_escaped(o, e->label, sizeof e->label, ESCAPE_PROM);
  out_str(o, "\"");
}

static void labels_label(out_t* o, const void* item) {
  const tslab_stats_label_t* l = item;
  out_str(o, "label=\"");
  out_escaped(o, l->label, sizeof l->label, ESCAPE_PROM);
  out_str(o, "\"");
}

static void labels_leak(out_t* o, const void* item) {
  const tslab_leak_t* k = item;
  out_fmt(o, "epoch=\"%" PRIu64 "\",label=\"", k->era);
  out_escaped(o, k->label, sizeof k->label, ESCAPE_PROM);
  out_str(o, "\"");
}

static void prom_header(out_t* o, const char* name, const char* type, const char* help) {
  out_fmt(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Emits every family of a table; each family lists all items, so HELP and
 * TYPE appear once per family as the format requires. With labels == NULL
 * the table describes one item without labels of its own. */
static void prom_section(out_t* o, const field_t* fields, size_t n, const void* items,
                         size_t stride, size_t count, item_labels_fn labels) {
  for (size_t i = 0; i < n; i++) {
    const field_t* f = &fields[i];
    if (!f->prom) continue;
    if (f->help) prom_header(o, f->prom, f->type, f->help);
    for (size_t j = 0; j < count; j++) {
      const void* item = (const char*)items + j * stride;
      out_str(o, f->prom);
      if (labels || f->prom_label) {
        out_str(o, "{");
        if (labels) labels(o, item);
        if (f->prom_label) {
          if (labels) out_str(o, ",");
          out_str(o, f->prom_label);
        }
        out_str(o, "}");
      }
      out_str(o, " ");
      out_value(o, item, f, 1);
      out_str(o, "\n");
    }
  }
}

size_t tslab_export_prometheus(tslab_t* a, char* buf, size_t cap) {
  snapshot_t s;
  if (snapshot_take(a, &s) != 0) {
    snapshot_free(&s);
    return 0;
  }
  out_t o;
  out_init(&o, buf, cap);
  prom_section(&o, global_fields, COUNT(global_fields), &s.global, 0, 1, NULL);
  prom_section(&o, sampling_fields, COUNT(sampling_fields), &s.sampling, 0, 1, NULL);
  prom_section(&o, config_fields, COUNT(config_fields), &s.config, 0, 1, NULL);
  prom_header(&o, "tslab_config_info", "gauge",
              "Always 1; the labels name the instance's release and advance policies.");
  out_fmt(&o, "tslab_config_info{release_policy=\"%s\",advance_policy=\"%s\"} 1\n",
          release_policy_name(s.config.release_policy),
          advance_policy_name(s.config.advance_policy));
  prom_section(&o, class_fields, COUNT(class_fields), s.classes, sizeof *s.classes, s.n_classes,
               labels_class);
  /* Slots that never held an era have no identity worth a series. */
  size_t n_epochs = 0;
  for (size_t i = 0; i < s.n_epochs; i++) {
    if (s.epochs[i].state != TSLAB_EPOCH_EMPTY) s.epochs[n_epochs++] = s.epochs[i];
  }
  prom_section(&o, epoch_fields, COUNT(epoch_fields), s.epochs, sizeof *s.epochs, n_epochs,
               labels_epoch);
  prom_section(&o, label_fields, COUNT(label_fields), s.labels, sizeof *s.labels, s.n_labels,
               labels_label);
  prom_header(&o, "tslab_leak_threshold_seconds", "gauge",
              "Age above which an open era is reported as a leak.");
  out_str(&o, "tslab_leak_threshold_seconds ");
  out_seconds(&o, EXPORT_LEAK_THRESHOLD_NS);
  out_str(&o, "\n");
  prom_header(&o, "tslab_leak_epochs", "gauge", "Eras currently reported as leaks.");
  out_fmt(&o, "tslab_leak_epochs %zu\n", s.n_leaks);
  prom_section(&o, leak_fields, COUNT(leak_fields), s.leaks, sizeof *s.leaks, s.n_leaks,
               labels_leak);
  snapshot_free(&s);
  return o.len;
}
