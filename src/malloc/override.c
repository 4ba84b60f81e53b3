/* The names the C library and the C++ runtime allocate through.
 *
 * Defining them in a library that comes before the C library in the search
 * order (LD_PRELOAD, or linked first) makes every call in the process bind
 * here: the program's, every library's, and the C library's own internal
 * calls, which go through the same symbols. The __libc_ names are defined
 * too, for programs that call glibc's allocator by those names.
 *
 * The fast paths are the core's calls with the thread's epoch: one TLS load
 * and one test on top of tslab_alloc, one test on top of tslab_free. Every
 * other case is in alloc.c.
 *
 * The C++ operators are defined here under their mangled names (Itanium C++
 * ABI, 64-bit size_t), so that the library needs no C++ runtime: a failing
 * operator new calls the program's new-handler and throws std::bad_alloc
 * through the C++ runtime's own entry points, which are there whenever C++
 * code runs (found when needed: a C program may load its C++ runtime with a
 * plugin, after this library), and the nothrow forms leave the catch to the
 * runtime's own nothrow forms. This file is built with unwind tables, so the
 * exception passes through these frames. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dropin.h"

#define EXPORT __attribute__((visibility("default")))

/* Alignments up to 8 are what every block has: the plain allocation. */
static inline size_t alignment_asked(size_t alignment) {
  return alignment > sizeof(void*) ? alignment : 0;
}

/* The core's call in the thread's epoch; NULL when the thread has none yet
 * (or is guarded) or the core's call failed: the caller's slow path then. */
static inline void* alloc_core(size_t size, size_t alignment) {
  tslab_epoch_t e = dropin_tls.epoch;
  if (dropin_unlikely(e == 0)) return NULL;
  size = dropin_request(size);
  return alignment ? tslab_aligned_alloc(dropin_heap(), alignment, size, e) : tslab_alloc(dropin_heap(), size, e);
}

static inline void* alloc_aligned(size_t alignment, size_t size) {
  alignment = alignment_asked(alignment);
  void* p = alloc_core(size, alignment);
  return dropin_likely(p != NULL) ? p : dropin_alloc_slow(size, alignment, false);
}

static inline void* alloc_fast(size_t size) {
  return alloc_aligned(0, size);
}

static inline void free_fast(void* p) {
  if (dropin_likely(tslab_free(dropin_heap(), p))) return;
  dropin_free_slow(p);
}

static bool is_pow2(size_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

/* ---- C ---- */

EXPORT void* malloc(size_t size) {
  return alloc_fast(size);
}

EXPORT void free(void* p) {
  free_fast(p);
}

EXPORT void* calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  tslab_epoch_t e = dropin_tls.epoch;
  if (dropin_likely(e != 0)) {
    void* p = tslab_calloc(dropin_heap(), 1, dropin_request(bytes), e);
    if (dropin_likely(p != NULL)) return p;
  }
  return dropin_alloc_slow(bytes, 0, true);
}

EXPORT void* realloc(void* p, size_t size) {
  return dropin_realloc(p, size);
}

EXPORT void* reallocarray(void* p, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return dropin_realloc(p, bytes);
}

EXPORT size_t malloc_usable_size(void* p) {
  size_t n = tslab_usable_size(dropin_heap(), p);
  return dropin_likely(n != 0) ? n : dropin_usable_size_slow(p);
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (!is_pow2(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  int saved = errno;
  void* p = alloc_aligned(alignment, size);
  errno = saved; /* posix_memalign reports through its result only */
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  if (!is_pow2(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return alloc_aligned(alignment, size);
}

/* glibc's memalign takes any alignment up to SIZE_MAX / 2 + 1 (above, EINVAL)
 * and rounds it up to a power of two. */
EXPORT void* memalign(size_t alignment, size_t size) {
  if (alignment > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (!is_pow2(alignment)) {
    size_t a = sizeof(void*);
    while (a < alignment && a <= SIZE_MAX / 2) a <<= 1;
    alignment = a;
  }
  return alloc_aligned(alignment, size);
}

EXPORT void* valloc(size_t size) {
  return alloc_aligned((size_t)sysconf(_SC_PAGESIZE), size);
}

EXPORT void* pvalloc(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t rounded = (size + page - 1) & ~(page - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_aligned(page, rounded ? rounded : page);
}

EXPORT void cfree(void* p);
EXPORT void cfree(void* p) {
  free_fast(p);
}

/* ---- glibc's other entry points ---- */

/* What programs call it for: give free memory back to the system. The
 * calling thread's cache goes to the shared pool, then the whole hot reserve
 * (every cache's drained blocks, idle threads' too, and the pool) is
 * released. 1 when memory was released, as glibc answers. `pad`, the bytes
 * glibc leaves at the top of its heap, has no counterpart: the reserve is
 * released whole, and memory in use is never trimmed. */
EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  tslab_t* a = dropin_heap();
  if (!a) return 0;
  tslab_thread_flush(a);
  return tslab_reserve_release(a) != 0;
}

EXPORT void malloc_stats(void) {
  tslab_malloc_print_stats(STDERR_FILENO);
}

EXPORT int mallopt(int param, int value) {
  (void)param;
  (void)value;
  return 1; /* accepted; tslab has no such knobs (TSLAB_* variables instead) */
}

static void fill_info(size_t* arena, size_t* used, size_t* unused) {
  tslab_stats_global_t g = {0};
  tslab_t* a = dropin_heap();
  if (a) (void)tslab_stats_global(a, &g);
  *arena = (size_t)g.committed_bytes;
  *used = (size_t)g.live_bytes;
  *unused = g.committed_bytes > g.live_bytes ? (size_t)(g.committed_bytes - g.live_bytes) : 0;
}

EXPORT struct mallinfo2 mallinfo2(void) {
  struct mallinfo2 m = {0};
  fill_info(&m.arena, &m.uordblks, &m.fordblks);
  return m;
}

EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo m = {0};
  m.arena = (int)m2.arena;
  m.uordblks = (int)m2.uordblks;
  m.fordblks = (int)m2.fordblks;
  return m;
}

EXPORT int malloc_info(int options, FILE* fp) {
  if (options != 0 || !fp) {
    errno = EINVAL;
    return -1;
  }
  struct mallinfo2 m = mallinfo2();
  fprintf(fp, "<malloc version=\"tslab\"><total type=\"committed\" size=\"%zu\"/>"
              "<total type=\"live\" size=\"%zu\"/></malloc>\n", m.arena, m.uordblks);
  return 0;
}

/* glibc exports its allocator under these names as well. */
void* __libc_malloc(size_t size);
void __libc_free(void* p);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
EXPORT void* __libc_malloc(size_t size) { return malloc(size); }
EXPORT void __libc_free(void* p) { free_fast(p); }
EXPORT void* __libc_calloc(size_t count, size_t size) { return calloc(count, size); }
EXPORT void* __libc_realloc(void* p, size_t size) { return dropin_realloc(p, size); }
EXPORT void* __libc_memalign(size_t alignment, size_t size) { return memalign(alignment, size); }
EXPORT void* __libc_valloc(size_t size) { return valloc(size); }
EXPORT void* __libc_pvalloc(size_t size) { return pvalloc(size); }

/* ---- C++ ---- */

#define NOTHROW_T const void*   /* const std::nothrow_t& */
#define ALIGN_T size_t          /* std::align_val_t */

typedef void (*new_handler_t)(void);
/* std::get_new_handler() and std::__throw_bad_alloc(), when the program is
 * linked with the C++ runtime. */
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* A function of the C++ runtime (libstdc++) by its mangled name, when the
 * process has loaded it, or NULL. Weak references are bound when this
 * library loads: a C program that loads its C++ runtime later, with a
 * plugin (dlopen, often with RTLD_LOCAL, so the runtime is not in the
 * global scope either), leaves them null. Asked of the runtime's own
 * handle, a name gives the runtime's definition, not this library's. Only
 * operator new's failure looks here. */
static void* cxx_runtime(const char* name) {
  void* rt = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (!rt) return NULL;
  void* f = dlsym(rt, name);
  dlclose(rt); /* the NOLOAD handle's reference only: the runtime stays */
  return f;
}

/* The runtime's function: bound at load when the program linked the
 * runtime (`linked`, a weak reference), else looked up by name. */
static void* cxx_function(void* linked, const char* name) {
  return linked ? linked : cxx_runtime(name);
}

static new_handler_t current_new_handler(void) {
  new_handler_t (*get)(void) = (new_handler_t(*)(void))cxx_function((void*)_ZSt15get_new_handlerv,
                                                                     "_ZSt15get_new_handlerv");
  return get ? get() : NULL;
}

/* A throwing operator new's failure: call the new-handler until it gives up
 * (or throws), then throw std::bad_alloc. Without a C++ runtime there is
 * nothing to throw with: NULL (no C++ caller can exist then). */
static void* new_failed(size_t size, size_t alignment) {
  for (;;) {
    new_handler_t h = current_new_handler();
    if (!h) {
      void (*raise)(void) = (void (*)(void))cxx_function((void*)_ZSt17__throw_bad_allocv,
                                                         "_ZSt17__throw_bad_allocv");
      if (raise) raise();
      return NULL;
    }
    h();
    void* p = dropin_alloc_slow(size, alignment, false);
    if (p) return p;
  }
}

/* The nothrow forms' failure. The standard's nothrow form calls the
 * throwing one (the new-handler loop, then std::bad_alloc) inside a try
 * block and returns NULL for what it throws; a catch needs the C++ runtime,
 * and its own nothrow form (`name`) is exactly that try block around the
 * throwing form, which is this library's. With no new-handler there is
 * nothing to call: NULL at once. */
static void* new_nothrow_failed(size_t size, size_t align, const char* name, NOTHROW_T t) {
  if (!current_new_handler()) return NULL;
  void* f = cxx_runtime(name);
  if (!f) return NULL; /* a runtime linked statically: nothing to catch with */
  if (align) return ((void* (*)(size_t, size_t, NOTHROW_T))f)(size, align, t);
  return ((void* (*)(size_t, NOTHROW_T))f)(size, t);
}

/* Everything of operator new past the core's fast path: the drop-in's slow
 * path, then the failure. One call out of line, so that the fast path keeps
 * only the size across the core's call (with both steps inline it saved two
 * registers and a frame on every call). `nothrow`: the nothrow form's name
 * and argument, NULL for a throwing form; `align`: the alignment asked (0
 * for the forms without one). */
static __attribute__((noinline)) void* new_slow(size_t size, size_t align, const char* nothrow, NOTHROW_T t) {
  size_t alignment = alignment_asked(align);
  void* p = dropin_alloc_slow(size, alignment, false);
  if (dropin_likely(p != NULL)) return p;
  return nothrow ? new_nothrow_failed(size, align, nothrow, t) : new_failed(size, alignment);
}

static inline void* new_fast(size_t size, size_t align, const char* nothrow, NOTHROW_T t) {
  void* p = alloc_core(size, alignment_asked(align));
  return dropin_likely(p != NULL) ? p : new_slow(size, align, nothrow, t);
}

/* new, new[] and their nothrow and aligned forms */
void* _Znwm(size_t n);
void* _Znam(size_t n);
void* _ZnwmRKSt9nothrow_t(size_t n, NOTHROW_T t);
void* _ZnamRKSt9nothrow_t(size_t n, NOTHROW_T t);
void* _ZnwmSt11align_val_t(size_t n, ALIGN_T al);
void* _ZnamSt11align_val_t(size_t n, ALIGN_T al);
void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, ALIGN_T al, NOTHROW_T t);
void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, ALIGN_T al, NOTHROW_T t);
EXPORT void* _Znwm(size_t n) { return new_fast(n, 0, NULL, NULL); }
EXPORT void* _Znam(size_t n) { return new_fast(n, 0, NULL, NULL); }
EXPORT void* _ZnwmRKSt9nothrow_t(size_t n, NOTHROW_T t) { return new_fast(n, 0, "_ZnwmRKSt9nothrow_t", t); }
EXPORT void* _ZnamRKSt9nothrow_t(size_t n, NOTHROW_T t) { return new_fast(n, 0, "_ZnamRKSt9nothrow_t", t); }
EXPORT void* _ZnwmSt11align_val_t(size_t n, ALIGN_T al) { return new_fast(n, al, NULL, NULL); }
EXPORT void* _ZnamSt11align_val_t(size_t n, ALIGN_T al) { return new_fast(n, al, NULL, NULL); }
EXPORT void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, ALIGN_T al, NOTHROW_T t) {
  return new_fast(n, al, "_ZnwmSt11align_val_tRKSt9nothrow_t", t);
}
EXPORT void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, ALIGN_T al, NOTHROW_T t) {
  return new_fast(n, al, "_ZnamSt11align_val_tRKSt9nothrow_t", t);
}

/* delete, delete[] and their sized, aligned and nothrow forms: the size and
 * alignment are not needed to free. */
void _ZdlPv(void* p);
void _ZdaPv(void* p);
void _ZdlPvm(void* p, size_t n);
void _ZdaPvm(void* p, size_t n);
void _ZdlPvSt11align_val_t(void* p, ALIGN_T al);
void _ZdaPvSt11align_val_t(void* p, ALIGN_T al);
void _ZdlPvmSt11align_val_t(void* p, size_t n, ALIGN_T al);
void _ZdaPvmSt11align_val_t(void* p, size_t n, ALIGN_T al);
void _ZdlPvRKSt9nothrow_t(void* p, NOTHROW_T t);
void _ZdaPvRKSt9nothrow_t(void* p, NOTHROW_T t);
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, ALIGN_T al, NOTHROW_T t);
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, ALIGN_T al, NOTHROW_T t);
EXPORT void _ZdlPv(void* p) { free_fast(p); }
EXPORT void _ZdaPv(void* p) { free_fast(p); }
EXPORT void _ZdlPvm(void* p, size_t n) { (void)n; free_fast(p); }
EXPORT void _ZdaPvm(void* p, size_t n) { (void)n; free_fast(p); }
EXPORT void _ZdlPvSt11align_val_t(void* p, ALIGN_T al) { (void)al; free_fast(p); }
EXPORT void _ZdaPvSt11align_val_t(void* p, ALIGN_T al) { (void)al; free_fast(p); }
EXPORT void _ZdlPvmSt11align_val_t(void* p, size_t n, ALIGN_T al) { (void)n; (void)al; free_fast(p); }
EXPORT void _ZdaPvmSt11align_val_t(void* p, size_t n, ALIGN_T al) { (void)n; (void)al; free_fast(p); }
EXPORT void _ZdlPvRKSt9nothrow_t(void* p, NOTHROW_T t) { (void)t; free_fast(p); }
EXPORT void _ZdaPvRKSt9nothrow_t(void* p, NOTHROW_T t) { (void)t; free_fast(p); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, ALIGN_T al, NOTHROW_T t) {
  (void)al;
  (void)t;
  free_fast(p);
}
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, ALIGN_T al, NOTHROW_T t) {
  (void)al;
  (void)t;
  free_fast(p);
}
