// The debug report of a dropped slot (include/tslab.hpp): a slot destroyed
// or overwritten while it owns its object is reported to the leak handler,
// once, with its handle; a slot given back (free, take), released or moved
// from is not. Built with TSLAB_SLOT_LEAK_CHECK=1 whatever the build type.
#include <vector>

#include "tslab.hpp"  // first: tslab.h through it
#include "test_util.h"

#if !TSLAB_SLOT_LEAK_CHECK
#error "this test needs the slot leak check"
#endif

namespace {

std::vector<tslab_handle_t> reported;
std::size_t reported_size;

void capture(tslab_handle_t h, std::size_t object_size) noexcept {
  reported.push_back(h);
  reported_size = object_size;
}

struct order {
  std::uint64_t id, price, qty;
};

}  // namespace

int main() {
  tslab::instance inst;
  REQUIRE(inst);
  tslab_t* a = inst.get();
  tslab::epoch_scope scope(a);
  tslab::pool<order> pool(a, scope.epoch());
  tslab::slot_leak_handler previous = tslab::set_slot_leak_handler(&capture);
  CHECK(previous != nullptr);

  // Dropped at the end of a scope.
  tslab_handle_t dropped;
  {
    auto s = *pool.emplace(order{1, 2, 3});
    dropped = s.handle();
  }
  REQUIRE(reported.size() == 1);
  CHECK(reported[0] == dropped);
  CHECK_EQ_U(reported_size, sizeof(order));
  // The object itself is still there (a leak, not a free): reclaim it.
  auto reclaimed = tslab::slot<order>::adopt(dropped);
  CHECK(pool.get(reclaimed)->price == 2);
  CHECK_EQ_U(pool.free(std::move(reclaimed)), TSLAB_OK);

  // Overwritten by a move-assignment.
  auto x = *pool.emplace(order{4, 5, 6});
  auto y = *pool.emplace(order{7, 8, 9});
  tslab_handle_t overwritten = x.handle(), survivor = y.handle();
  x = std::move(y);
  REQUIRE(reported.size() == 2);
  CHECK(reported[1] == overwritten);
  CHECK(x.handle() == survivor);
  (void)tslab_free_handle(a, overwritten);

  // Not reported: freed, taken, released, moved from, empty, stale-freed.
  {
    auto f = *pool.emplace(order{});
    CHECK_EQ_U(pool.free(std::move(f)), TSLAB_OK);
    auto t = *pool.emplace(order{});
    CHECK(pool.take(std::move(t)));
    auto r = *pool.emplace(order{});
    tslab_handle_t h = r.release();
    CHECK(tslab_free_handle(a, h));
    auto m = *pool.emplace(order{});
    auto m2 = std::move(m);
    CHECK_EQ_U(pool.free(std::move(m2)), TSLAB_OK);
    tslab::slot<order> empty;
    auto stale = tslab::slot<order>::adopt(h);
    CHECK_EQ_U(pool.free(std::move(stale)), TSLAB_ERR_INVALID_HANDLE);
    auto dropped_reservation = pool.reserve();  // reservations give back, never leak
    CHECK(dropped_reservation);
  }
  CHECK_EQ_U(reported.size(), 2);
  CHECK_EQ_U(pool.free(std::move(x)), TSLAB_OK);

  // Restoring the default handler: nullptr means the default.
  CHECK(tslab::set_slot_leak_handler(nullptr) == &capture);
  CHECK(tslab::set_slot_leak_handler(previous) == previous);
  tslab_stats_epoch_t st;
  REQUIRE(tslab_stats_epoch(a, scope.epoch(), &st) == TSLAB_OK);
  CHECK_EQ_U(st.live_objects, 0);
  TEST_DONE();
}
