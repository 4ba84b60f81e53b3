/* Instances: configuration, creation, destruction and the consistency
 * checker that walks all metadata. */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "internal.h"

static _Atomic uint64_t next_id = 1;

TSLAB_API void tslab_config_init(tslab_config_t* c) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->epoch_ring_size = 16;
  c->reserve_bytes = (size_t)64 << 30;
  c->pool_resident_max = (size_t)1 << 20;
  c->thread_reserve_max = (size_t)256 << 10;
  c->pool_decay_max = (size_t)8 << 20;
  c->pool_decay_ms = 1000;
  c->block_budget = (size_t)1 << 20;
  c->max_alloc_size = (size_t)1 << 30;
  c->release_policy = TSLAB_RELEASE_ON_CLOSE;
  c->advance_policy = TSLAB_ADVANCE_SKIP_OPEN;
}

static bool config_valid(const tslab_config_t* c) {
  uint32_t n = c->epoch_ring_size;
  if (n < 2 || n > TSLAB_RING_MAX || (n & (n - 1))) return false;
  /* Handles hold a 36-bit granule address: the reservation must lie below
   * 2^50, which every Linux user address does; its size is checked here. */
  if (c->reserve_bytes < ((size_t)4 << 20) || c->reserve_bytes > ((size_t)1 << 40)) return false;
  if (c->max_alloc_size == 0 || c->max_alloc_size > c->reserve_bytes / 2) return false;
  if (c->pool_decay_ms > 3600u * 1000u) return false;
  if (c->advance_policy != TSLAB_ADVANCE_SKIP_OPEN && c->advance_policy != TSLAB_ADVANCE_NEXT_SLOT) return false;
  return c->release_policy == TSLAB_RELEASE_ON_CLOSE || c->release_policy == TSLAB_RELEASE_EAGER ||
         c->release_policy == TSLAB_RELEASE_POOLED;
}

static void unmap_all(tslab_t* a) {
  tslab_tcache_destroy_all(a);
  if (a->ring) tslab_os_unmap(a->ring, a->ring_bytes);
  tslab_os_unmap(a->meta, a->meta_reserve);
  tslab_os_unmap((void*)a->map, a->map_bytes);
  tslab_os_unmap((void*)a->gen_base, a->ngranules * sizeof(uint16_t));
  tslab_os_unmap(a->mapping, a->mapping_bytes);
  tslab_os_unmap(a, sizeof *a);
}

TSLAB_API tslab_t* tslab_create(const tslab_config_t* config) {
  tslab_global_init();
  tslab_config_t c;
  if (config)
    c = *config;
  else
    tslab_config_init(&c);
  if (!config_valid(&c)) {
    tslab_set_error(TSLAB_ERR_INVALID_ARGUMENT);
    return NULL;
  }
  c.reserve_bytes &= ~(TSLAB_GRANULE - 1);
  tslab_t* a = (tslab_t*)tslab_os_map(sizeof *a);
  if (!a) {
    tslab_set_error(TSLAB_ERR_OUT_OF_MEMORY);
    return NULL;
  }
  a->config = c;
  a->id = atomic_fetch_add(&next_id, 1);
  a->fast_max = c.max_alloc_size < TSLAB_SMALL_MAX ? c.max_alloc_size : TSLAB_SMALL_MAX;
  a->ring_size = c.epoch_ring_size;
  a->ring_mask = c.epoch_ring_size - 1;
  a->ring_shift = (uint32_t)__builtin_ctz(c.epoch_ring_size);
  for (uint32_t i = 0; i < TSLAB_CLASS_INDEX_ENTRIES; i++)
    a->bin_of_size[i] = (uint16_t)tslab_bin_index(a, 0, tslab_class_index[i]);
  /* reserve_bytes is what the instance asks for; where the system grants
   * less address space (a ulimit -v, a sandbox, a tool), it takes the
   * largest half, quarter, ... it can get, down to 1/64 or 1 GiB, and
   * max_alloc_size shrinks with it to half of the reservation. */
  size_t want = c.reserve_bytes, floor = want / 64 > ((size_t)1 << 30) ? want / 64 : ((size_t)1 << 30);
  for (;;) {
    a->reserve = want;
    a->base = (uint8_t*)tslab_os_reserve_aligned(&a->reserve, TSLAB_RESERVE_ALIGN, &a->mapping, &a->mapping_bytes);
    if (a->base || want / 2 < floor || want / 2 < ((size_t)4 << 20)) break;
    want /= 2;
  }
  if (a->base && a->config.max_alloc_size > a->reserve / 2) {
    a->config.max_alloc_size = a->reserve / 2;
    if (a->fast_max > a->config.max_alloc_size) a->fast_max = a->config.max_alloc_size;
  }
  a->ngranules = a->reserve >> TSLAB_GRANULE_SHIFT;
  a->map_bytes = a->ngranules * sizeof(a->map[0]);
  /* Descriptors are about 200 bytes per run, bitmaps at most about 400
   * bytes per 16 KiB block or slab. */
  a->meta_reserve = (a->ngranules * 1024 + TSLAB_COMMIT_STEP - 1) & ~(TSLAB_COMMIT_STEP - 1);
  a->meta = a->base ? (uint8_t*)tslab_os_reserve(a->meta_reserve) : NULL;
  a->map = a->meta ? (_Atomic(tslab_run_t*)*)tslab_os_map(a->map_bytes) : NULL;
  a->gen_base = a->map ? (_Atomic uint16_t*)tslab_os_map(a->ngranules * sizeof(uint16_t)) : NULL;
  bool ok = a->gen_base && tslab_grace_init(a) && tslab_heap_init(a) && tslab_epochs_init(a) &&
            pthread_mutex_init(&a->reg_mu, NULL) == 0;
  if (ok) {
    /* Handle generations start from a value of this instance's own, so a
     * handle of a destroyed instance whose range this one now occupies
     * matches only by chance (1 in 65536). */
    a->gen_seed = (uint16_t)tslab_os_random();
    strcpy(a->labels[TSLAB_LABELS_MAX].name, "(other)");
    ok = tslab_instance_register(a);
  }
  if (!ok) {
    unmap_all(a);
    tslab_set_error(TSLAB_ERR_OUT_OF_MEMORY);
    return NULL;
  }
  return a;
}

TSLAB_API void tslab_destroy(tslab_t* a) {
  if (!a) return;
  tslab_http_shutdown(a);
  tslab_tcache_forget_instance(a);
  pthread_mutex_destroy(&a->reg_mu);
  pthread_mutex_destroy(&a->label_mu);
  tslab_heap_destroy(a);
  tslab_grace_destroy(a);
  unmap_all(a);
}

/* ---- consistency checker ---- */

TSLAB_API size_t tslab_check(tslab_t* a, char* report, size_t cap) {
  if (report && cap) report[0] = 0;
  if (!a) return 1;
  size_t bad = tslab_heap_check(a, report, cap);
  bad += tslab_tcache_check(a, bad ? NULL : report, cap);
  /* Decay keeps runs for open eras only: a closed era's close released or
   * untagged its slot's (D1). */
  for (uint32_t slot = 0; slot < a->ring_size; slot++) {
    uint64_t st = atomic_load(&a->ring[slot].state);
    uint64_t tagged = atomic_load(&a->heap.decay_bytes[slot]);
    if (tagged && TSLAB_STATE_OF(st) != TSLAB_EPOCH_ACTIVE && TSLAB_STATE_OF(st) != TSLAB_EPOCH_CLOSING &&
        bad++ == 0 && report && cap)
      snprintf(report, cap, "ring slot %u (era %llu, not open) keeps %llu bytes of decay", slot,
               (unsigned long long)TSLAB_STATE_ERA(st), (unsigned long long)tagged);
  }
  /* Blocks are held by the caches (bumping, full) or by their era's
   * detached list; the heap must hold as many. */
  uint64_t blocks = 0;
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    for (uint32_t slot = 0; slot < a->ring_size; slot++) {
      blocks += tc->slots[slot].blk != NULL;
      for (tslab_run_t* b = tc->slots[slot].full; b; b = b->bin_next) blocks++;
    }
  }
  for (uint32_t slot = 0; slot < a->ring_size; slot++)
    for (tslab_run_t* r = a->slots[slot].detached; r; r = r->era_next)
      blocks += atomic_load(&r->kind) == TSLAB_RUN_BLOCK;
  /* Drained blocks are held by the caches' hot reserves; likewise. */
  uint64_t reserved = 0, reserved_runs = 0;
  for (tslab_tcache_t* tc = tslab_cache_first(a); tc; tc = tslab_cache_next(tc)) {
    reserved += atomic_load(&tc->hot) != NULL;
    for (tslab_run_t* b = atomic_load(&tc->spares); b; b = atomic_load(&b->spare_next)) reserved++;
  }
  pthread_mutex_lock(&a->heap.mu);
  uint64_t runs[TSLAB_CLASSES + 1] = {0}, spans = 0;
  for (size_t g = 0; g < a->heap.top;) {
    tslab_run_t* r = atomic_load(&a->map[g]);
    if (!r || r->start != a->base + (g << TSLAB_GRANULE_SHIFT)) break; /* reported by the heap check */
    int kind = atomic_load(&r->kind);
    if (kind == TSLAB_RUN_SLAB || kind == TSLAB_RUN_BLOCK) {
      bad += tslab_slab_check(a, r, bad ? NULL : report, cap);
      runs[kind == TSLAB_RUN_BLOCK ? TSLAB_CLASSES : r->cls]++;
    } else if (kind == TSLAB_RUN_LARGE) {
      spans++;
      /* One slot at its start (tslab_slot_index), its era's copies right. */
      if ((r->slot_bytes != 1 || r->recip != 0 || r->capacity != 1 || !tslab_run_era_copies_ok(a, r)) &&
          bad++ == 0 && report && cap)
        snprintf(report, cap, "span %p: its one slot or its era's copies are wrong", (void*)r->start);
    } else if (kind == TSLAB_RUN_RESERVED) {
      reserved_runs++;
    }
    g += r->granules;
  }
  if (reserved != reserved_runs && bad++ == 0 && report && cap)
    snprintf(report, cap, "the reserves hold %llu blocks, the heap %llu reserved runs", (unsigned long long)reserved,
             (unsigned long long)reserved_runs);
  for (uint32_t c = 0; c <= TSLAB_CLASSES; c++) {
    uint64_t counted = c < TSLAB_CLASSES ? tslab_class_slabs(a, c) : blocks;
    if (counted != runs[c] && bad++ == 0 && report && cap)
      snprintf(report, cap, "%s %u: counters say %llu runs, the heap holds %llu", c == TSLAB_CLASSES ? "blocks" : "class",
               c, (unsigned long long)counted, (unsigned long long)runs[c]);
  }
  uint64_t large = atomic_load(&a->large_allocs) - atomic_load(&a->large_frees);
  if (large != spans && bad++ == 0 && report && cap)
    snprintf(report, cap, "span counters say %llu, the heap holds %llu", (unsigned long long)large,
             (unsigned long long)spans);
  pthread_mutex_unlock(&a->heap.mu);
  return bad;
}
