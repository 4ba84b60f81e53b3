/* A user program linked first with an installed libtslab-malloc: plain
 * malloc comes from the drop-in, and a scope routes it to an epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <tslab_malloc.h>

int main(void) {
  tslab_t* a = tslab_malloc_instance();
  void* p = malloc(100);
  int ok = a && p && tslab_usable_size(a, p) >= 100;
  tslab_epoch_t e = tslab_epoch_advance(a);
  ok = ok && tslab_malloc_scope_enter(e) == TSLAB_OK;
  void* q = malloc(50);
  ok = ok && tslab_epoch_of(a, q) == e && tslab_malloc_scope_exit(e) == TSLAB_OK;
  free(q);
  free(p);
  puts(ok ? "malloc consumer ok" : "malloc consumer failed");
  return ok ? 0 : 1;
}
