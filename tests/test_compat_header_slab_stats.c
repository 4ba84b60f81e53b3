/* slab_stats.h must compile as the first and only include of a translation unit. */
#include "slab_stats.h"

size_t compat_header_slab_stats_probe(void);

size_t compat_header_slab_stats_probe(void) {
  SlabGlobalStats g = {.version = SLAB_STATS_VERSION};
  SlabEpochStats e = {.state = EPOCH_CLOSING};
  return sizeof g + sizeof(SlabClassStats) + (size_t)e.state + g.version;
}
