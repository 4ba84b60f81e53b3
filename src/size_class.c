/* The size-class table: every 8 bytes up to 64, then eight classes per power
 * of two up to 32 KiB, so that a request of 64 bytes or more wastes less than
 * 12.5% to rounding. Each class gets the smallest slab that holds at least
 * 32 objects (8 above 4 KiB), up to 16 granules, and loses at most an eighth
 * of itself to its tail: a slab with few objects empties its bin's set-aside
 * word after a few allocations and sends the bin to its refill path (mixed
 * sizes spent a quarter of their allocations there with eight objects per
 * slab), while small slabs keep one long-lived object from pinning much. */
#include "internal.h"

TSLAB_INTERNAL tslab_class_info_t tslab_classes[TSLAB_CLASSES];

static uint32_t class_size(uint32_t c) {
  if (c < 8) return (c + 1) * 8;
  uint32_t k = 6 + (c - 8) / 8, sub = (c - 8) % 8;
  return (1u << k) + (sub + 1) * (1u << (k - 3));
}

TSLAB_INTERNAL void tslab_classes_init(void) {
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    tslab_class_info_t* ci = &tslab_classes[c];
    ci->size = class_size(c);
    uint32_t g = 1;
    for (; g < TSLAB_SLAB_MAX_GRANULES; g *= 2) {
      size_t bytes = (size_t)g << TSLAB_GRANULE_SHIFT;
      size_t n = bytes / ci->size;
      size_t min_objects = ci->size > 4096 ? 8 : 32;
      if (n >= min_objects && (bytes - n * ci->size) * 8 <= bytes) break;
    }
    size_t bytes = (size_t)g << TSLAB_GRANULE_SHIFT;
    size_t n = bytes / ci->size;
    if (n > TSLAB_MAX_SLOTS) n = TSLAB_MAX_SLOTS;
    ci->granules = g;
    ci->capacity = (uint32_t)n;
    ci->words = (uint32_t)((n + 63) / 64);
    ci->recip = (uint32_t)(((1ull << 32) + ci->size - 1) / ci->size);
  }
}

TSLAB_API size_t tslab_small_max(void) { return TSLAB_SMALL_MAX; }
