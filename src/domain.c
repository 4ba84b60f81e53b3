/* Epoch domains: thread-confined scopes bound to one era.
 *
 * A domain stores its era, never a ring slot, so every check the epoch layer
 * makes on eras (closed, stale, unknown) protects domains too: a domain whose
 * era was closed or recycled behind its back cannot allocate, and the epoch
 * layer says why. The per-thread stack holds plain pointers; a domain can
 * only sit on its creator's stack (enter checks the owner) and cannot be
 * destroyed while it has entered scopes, so the stack never names a freed
 * domain.
 *
 * The domain object is small, rarely created metadata, so it comes from the
 * C library's malloc rather than from the instance's slabs: it must not
 * belong to any epoch (it outlives the era it owns), and keeping it out of
 * the instance keeps the instance's statistics about user data only. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"
#include "tslab.h"

struct tslab_domain {
  tslab_t* a;
  tslab_epoch_t era;
  pthread_t owner;
  uint32_t scopes;  /* entered scopes of this domain on the owner's stack */
  bool owns_era;    /* created (closes its era) rather than wrapped */
};

static _Thread_local tslab_domain_t* domain_stack[TSLAB_DOMAIN_DEPTH_MAX];
static _Thread_local uint32_t domain_depth;

static int fail(int status) {
  tslab_set_error(status);
  return status;
}

static void* fail_null(int status) {
  tslab_set_error(status);
  return NULL;
}

/* The common guard of every call that changes a domain. */
static int check_owner(const tslab_domain_t* d) {
  if (d == NULL) return TSLAB_ERR_INVALID_ARGUMENT;
  if (!pthread_equal(d->owner, pthread_self())) return TSLAB_ERR_WRONG_THREAD;
  return TSLAB_OK;
}

static tslab_domain_t* domain_new(tslab_t* a, tslab_epoch_t era, bool owns_era) {
  tslab_domain_t* d = malloc(sizeof *d);
  if (d == NULL) return NULL;
  d->a = a;
  d->era = era;
  d->owner = pthread_self();
  d->scopes = 0;
  d->owns_era = owns_era;
  return d;
}

tslab_domain_t* tslab_domain_create(tslab_t* a, const char* label) {
  if (a == NULL) return fail_null(TSLAB_ERR_INVALID_ARGUMENT);
  /* Allocate first: failing after the advance would leave an era open that
   * nobody owns. */
  tslab_domain_t* d = domain_new(a, 0, true);
  if (d == NULL) return fail_null(TSLAB_ERR_OUT_OF_MEMORY);
  d->era = tslab_epoch_advance(a);
  if (label != NULL) {
    int st = tslab_epoch_set_label(a, d->era, label);
    if (st != TSLAB_OK) {
      (void)tslab_epoch_close(a, d->era);
      free(d);
      return fail_null(st);
    }
  }
  return d;
}

tslab_domain_t* tslab_domain_wrap(tslab_t* a, tslab_epoch_t e) {
  if (a == NULL) return fail_null(TSLAB_ERR_INVALID_ARGUMENT);
  int st = tslab_epoch_status(a, e);
  if (st != TSLAB_OK) return fail_null(st);
  tslab_domain_t* d = domain_new(a, e, false);
  if (d == NULL) return fail_null(TSLAB_ERR_OUT_OF_MEMORY);
  return d;
}

int tslab_domain_enter(tslab_domain_t* d) {
  int st = check_owner(d);
  if (st != TSLAB_OK) return fail(st);
  if (domain_depth == TSLAB_DOMAIN_DEPTH_MAX) return fail(TSLAB_ERR_LIMIT);
  /* A scope on an era that rejects allocations could only fail later, far
   * from the cause; refusing the enter reports the reason where it arises. */
  st = tslab_epoch_status(d->a, d->era);
  if (st == TSLAB_OK) st = tslab_epoch_ref(d->a, d->era);
  if (st != TSLAB_OK) return fail(st);
  domain_stack[domain_depth++] = d;
  d->scopes++;
  return TSLAB_OK;
}

int tslab_domain_exit(tslab_domain_t* d) {
  int st = check_owner(d);
  if (st != TSLAB_OK) return fail(st);
  if (d->scopes == 0) return fail(TSLAB_ERR_NOT_ENTERED);
  /* An empty stack with scopes counted means they were entered by an exited
   * thread whose id this one reuses: they are not on this stack. */
  if (domain_depth == 0 || domain_stack[domain_depth - 1] != d)
    return fail(TSLAB_ERR_NOT_INNERMOST);
  domain_stack[--domain_depth] = NULL;
  d->scopes--;
  /* When the era went stale meanwhile its refcount went with it, and a
   * recycled era needs no close: both calls then have nothing to undo. */
  (void)tslab_epoch_unref(d->a, d->era);
  if (d->scopes == 0 && d->owns_era) (void)tslab_epoch_close(d->a, d->era);
  return TSLAB_OK;
}

tslab_domain_t* tslab_domain_current(void) {
  return domain_depth > 0 ? domain_stack[domain_depth - 1] : NULL;
}

tslab_epoch_t tslab_domain_epoch(const tslab_domain_t* d) {
  return d != NULL ? d->era : 0;
}

tslab_t* tslab_domain_allocator(const tslab_domain_t* d) {
  return d != NULL ? d->a : NULL;
}

void* tslab_domain_alloc(size_t size) {
  tslab_domain_t* d = tslab_domain_current();
  if (d == NULL) return fail_null(TSLAB_ERR_NO_DOMAIN);
  return tslab_alloc(d->a, size, d->era);
}

int tslab_domain_force_close(tslab_domain_t* d) {
  int st = check_owner(d);
  if (st != TSLAB_OK) return fail(st);
  return tslab_epoch_close(d->a, d->era);
}

int tslab_domain_destroy(tslab_domain_t* d) {
  int st = check_owner(d);
  if (st != TSLAB_OK) return fail(st);
  if (d->scopes > 0) return fail(TSLAB_ERR_DOMAIN_ENTERED);
  /* A created domain that was never entered (or is destroyed early) must
   * not leave its era open forever; closing a closed era is a no-op. */
  if (d->owns_era) (void)tslab_epoch_close(d->a, d->era);
  free(d);
  return TSLAB_OK;
}
