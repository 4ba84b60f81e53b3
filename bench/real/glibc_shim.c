/* Loaded with LD_PRELOAD, routes the malloc names to the C library's own
 * allocator under its __libc_ names. It is how glibc malloc is "loaded the
 * same way" as the other allocators under a program that links another
 * allocator itself (Debian's redis-server links jemalloc, whose malloc would
 * otherwise serve the glibc run). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

void* __libc_malloc(size_t n);
void __libc_free(void* p);
void* __libc_calloc(size_t c, size_t n);
void* __libc_realloc(void* p, size_t n);
void* __libc_memalign(size_t al, size_t n);

void* malloc(size_t n) { return __libc_malloc(n); }
void free(void* p) { __libc_free(p); }
void* calloc(size_t c, size_t n) { return __libc_calloc(c, n); }
void* realloc(void* p, size_t n) { return __libc_realloc(p, n); }
void* memalign(size_t al, size_t n) { return __libc_memalign(al, n); }
void* aligned_alloc(size_t al, size_t n) { return __libc_memalign(al, n); }
int posix_memalign(void** out, size_t al, size_t n) {
  void* p = __libc_memalign(al, n);
  if (!p) return 12; /* ENOMEM */
  *out = p;
  return 0;
}

/* glibc exports no __libc_ name for it: its own definition, looked up once. */
size_t malloc_usable_size(void* p) {
  static size_t (*libc_usable)(void*);
  if (!libc_usable) {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    libc_usable = libc ? (size_t(*)(void*))dlsym(libc, "malloc_usable_size") : NULL;
  }
  return p && libc_usable ? libc_usable(p) : 0;
}
