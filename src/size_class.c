/* The size-class table: every 8 bytes up to 64, then eight classes per power
 * of two up to 32 KiB, so that a request of 64 bytes or more wastes less than
 * 12.5% to rounding; and from 256 B to 16 KiB one more class a sixteenth
 * above each power of two (272, 544, 1088, ..., 17408). Programs ask for a
 * power of two plus a small header all the time (sqlite3's 1,032-byte page
 * buffers, 4,104 and 8,304 bytes elsewhere): without that class such a
 * request takes the next eighth and wastes 11% of itself. Each class gets
 * the smallest slab that holds at least 32 objects (8 above 4 KiB), up to
 * 16 granules, and loses at most an eighth of itself to its tail: a slab
 * with few objects empties its bin's set-aside word after a few allocations
 * and sends the bin to its refill path (mixed sizes spent a quarter of their
 * allocations there with eight objects per slab), while small slabs keep
 * one long-lived object from pinning much. A request finds its class in a
 * table with an entry per 8 bytes (tslab_class_of), every class size being
 * a multiple of 8. */
#include "internal.h"

TSLAB_INTERNAL tslab_class_info_t tslab_classes[TSLAB_CLASSES];
TSLAB_INTERNAL uint8_t tslab_class_index[TSLAB_CLASS_INDEX_ENTRIES];

/* The class sizes in order. */
static void class_sizes(uint32_t* size) {
  uint32_t n = 0;
  for (uint32_t c = 1; c <= 8; c++) size[n++] = c * 8;
  for (uint32_t k = 6; k < 15; k++) {
    if (k >= 8) size[n++] = (1u << k) + (1u << (k - 4));
    for (uint32_t sub = 1; sub <= 8; sub++) size[n++] = (1u << k) + sub * (1u << (k - 3));
  }
  TSLAB_ASSERT(n == TSLAB_CLASSES);
}

/* Entry i of tslab_class_index: the smallest class of at least 8i bytes. */
static void class_index_init(void) {
  uint32_t c = 0;
  for (uint32_t i = 0; i < TSLAB_CLASS_INDEX_ENTRIES; i++) {
    while (tslab_classes[c].size < 8 * i) c++;
    tslab_class_index[i] = (uint8_t)c;
  }
}

TSLAB_INTERNAL void tslab_classes_init(void) {
  uint32_t size[TSLAB_CLASSES];
  class_sizes(size);
  for (uint32_t c = 0; c < TSLAB_CLASSES; c++) {
    tslab_class_info_t* ci = &tslab_classes[c];
    ci->size = size[c];
    uint32_t g = 1;
    for (; g < TSLAB_SLAB_MAX_GRANULES; g *= 2) {
      size_t bytes = (size_t)g << TSLAB_GRANULE_SHIFT;
      size_t n = bytes / ci->size;
      size_t min_objects = ci->size > 4096 ? 8 : 32;
      if (n >= min_objects && (bytes - n * ci->size) * 8 <= bytes) break;
    }
    size_t bytes = (size_t)g << TSLAB_GRANULE_SHIFT;
    size_t n = bytes / ci->size;
    /* At most TSLAB_MAX_SLOTS slots (the 8-byte class fills one granule
     * exactly at that count); a capped slab's tail would hold no slot, and
     * tslab_slot_index turns pointers into it away by the run's slot_bytes. */
    if (n > TSLAB_MAX_SLOTS) n = TSLAB_MAX_SLOTS;
    ci->granules = g;
    ci->capacity = (uint32_t)n;
    ci->words = (uint32_t)((n + 63) / 64);
    ci->recip = ((1ull << 48) + ci->size - 1) / ci->size;
  }
  class_index_init();
}

TSLAB_API size_t tslab_small_max(void) { return TSLAB_SMALL_MAX; }
