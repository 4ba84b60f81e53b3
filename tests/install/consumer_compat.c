/* A program written for the seed's API, built against the installed
 * compatibility headers and libtslab-compat. */
#include <slab_alloc.h>
#include <stdio.h>

int main(void) {
  SlabAllocator* a = slab_allocator_create();
  SlabHandle h = 0;
  EpochId e = a ? epoch_current(a) : 0;
  void* p = a ? alloc_obj_epoch(a, 100, e, &h) : NULL;
  int ok = p != NULL && h != 0 && free_obj(a, h) && !free_obj(a, h);
  slab_allocator_free(a);
  puts(ok ? "compat consumer ok" : "compat consumer failed");
  return ok ? 0 : 1;
}
