/* A program whose own library defines functions named like the seed's
 * compatibility API (dropin_namesakes.c) calls them with the drop-in
 * preloaded or linked first: each call must reach the program's library,
 * not the core's function of the same name, which the drop-in does not
 * export (src/malloc/exports.map; the compatibility names are
 * libtslab-compat's). */
#include "test_util.h"
#include "dropin_sym.h"

uint64_t now_ns(void);
int epoch_close(int id);
int slab_free(const char* name);

int main(void) {
  REQUIRE(SYM(tslab_malloc_instance)() != NULL);
  /* The program allocates too (linked, this keeps the drop-in a dependency). */
  char* p = malloc(16);
  REQUIRE(p != NULL);
  free(p);
  CHECK(now_ns() == 42);
  CHECK(epoch_close(6) == 7);
  CHECK(slab_free("x") == 'x');
  /* Nor can a lookup by name find the core's versions. */
  static const char* const compat[] = {"slab_allocator_create", "alloc_obj_epoch", "epoch_advance",
                                       "epoch_domain_create", "slab_stats_global", "read_rss_bytes_linux"};
  for (size_t i = 0; i < sizeof compat / sizeof compat[0]; i++) CHECK(dlsym(RTLD_DEFAULT, compat[i]) == NULL);
  TEST_DONE();
}
