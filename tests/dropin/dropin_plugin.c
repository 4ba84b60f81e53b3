/* A library loaded and unloaded with dlopen/dlclose by test_dropin_dlopen:
 * it allocates in its constructor, frees in its destructor, has a
 * thread-local variable (dynamic TLS, which the C library allocates with
 * malloc on first use), and hands out blocks that outlive it. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

static char* table;
static __thread char* per_thread;

__attribute__((constructor)) static void plugin_init(void) {
  table = malloc(4096);
  if (table) memset(table, 'p', 4096);
}

__attribute__((destructor)) static void plugin_fini(void) {
  free(table);
}

char* plugin_make(size_t n);
char* plugin_make(size_t n) {
  if (!per_thread) per_thread = strdup("thread");
  char* s = malloc(n + 1);
  if (!s || !table || !per_thread) return NULL;
  memcpy(s, table, n < 4096 ? n : 4096);
  s[n < 4096 ? n : 4096] = '\0';
  return s;
}
