/* Scopes: which epoch the calling thread's malloc allocates in.
 *
 * Each thread keeps a small stack of scope epochs in initial-exec TLS and
 * caches the epoch malloc uses (the innermost scope's, else the process
 * epoch) in one word, so the fast path pays a single TLS load for routing.
 * Entering and leaving a scope only rewrites that word: no lock, no call
 * into the core beyond checking the epoch on entry. Closing an epoch is the
 * program's business (tslab_epoch_close, or a domain's last exit): leaving a
 * scope never closes anything, so a scope may also wrap an epoch that
 * outlives it.
 *
 * Domains route malloc through tslab_malloc_domain_enter/exit, which pair
 * the domain's own scope (its stack, its epoch reference, its close on the
 * last exit) with a malloc scope on the same epoch. */
#include "dropin.h"

__thread dropin_thread_t dropin_tls __attribute__((tls_model("initial-exec")));

tslab_epoch_t dropin_thread_epoch(void) {
  const dropin_thread_t* t = &dropin_tls;
  return t->depth ? t->scopes[t->depth - 1] : dropin_process_epoch();
}

void dropin_thread_refresh(void) {
  dropin_thread_t* t = &dropin_tls;
  if (t->guard == 0) t->epoch = dropin_heap() ? dropin_thread_epoch() : 0;
}

static void push(dropin_thread_t* t, tslab_epoch_t e, bool domain) {
  uint64_t bit = 1ull << t->depth;
  t->domain_scopes = domain ? t->domain_scopes | bit : t->domain_scopes & ~bit;
  t->scopes[t->depth++] = e;
  dropin_thread_refresh();
}

static void pop(dropin_thread_t* t) {
  t->scopes[--t->depth] = 0;
  dropin_thread_refresh();
}

/* Whether the innermost scope is on e and was entered the way it is being
 * left (a domain's through the domain calls, a plain one through the scope
 * calls): leaving a domain's malloc scope alone would leave the domain
 * entered with no way to exit it through the drop-in (found by review). */
static int innermost(const dropin_thread_t* t, tslab_epoch_t e, bool domain) {
  if (t->depth == 0) return TSLAB_ERR_NOT_ENTERED;
  if (t->scopes[t->depth - 1] != e || ((t->domain_scopes >> (t->depth - 1)) & 1) != domain)
    return TSLAB_ERR_NOT_INNERMOST;
  return TSLAB_OK;
}

tslab_epoch_t tslab_malloc_epoch(void) {
  return dropin_ensure() ? dropin_thread_epoch() : 0;
}

int tslab_malloc_scope_enter(tslab_epoch_t e) {
  if (!dropin_ensure()) return TSLAB_ERR_OUT_OF_MEMORY;
  dropin_thread_t* t = &dropin_tls;
  if (t->depth == TSLAB_MALLOC_SCOPE_MAX) return TSLAB_ERR_LIMIT;
  /* An epoch that rejects allocations now would make every malloc of the
   * scope fall back: refusing the entry reports it where it arises. */
  int st = tslab_epoch_status(dropin_heap(), e);
  if (st != TSLAB_OK) return st;
  push(t, e, false);
  return TSLAB_OK;
}

int tslab_malloc_scope_exit(tslab_epoch_t e) {
  dropin_thread_t* t = &dropin_tls;
  int st = innermost(t, e, false);
  if (st != TSLAB_OK) return st;
  pop(t);
  return TSLAB_OK;
}

int tslab_malloc_domain_enter(tslab_domain_t* d) {
  if (!dropin_ensure()) return TSLAB_ERR_OUT_OF_MEMORY;
  if (!d || tslab_domain_allocator(d) != dropin_heap()) return TSLAB_ERR_INVALID_ARGUMENT;
  /* Checked before the domain is entered: undoing an enter is an exit, and
   * an exit may close the domain's epoch. */
  dropin_thread_t* t = &dropin_tls;
  if (t->depth == TSLAB_MALLOC_SCOPE_MAX) return TSLAB_ERR_LIMIT;
  int st = tslab_domain_enter(d);
  if (st != TSLAB_OK) return st;
  push(t, tslab_domain_epoch(d), true);
  return TSLAB_OK;
}

int tslab_malloc_domain_exit(tslab_domain_t* d) {
  if (!d) return TSLAB_ERR_INVALID_ARGUMENT;
  dropin_thread_t* t = &dropin_tls;
  int st = innermost(t, tslab_domain_epoch(d), true);
  if (st != TSLAB_OK) return st;
  st = tslab_domain_exit(d);
  if (st != TSLAB_OK) return st;
  pop(t);
  return TSLAB_OK;
}
