// include/tslab.hpp in a program built with -fno-exceptions -fno-rtti:
// pools report every failure as a status, containers live in epochs, and
// without RTTI an epoch_resource is equal only to itself (containers then
// copy between two resources of one epoch instead of taking the memory).
#include <memory_resource>
#include <vector>

#include "tslab.hpp"  // first: tslab.h through it
#include "test_util.h"

#if defined(__cpp_exceptions) || defined(__cpp_rtti) || defined(__GXX_RTTI)
#error "build this test with -fno-exceptions -fno-rtti"
#endif

int main() {
  tslab::instance inst;
  REQUIRE(inst);
  tslab_t* a = inst.get();
  tslab::epoch_scope scope(a);

  struct node {
    std::vector<int, tslab::allocator<int>> values;
  };
  tslab::pool<node> pool(a, scope.epoch(), 2);
  tslab::allocator<int> in_epoch(a, scope.epoch());
  auto s = pool.emplace(node{std::vector<int, tslab::allocator<int>>(100, 5, in_epoch)});
  REQUIRE(s);
  CHECK_EQ_U(pool.get(*s)->values[99], 5);
  CHECK(tslab_epoch_of(a, pool.get(*s)->values.data()) == scope.epoch());
  auto t = pool.reserve();
  CHECK(t);
  CHECK_EQ_U(pool.emplace(node{std::vector<int, tslab::allocator<int>>(in_epoch)}).status(), TSLAB_ERR_LIMIT);
  CHECK_EQ_U(pool.free(std::move(*s)), TSLAB_OK);

  tslab::epoch_resource same_epoch(a, scope.epoch());
  CHECK(scope.resource() == scope.resource());
  CHECK(!(scope.resource() == same_epoch));
  std::pmr::vector<int> v({1, 2, 3}, &scope.resource());
  std::pmr::vector<int> w(&same_epoch);
  w = std::move(v);  // unequal: copied, still in the epoch
  CHECK_EQ_U(w.size(), 3);
  CHECK(tslab_epoch_of(a, w.data()) == scope.epoch());

  tslab::epoch_scope closed(a);
  closed.end();
  tslab::pool<int> late(a, closed.epoch());
  CHECK_EQ_U(late.emplace(1).status(), TSLAB_ERR_EPOCH_CLOSED);
  TEST_DONE();
}
