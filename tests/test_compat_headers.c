/* Each compatibility header compiles on its own (see the probe files, which
 * include exactly one header first, under -std=c11 -pedantic-errors), and the
 * seed names link against the library. */
#include "epoch_domain.h"
#include "slab_alloc.h"
#include "slab_stats.h"
#include "test_util.h"

size_t compat_header_slab_alloc_probe(void);
size_t compat_header_epoch_domain_probe(void);
size_t compat_header_slab_stats_probe(void);

int main(void) {
  CHECK_EQ_U(compat_header_slab_alloc_probe(), sizeof(PerfCounters) + 1 + sizeof(EpochId));
  CHECK_EQ_U(compat_header_epoch_domain_probe(), sizeof(epoch_domain_t) + 1);
  CHECK_EQ_U(compat_header_slab_stats_probe(),
             sizeof(SlabGlobalStats) + sizeof(SlabClassStats) + EPOCH_CLOSING + SLAB_STATS_VERSION);
  /* Layout promises of the seed: handles and epoch IDs have fixed widths. */
  CHECK_EQ_U(sizeof(SlabHandle), 8);
  CHECK_EQ_U(sizeof(EpochId), 4);
  CHECK_EQ_U(sizeof(PerfCounters), 8 * sizeof(uint64_t));
  TEST_DONE();
}
