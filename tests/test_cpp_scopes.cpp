// Instances and scopes (include/tslab.hpp): an instance is owned once and
// moves; an epoch scope ends its epoch when it ends, by close or by
// free-all, once; a domain scope enters a domain for its lifetime and ends
// the epoch it opened, never a wrapped one; failures carry the C status.
#include <memory_resource>
#include <vector>

#include "tslab.hpp"  // first: tslab.h through it
#include "test_util.h"

namespace {

int state_of(tslab_t* a, tslab_epoch_t e) { return tslab_epoch_status(a, e); }

void instances() {
  tslab::instance a;
  REQUIRE(a);
  tslab_t* raw = a.get();
  tslab::instance b(std::move(a));
  CHECK(!a && b.get() == raw);
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  cfg.epoch_ring_size = 3;  // not a power of two
  tslab::instance bad(cfg);
  CHECK(!bad);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_ARGUMENT);
  cfg.epoch_ring_size = 4;
  tslab::instance c(cfg);
  REQUIRE(c);
  c = std::move(b);  // destroys c's first instance, takes b's
  CHECK(c.get() == raw && !b);
  void* p = tslab_alloc(c.get(), 64, tslab_epoch_current(c.get()));
  CHECK(p != nullptr && tslab_free(c.get(), p));
}

void epoch_scopes(tslab_t* a) {
  tslab_epoch_t e;
  {
    tslab::epoch_scope scope(a);
    REQUIRE(scope);
    e = scope.epoch();
    CHECK(e == tslab_epoch_current(a));
    CHECK(scope.instance() == a);
    CHECK_EQ_U(state_of(a, e), TSLAB_OK);
  }
  CHECK_EQ_U(state_of(a, e), TSLAB_ERR_EPOCH_CLOSED);

  // Adopting an epoch; ending early; ending twice is harmless.
  tslab_epoch_t adopted = tslab_epoch_advance(a);
  {
    tslab::epoch_scope scope(a, adopted);
    CHECK(scope.epoch() == adopted);
    CHECK_EQ_U(scope.end(), TSLAB_OK);
    CHECK_EQ_U(state_of(a, adopted), TSLAB_ERR_EPOCH_CLOSED);
    CHECK_EQ_U(scope.end(), TSLAB_OK);
  }
  // release(): the epoch outlives the scope.
  tslab_epoch_t kept;
  {
    tslab::epoch_scope scope(a);
    kept = scope.release();
  }
  CHECK_EQ_U(state_of(a, kept), TSLAB_OK);
  CHECK_EQ_U(tslab_epoch_close(a, kept), TSLAB_OK);

  // A closed epoch keeps its live objects; free-all ends them.
  void* survivor;
  {
    tslab::epoch_scope scope(a);
    survivor = scope.resource().allocate(200);
  }
  CHECK(tslab_usable_size(a, survivor) >= 200);
  CHECK(tslab_free(a, survivor));
  tslab_epoch_t freed;
  void* dead;
  tslab_handle_t dead_handle;
  {
    tslab::epoch_scope scope(a, tslab::epoch_end::free_all);
    freed = scope.epoch();
    dead = scope.resource().allocate(200);
    CHECK(tslab_alloc_handle(a, 48, freed, &dead_handle) != nullptr);
    std::pmr::vector<int> v({1, 2, 3}, &scope.resource());  // destroyed before the scope ends
  }
  CHECK_EQ_U(state_of(a, freed), TSLAB_ERR_EPOCH_CLOSED);
  CHECK_EQ_U(tslab_usable_size(a, dead), 0);
  CHECK(tslab_handle_get(a, dead_handle) == nullptr);
  CHECK(!tslab_free(a, dead));
  tslab_stats_epoch_t st;
  REQUIRE(tslab_stats_epoch(a, freed, &st) == TSLAB_OK);
  CHECK_EQ_U(st.live_objects, 0);

  // A null instance opens nothing.
  tslab::epoch_scope none(nullptr);
  CHECK(!none);
  CHECK_EQ_U(none.end(), TSLAB_OK);
}

void domain_scopes(tslab_t* a) {
  tslab_epoch_t e;
  void* p;
  {
    tslab::domain_scope request(a, "request");
    REQUIRE(request);
    e = request.epoch();
    CHECK(tslab_domain_current() == request.domain());
    p = tslab_domain_alloc(100);
    CHECK(tslab_epoch_of(a, p) == e);
    char label[TSLAB_LABEL_MAX];
    CHECK_EQ_U(tslab_epoch_get_label(a, e, label, sizeof label), TSLAB_OK);
    CHECK(std::string(label) == "request");
    {
      // Nested: a wrapped long-lived epoch.
      tslab_epoch_t session = tslab_epoch_advance(a);
      {
        tslab::domain_scope inner(a, session);
        REQUIRE(inner);
        CHECK(tslab_domain_current() == inner.domain());
        void* q = tslab_domain_alloc(50);
        CHECK(tslab_epoch_of(a, q) == session);
        CHECK(inner.resource().epoch() == session);
        CHECK(tslab_free(a, q));
      }
      CHECK_EQ_U(state_of(a, session), TSLAB_OK);  // wrapped: never ended
      CHECK(tslab_domain_current() == request.domain());
      CHECK_EQ_U(tslab_epoch_close(a, session), TSLAB_OK);
    }
  }
  CHECK(tslab_domain_current() == nullptr);
  CHECK_EQ_U(state_of(a, e), TSLAB_ERR_EPOCH_CLOSED);
  CHECK(tslab_free(a, p));  // closed, not freed-all: still live

  // Free-all mode.
  {
    tslab::domain_scope frame(a, "frame", tslab::epoch_end::free_all);
    REQUIRE(frame);
    e = frame.epoch();
    p = tslab_domain_alloc(64);
    CHECK(p != nullptr);
  }
  CHECK_EQ_U(tslab_usable_size(a, p), 0);

  // Failures: wrapping a closed epoch.
  {
    tslab::domain_scope closed(a, e);
    CHECK(!closed);
    CHECK_EQ_U(closed.status(), TSLAB_ERR_EPOCH_CLOSED);
    CHECK(tslab_domain_current() == nullptr);
  }
  tslab::domain_scope no_instance(nullptr);
  CHECK_EQ_U(no_instance.status(), TSLAB_ERR_INVALID_ARGUMENT);
}

}  // namespace

int main() {
  instances();
  tslab::instance inst;
  REQUIRE(inst);
  epoch_scopes(inst.get());
  domain_scopes(inst.get());
  CHECK_CONSISTENT(inst.get());
  TEST_DONE();
}
