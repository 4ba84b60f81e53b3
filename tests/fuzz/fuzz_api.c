/* Fuzz target: the input bytes drive a random sequence of public API calls on
 * one instance, with invalid, foreign, interior, stale and double-freed
 * pointers and handles mixed in. A model of the live set and of the epoch ring
 * predicts the result of every call; after every step the allocator's own
 * checker must find nothing and every live object must still hold the pattern
 * written when it was allocated. Any divergence aborts, which both libFuzzer
 * and the corpus replay test (replay_main.c) report as a failure.
 *
 * The driver is single-threaded: cross-thread paths are the business of the
 * concurrency tests and the model check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_api.h"
#include "tslab.h"

#define MAX_OBJS 48
#define MAX_OPS 400
#define MAX_DOMAINS 4
#define MAX_DEPTH 6
#define STALE_KEEP 16
#define RESERVE ((size_t)256 << 20)
#define LARGE_MAX ((size_t)4 << 20)
#define PATTERN_WHOLE ((size_t)64 << 10) /* larger objects: head and tail only */
#define PATTERN_EDGE ((size_t)4 << 10)
#define QUICK_EDGE 32

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "fuzz_api: step %u: ", step);   \
    fprintf(stderr, __VA_ARGS__);                   \
    fputc('\n', stderr);                            \
    abort();                                        \
  } while (0)

typedef struct {
  unsigned char* p;
  size_t size;
  uint64_t era;
  uint64_t id;
  tslab_handle_t h; /* 0 when allocated without a handle */
} obj_t;

typedef struct {
  tslab_domain_t* d;
  uint64_t era;
  unsigned scopes;
  bool owns;
} dom_t;

typedef struct {
  const uint8_t* data;
  size_t len, pos;
} input_t;

/* All state of one run; static so a crash leaves it inspectable. */
static struct {
  tslab_t *a, *b;
  uint32_t ring;
  bool skip_open;            /* TSLAB_ADVANCE_SKIP_OPEN */
  uint64_t cur;              /* current era */
  uint64_t slot_era[256];    /* era held by each ring slot (0: none) */
  bool slot_closed[256];
  obj_t objs[MAX_OBJS];
  unsigned nobjs;
  uint64_t next_id;
  void* stale_ptrs[STALE_KEEP];
  tslab_handle_t stale_handles[STALE_KEEP];
  unsigned stale_n;
  dom_t doms[MAX_DOMAINS];
  unsigned ndoms;
  unsigned stack[MAX_DEPTH]; /* indices into doms, innermost last */
  unsigned depth;
  size_t max;                /* max_alloc_size */
  uint64_t invalid_frees;    /* refusals the instance must have counted */
  void* foreign;
  void* other;               /* a live object of instance b */
  tslab_handle_t other_h;
} m;
static unsigned step;

static uint8_t u8(input_t* in) { return in->pos < in->len ? in->data[in->pos++] : 0; }

static uint32_t u32(input_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = v << 8 | u8(in);
  return v;
}

static unsigned char pattern(uint64_t id, size_t k) {
  return (unsigned char)(id * 131u + k * 7u + (k >> 8));
}

/* The byte ranges of an object that carry its pattern. */
static void pattern_ranges(size_t size, size_t edge, size_t r[2][2]) {
  if (size <= 2 * edge) {
    r[0][0] = 0, r[0][1] = size, r[1][0] = r[1][1] = size;
  } else {
    r[0][0] = 0, r[0][1] = edge, r[1][0] = size - edge, r[1][1] = size;
  }
}

static void fill(const obj_t* o) {
  size_t r[2][2];
  pattern_ranges(o->size, o->size <= PATTERN_WHOLE ? o->size : PATTERN_EDGE, r);
  for (int i = 0; i < 2; i++)
    for (size_t k = r[i][0]; k < r[i][1]; k++) o->p[k] = pattern(o->id, k);
}

static void verify(const obj_t* o, size_t edge) {
  size_t r[2][2];
  size_t full = o->size <= PATTERN_WHOLE ? o->size : PATTERN_EDGE;
  pattern_ranges(o->size, edge < full ? edge : full, r);
  for (int i = 0; i < 2; i++)
    for (size_t k = r[i][0]; k < r[i][1]; k++)
      if (o->p[k] != pattern(o->id, k))
        FAIL("object %llu (%zu bytes at %p) corrupted at offset %zu",
             (unsigned long long)o->id, o->size, (void*)o->p, k);
}

/* ---- the epoch model ---------------------------------------------------- */

/* Eras skipped by the skip-open policy were never opened: their slot holds
 * an older era (unknown) until a newer one takes it (stale). */
static int epoch_status(uint64_t e) {
  if (e == 0 || e > m.cur) return TSLAB_ERR_EPOCH_UNKNOWN;
  uint64_t held = m.slot_era[e % m.ring];
  if (held != e) return held > e ? TSLAB_ERR_EPOCH_STALE : TSLAB_ERR_EPOCH_UNKNOWN;
  return m.slot_closed[e % m.ring] ? TSLAB_ERR_EPOCH_CLOSED : TSLAB_OK;
}

static bool slot_open(uint64_t e) {
  return m.slot_era[e % m.ring] != 0 && !m.slot_closed[e % m.ring];
}

/* The era tslab_epoch_advance opens, per the advance policy. */
static void model_advance(void) {
  uint64_t e = m.cur + 1;
  if (m.skip_open)
    for (uint32_t i = 0; i < m.ring; i++)
      if (!slot_open(e + i)) {
        e += i;
        break;
      }
  m.cur = e;
  m.slot_era[e % m.ring] = e;
  m.slot_closed[e % m.ring] = false;
}

static int model_close(uint64_t e) {
  int st = epoch_status(e);
  if (st == TSLAB_ERR_EPOCH_CLOSED) return TSLAB_OK;
  if (st == TSLAB_OK) m.slot_closed[e % m.ring] = true;
  return st;
}

static uint64_t pick_era(input_t* in) {
  uint8_t s = u8(in);
  switch (s % 8) {
    case 0: return 0;
    case 1: return m.cur + 1 + s / 8;
    case 2: return UINT64_MAX - s / 8;
    case 3: return m.cur > (uint64_t)s / 8 ? m.cur - s / 8 : 1;       /* near the current */
    case 4: return m.cur > m.ring ? m.cur - m.ring - s / 8 % m.ring : 1; /* likely stale */
    default: return m.cur;
  }
}

/* ---- sizes -------------------------------------------------------------- */

static size_t pick_size(input_t* in) {
  uint8_t s = u8(in);
  uint32_t v = u32(in);
  switch (s % 10) {
    case 0: return s / 10 % 4 == 0 ? 0 : 1 + v % 16;
    case 1:
    case 2: { /* a class boundary, or one byte past it */
      tslab_stats_class_t c;
      if (tslab_stats_class(m.a, v % tslab_class_count(m.a), &c) != TSLAB_OK)
        FAIL("tslab_stats_class refused a valid index");
      return c.object_size + (s & 1);
    }
    case 3:
    case 4:
    case 5: return 1 + v % tslab_small_max();
    case 6: return tslab_small_max() + (s & 1);
    case 7: return tslab_small_max() + 1 + v % (LARGE_MAX - tslab_small_max());
    case 8: return 1 + v % 256;
    default: {
      const size_t huge[] = {SIZE_MAX, m.max + 1, m.max};
      return huge[v % 3];
    }
  }
}

static size_t round_granule(size_t n) { return (n + 16383) & ~(size_t)16383; }

/* May an allocation of `size` run out of memory? Only when the reservation
 * cannot hold it past the committed high-water mark (the page heap always
 * extends that mark before it gives up). */
static bool oom_allowed(size_t size) {
  tslab_stats_global_t g;
  tslab_stats_global(m.a, &g);
  size_t need = size > tslab_small_max() ? round_granule(size) : (size_t)256 << 10;
  return g.committed_bytes + need > RESERVE;
}

/* The outcome of an allocation of size in era e: p must be NULL exactly when
 * the model predicts a failure, with the predicted reason. */
static bool check_alloc_result(void* p, size_t size, uint64_t e, const char* what) {
  int want = size == 0 || size > m.max ? TSLAB_ERR_BAD_SIZE : epoch_status(e);
  int got = tslab_last_error();
  if (want != TSLAB_OK) {
    if (p) FAIL("%s(%zu, era %llu) succeeded, expected status %d", what, size,
                (unsigned long long)e, want);
    if (got != want) FAIL("%s(%zu, era %llu): status %d, expected %d", what, size,
                          (unsigned long long)e, got, want);
    return false;
  }
  if (!p) {
    if (got != TSLAB_ERR_OUT_OF_MEMORY || !oom_allowed(size))
      FAIL("%s(%zu, era %llu) failed with status %d", what, size, (unsigned long long)e, got);
    return false;
  }
  return true;
}

static obj_t* find_obj(const void* p) {
  for (unsigned i = 0; i < m.nobjs; i++)
    if (m.objs[i].p == p) return &m.objs[i];
  return NULL;
}

static obj_t* find_handle(tslab_handle_t h) {
  for (unsigned i = 0; i < m.nobjs; i++)
    if (h != 0 && m.objs[i].h == h) return &m.objs[i];
  return NULL;
}

static void add_obj(void* p, size_t size, uint64_t e, tslab_handle_t h, bool zeroed) {
  if (find_obj(p)) FAIL("%p handed out twice", p);
  size_t usable = tslab_usable_size(m.a, p);
  if (usable < size) FAIL("usable size %zu below the request %zu", usable, size);
  if (tslab_epoch_of(m.a, p) != e)
    FAIL("epoch_of %llu, expected %llu", (unsigned long long)tslab_epoch_of(m.a, p),
         (unsigned long long)e);
  /* Natural alignment (tslab.h): the largest power of two dividing the
   * class, between 8 and 16; large spans are 16 KiB aligned. */
  uintptr_t align = size > tslab_small_max() ? 16384 : usable % 16 == 0 ? 16 : 8;
  if ((uintptr_t)p % align != 0) FAIL("%p misaligned for %zu bytes", p, size);
  if (zeroed) {
    size_t r[2][2];
    pattern_ranges(size, size <= PATTERN_WHOLE ? size : PATTERN_EDGE, r);
    for (int i = 0; i < 2; i++)
      for (size_t k = r[i][0]; k < r[i][1]; k++)
        if (((unsigned char*)p)[k]) FAIL("calloc memory not zero at %zu", k);
  }
  if (m.nobjs == MAX_OBJS) {
    /* Model full: free it again at once, it has served its purpose. */
    if (!tslab_free(m.a, p)) FAIL("free of a fresh allocation failed");
    return;
  }
  obj_t* o = &m.objs[m.nobjs++];
  *o = (obj_t){(unsigned char*)p, size, e, ++m.next_id, h};
  fill(o);
}

static void remember_stale(void* p, tslab_handle_t h) {
  m.stale_ptrs[m.stale_n % STALE_KEEP] = p;
  m.stale_handles[m.stale_n % STALE_KEEP] = h;
  m.stale_n++;
}

static void forget(obj_t* o) {
  remember_stale(o->p, o->h);
  *o = m.objs[--m.nobjs];
}

/* ---- operations --------------------------------------------------------- */

static void op_alloc(input_t* in, int kind) {
  size_t size = pick_size(in);
  uint64_t e = pick_era(in);
  tslab_handle_t h = 0;
  void* p;
  tslab_clear_error();
  switch (kind) {
    case 0: p = tslab_alloc(m.a, size, e); break;
    case 1: p = tslab_alloc_handle(m.a, size, e, &h); break;
    default: {
      size_t count = 1 + u8(in) % 8;
      if (u8(in) == 0xff) { /* count * size overflows */
        p = tslab_calloc(m.a, SIZE_MAX / 2 + 1, 2 + size, e);
        if (p || tslab_last_error() != TSLAB_ERR_BAD_SIZE) FAIL("calloc overflow accepted");
        return;
      }
      /* Zeroing is the allocator's work, paid per byte: keep it bounded. */
      size = (size <= m.max && size > LARGE_MAX ? LARGE_MAX : size) / count;
      p = tslab_calloc(m.a, count, size, e);
      size *= count;
      break;
    }
  }
  if (!check_alloc_result(p, size, e, kind == 0 ? "alloc" : kind == 1 ? "alloc_handle" : "calloc"))
    return;
  if (kind == 1 && (h == 0 || tslab_handle_get(m.a, h) != p)) FAIL("handle does not name %p", p);
  add_obj(p, size, e, h, kind == 2);
}

static void op_aligned(input_t* in) {
  uint8_t s = u8(in);
  size_t align = s % 4 == 0 ? (size_t)(s | 1) * 3 : (size_t)1 << (s % 23); /* bad ones too */
  size_t size = pick_size(in);
  uint64_t e = pick_era(in);
  tslab_clear_error();
  void* p = tslab_aligned_alloc(m.a, align, size, e);
  if (align & (align - 1) || align > ((size_t)1 << 20)) {
    if (p || tslab_last_error() != TSLAB_ERR_BAD_ALIGNMENT)
      FAIL("alignment %zu accepted (status %d)", align, tslab_last_error());
    return;
  }
  if (!check_alloc_result(p, size, e, "aligned_alloc")) return;
  if ((uintptr_t)p % align) FAIL("aligned_alloc(%zu, %zu) = %p: misaligned", align, size, p);
  add_obj(p, size, e, 0, false);
}

static void op_free_live(input_t* in) {
  if (!m.nobjs) return;
  obj_t* o = &m.objs[u8(in) % m.nobjs];
  bool by_handle = o->h && (u8(in) & 1);
  verify(o, SIZE_MAX);
  bool ok = by_handle ? tslab_free_handle(m.a, o->h) : tslab_free(m.a, o->p);
  if (!ok) FAIL("valid free of object %llu refused", (unsigned long long)o->id);
  void* p = o->p;
  tslab_handle_t h = o->h;
  forget(o);
  if (u8(in) & 1) { /* double free, at once */
    bool again = by_handle ? tslab_free_handle(m.a, h) : tslab_free(m.a, p);
    if (again) FAIL("double free of %p accepted", p);
    m.invalid_frees++;
  }
}

/* A pointer that is not a live allocation of m.a, unless the model says it
 * is (a stale pointer whose slot was handed out again). */
static void* bad_pointer(input_t* in, unsigned char* stack_byte) {
  uint8_t s = u8(in);
  uint32_t v = u32(in);
  switch (s % 8) {
    case 0: return m.foreign;
    case 1: return stack_byte;
    case 2: return m.other;
    case 3:
    case 4:
      if (m.nobjs) { /* interior */
        obj_t* o = &m.objs[v % m.nobjs];
        size_t usable = tslab_usable_size(m.a, o->p);
        return o->p + 1 + (usable > 1 ? v / 7 % (usable - 1) : 0);
      }
      return NULL;
    case 5: return m.stale_n ? m.stale_ptrs[v % (m.stale_n < STALE_KEEP ? m.stale_n : STALE_KEEP)] : NULL;
    case 6: /* somewhere in or near the reservation */
      return m.nobjs ? (void*)((uintptr_t)m.objs[0].p + (uintptr_t)((int64_t)(int32_t)v * 16)) : NULL;
    default: return (void*)(uintptr_t)(v | 1);
  }
}

static void op_free_bad(input_t* in) {
  unsigned char stack_byte = 0;
  void* p = bad_pointer(in, &stack_byte);
  obj_t* o = find_obj(p);
  bool ok = tslab_free(m.a, p);
  if (p == NULL || o) {
    if (!ok) FAIL("free(%p) refused, the model says it is live or NULL", p);
    if (o) forget(o);
    return;
  }
  if (ok) FAIL("free of a bad pointer %p accepted", p);
  m.invalid_frees++;
  if (tslab_usable_size(m.a, p) != 0 || tslab_epoch_of(m.a, p) != 0)
    FAIL("usable_size/epoch_of answer for the bad pointer %p", p);
}

static void op_realloc(input_t* in) {
  if (!m.nobjs || (u8(in) & 7) == 0) {
    unsigned char stack_byte = 0;
    void* p = bad_pointer(in, &stack_byte);
    if (p == NULL || find_obj(p)) return;
    tslab_clear_error();
    if (tslab_realloc(m.a, p, 64) != NULL || tslab_last_error() != TSLAB_ERR_INVALID_POINTER)
      FAIL("realloc of the bad pointer %p accepted", p);
    m.invalid_frees++;
    return;
  }
  obj_t* o = &m.objs[u8(in) % m.nobjs];
  size_t size = pick_size(in);
  size_t head = o->size <= PATTERN_WHOLE ? o->size : PATTERN_EDGE;
  tslab_clear_error();
  unsigned char* q = tslab_realloc(m.a, o->p, size);
  if (!q) {
    int got = tslab_last_error();
    int st = epoch_status(o->era);
    bool ok = size == 0 || size > m.max ? got == TSLAB_ERR_BAD_SIZE
              : got == TSLAB_ERR_OUT_OF_MEMORY ? oom_allowed(size)
                                               : st != TSLAB_OK && got == st;
    if (!ok) FAIL("realloc(%zu -> %zu) failed with status %d (era status %d)", o->size, size, got, st);
    verify(o, SIZE_MAX);
    return;
  }
  if (size == 0 || size > m.max) FAIL("realloc to %zu bytes succeeded", size);
  if (q != o->p) {
    if (epoch_status(o->era) != TSLAB_OK) FAIL("realloc moved an object of a closed era");
    if (find_obj(q)) FAIL("%p handed out twice", (void*)q);
    remember_stale(o->p, o->h);
    o->p = q;
    o->h = 0;
  }
  for (size_t k = 0; k < head && k < size; k++)
    if (q[k] != pattern(o->id, k)) FAIL("realloc lost byte %zu of object %llu", k, (unsigned long long)o->id);
  if (tslab_usable_size(m.a, q) < size || tslab_epoch_of(m.a, q) != o->era)
    FAIL("realloc result %p: usable size or era wrong", (void*)q);
  o->size = size;
  fill(o);
}

static void op_handles(input_t* in) {
  uint8_t s = u8(in);
  uint32_t v = u32(in);
  tslab_handle_t h;
  bool forged = s % 5 >= 3;
  switch (s % 5) {
    case 0: h = m.nobjs ? m.objs[v % m.nobjs].h : 0; break;
    case 1: h = m.stale_n ? m.stale_handles[v % (m.stale_n < STALE_KEEP ? m.stale_n : STALE_KEEP)] : 0; break;
    case 2: h = m.other_h; break;
    case 3: h = ((uint64_t)v << 32) | u32(in); break;
    default: /* a live handle with its generation or slot changed */
      h = m.nobjs ? m.objs[v % m.nobjs].h ^ ((uint64_t)1 << (s / 5 % 64)) : 0;
      break;
  }
  obj_t* o = find_handle(h);
  void* p = tslab_handle_get(m.a, h);
  /* A forged handle may happen to name a live slot with its current
   * generation: then it is a valid name of that object. */
  if (!o && forged && p) o = find_obj(p);
  if (p != (o ? o->p : NULL))
    FAIL("handle_get(%#llx) = %p, expected %p", (unsigned long long)h, p, o ? (void*)o->p : NULL);
  if (!(s & 0x80)) return;
  bool ok = tslab_free_handle(m.a, h);
  if (ok != (o != NULL)) FAIL("free_handle(%#llx) = %d", (unsigned long long)h, ok);
  if (o) {
    forget(o);
  } else {
    m.invalid_frees++;
  }
}

static void op_epochs(input_t* in) {
  uint8_t s = u8(in);
  switch (s % 4) {
    case 0: {
      tslab_epoch_t e = tslab_epoch_advance(m.a);
      model_advance();
      if (e != m.cur) FAIL("advance opened %llu, expected %llu", (unsigned long long)e,
                           (unsigned long long)m.cur);
      break;
    }
    case 1: {
      uint64_t e = pick_era(in);
      int got = tslab_epoch_close(m.a, e);
      int want = model_close(e);
      if (got != want) FAIL("close(%llu) = %d, expected %d", (unsigned long long)e, got, want);
      break;
    }
    case 2: {
      uint64_t e = pick_era(in);
      if (tslab_epoch_status(m.a, e) != epoch_status(e))
        FAIL("status(%llu) = %d, expected %d", (unsigned long long)e, tslab_epoch_status(m.a, e),
             epoch_status(e));
      break;
    }
    default: tslab_thread_flush(m.a); break;
  }
  if (tslab_epoch_current(m.a) != m.cur) FAIL("current era diverged");
}

/* ---- domains ------------------------------------------------------------ */

static void dom_remove(unsigned k) { m.doms[k] = m.doms[--m.ndoms]; }

static void dom_exit_model(dom_t* d) {
  m.depth--;
  if (--d->scopes == 0 && d->owns) model_close(d->era);
}

static void op_domains(input_t* in) {
  uint8_t s = u8(in);
  unsigned k = m.ndoms ? u8(in) % m.ndoms : 0;
  dom_t* d = m.ndoms ? &m.doms[k] : NULL;
  tslab_clear_error();
  switch (s % 7) {
    case 0:
    case 1: {
      if (m.ndoms == MAX_DOMAINS) return;
      bool create = s % 7 == 0;
      uint64_t e = create ? 0 : pick_era(in);
      tslab_domain_t* nd = create ? tslab_domain_create(m.a, (s & 0x80) ? "fuzz" : NULL)
                                  : tslab_domain_wrap(m.a, e);
      int want = TSLAB_OK;
      if (create) {
        model_advance();
        e = m.cur;
      } else {
        want = epoch_status(e);
      }
      if ((nd != NULL) != (want == TSLAB_OK) || (!nd && tslab_last_error() != want))
        FAIL("domain create/wrap(%llu): %p, status %d, expected %d", (unsigned long long)e,
             (void*)nd, tslab_last_error(), want);
      if (nd) {
        if (tslab_domain_epoch(nd) != e || tslab_domain_allocator(nd) != m.a)
          FAIL("domain bound to era %llu", (unsigned long long)tslab_domain_epoch(nd));
        m.doms[m.ndoms++] = (dom_t){nd, e, 0, create};
      }
      return;
    }
    case 2: {
      if (!d || m.depth == MAX_DEPTH) return;
      int want = epoch_status(d->era);
      int got = tslab_domain_enter(d->d);
      if (got != want) FAIL("domain_enter: %d, expected %d", got, want);
      if (got == TSLAB_OK) {
        m.stack[m.depth++] = k;
        d->scopes++;
      }
      return;
    }
    case 3: {
      if (!d) return;
      int want = d->scopes == 0 ? TSLAB_ERR_NOT_ENTERED
                 : m.stack[m.depth - 1] != k ? TSLAB_ERR_NOT_INNERMOST
                                             : TSLAB_OK;
      int got = tslab_domain_exit(d->d);
      if (got != want) FAIL("domain_exit: %d, expected %d", got, want);
      if (got == TSLAB_OK) dom_exit_model(d);
      return;
    }
    case 4: {
      size_t size = pick_size(in);
      void* p = tslab_domain_alloc(size);
      if (m.depth == 0) {
        if (p || tslab_last_error() != TSLAB_ERR_NO_DOMAIN) FAIL("domain_alloc without a domain");
        return;
      }
      uint64_t e = m.doms[m.stack[m.depth - 1]].era;
      if (tslab_domain_current() != m.doms[m.stack[m.depth - 1]].d) FAIL("domain_current diverged");
      if (check_alloc_result(p, size, e, "domain_alloc")) add_obj(p, size, e, 0, false);
      return;
    }
    case 5: {
      if (!d) return;
      int want = model_close(d->era);
      int got = tslab_domain_force_close(d->d);
      if (got != want) FAIL("domain_force_close: %d, expected %d", got, want);
      return;
    }
    default: {
      if (!d) return;
      int got = tslab_domain_destroy(d->d);
      if (got != (d->scopes ? TSLAB_ERR_DOMAIN_ENTERED : TSLAB_OK))
        FAIL("domain_destroy with %u scopes: %d", d->scopes, got);
      if (got == TSLAB_OK) {
        if (d->owns) model_close(d->era);
        for (unsigned i = 0; i < m.depth; i++)
          if (m.stack[i] == m.ndoms - 1) m.stack[i] = k;
        dom_remove(k);
      }
      return;
    }
  }
}

/* ---- after every step --------------------------------------------------- */

static void check_all(void) {
  char report[256] = "";
  size_t n = tslab_check(m.a, report, sizeof report);
  if (n) FAIL("tslab_check: %zu inconsistencies: %s", n, report);
  for (unsigned i = 0; i < m.nobjs; i++) verify(&m.objs[i], QUICK_EDGE);
  tslab_stats_global_t g;
  tslab_stats_global(m.a, &g);
  if (g.live_objects != m.nobjs)
    FAIL("stats: %llu live objects, the model has %u", (unsigned long long)g.live_objects, m.nobjs);
  if (g.invalid_frees_total != m.invalid_frees)
    FAIL("stats: %llu invalid frees counted, %llu made", (unsigned long long)g.invalid_frees_total,
         (unsigned long long)m.invalid_frees);
}

static void setup(input_t* in) {
  memset(&m, 0, sizeof m);
  step = 0;
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = 2u << (u8(in) % 7); /* 2 .. 128 */
  cfg.reserve_bytes = RESERVE;
  cfg.max_alloc_size = RESERVE / 2;
  uint8_t policy = u8(in);
  static const tslab_release_policy_t release[] = {TSLAB_RELEASE_ON_CLOSE, TSLAB_RELEASE_EAGER,
                                                   TSLAB_RELEASE_POOLED, TSLAB_RELEASE_ON_CLOSE};
  cfg.release_policy = release[(policy & 1) | (policy >> 1 & 2)];
  cfg.advance_policy = (policy & 2) ? TSLAB_ADVANCE_NEXT_SLOT : TSLAB_ADVANCE_SKIP_OPEN;
  m.skip_open = cfg.advance_policy == TSLAB_ADVANCE_SKIP_OPEN;
  m.ring = cfg.epoch_ring_size;
  m.max = cfg.max_alloc_size;
  m.a = tslab_create(&cfg);
  cfg.epoch_ring_size = 4;
  m.b = tslab_create(&cfg);
  if (!m.a || !m.b) FAIL("tslab_create failed");
  m.cur = 1;
  m.slot_era[1 % m.ring] = 1;
  m.foreign = malloc(64);
  m.other = tslab_alloc_handle(m.b, 64, 1, &m.other_h);
  if (!m.foreign || !m.other) FAIL("setup allocation failed");
  memset(m.other, 0x5a, 64);
}

static void teardown(void) {
  step = MAX_OPS + 1;
  for (unsigned i = 0; i < m.nobjs; i++) verify(&m.objs[i], SIZE_MAX);
  while (m.depth) {
    dom_t* d = &m.doms[m.stack[m.depth - 1]];
    if (tslab_domain_exit(d->d) != TSLAB_OK) FAIL("teardown: domain_exit");
    dom_exit_model(d);
  }
  while (m.ndoms) {
    if (tslab_domain_destroy(m.doms[0].d) != TSLAB_OK) FAIL("teardown: domain_destroy");
    dom_remove(0);
  }
  while (m.nobjs)
    if (!tslab_free(m.a, m.objs[0].p)) FAIL("teardown: free refused");
    else forget(&m.objs[0]);
  check_all();
  for (int i = 0; i < 64; i++)
    if (((unsigned char*)m.other)[i] != 0x5a) FAIL("the other instance's object changed");
  if (!tslab_free(m.b, m.other) || tslab_check(m.b, NULL, 0)) FAIL("the other instance diverged");
  tslab_destroy(m.a);
  tslab_destroy(m.b);
  free(m.foreign);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  input_t in = {data, len, 0};
  setup(&in);
  for (step = 1; step <= MAX_OPS && in.pos < in.len; step++) {
    uint8_t op = u8(&in);
    switch (op % 12) {
      case 0:
      case 1: op_alloc(&in, 0); break;
      case 2: op_alloc(&in, 1); break;
      case 3: op_alloc(&in, 2); break;
      case 4: op_aligned(&in); break;
      case 5:
      case 6: op_free_live(&in); break;
      case 7: op_free_bad(&in); break;
      case 8: op_realloc(&in); break;
      case 9: op_handles(&in); break;
      case 10: op_epochs(&in); break;
      default: op_domains(&in); break;
    }
    check_all();
  }
  teardown();
  return 0;
}
