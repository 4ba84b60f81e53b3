/* A user program built against an installed tslab. */
#include <stdio.h>
#include <tslab.h>

int main(void) {
  tslab_t* a = tslab_create(NULL);
  if (!a) return 1;
  void* p = tslab_alloc(a, 100, tslab_epoch_current(a));
  int ok = p && tslab_free(a, p) && !tslab_free(a, p);
  tslab_destroy(a);
  puts(ok ? "consumer ok" : "consumer failed");
  return ok ? 0 : 1;
}
