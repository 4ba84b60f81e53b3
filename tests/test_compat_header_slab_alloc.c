/* slab_alloc.h must compile as the first and only include of a translation unit. */
#include "slab_alloc.h"

size_t compat_header_slab_alloc_probe(void);

size_t compat_header_slab_alloc_probe(void) {
  PerfCounters pc = {0};
  SlabHandle h = (uint64_t)1;
  bool ok = h != 0;
  return sizeof pc + (size_t)ok + sizeof(EpochId);
}
