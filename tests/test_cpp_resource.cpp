// The standard containers in epochs (include/tslab.hpp): std::pmr
// containers on an epoch_resource and the plain containers on
// tslab::allocator put every block they allocate in their epoch, free it
// when they let it go, keep to their epoch on move-assignment between
// epochs, and fail with std::bad_alloc when their epoch is closed.
#include <cstring>
#include <map>
#include <memory_resource>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "tslab.hpp"  // first: tslab.h through it
#include "test_util.h"

namespace {

std::uint64_t live_objects(tslab_t* a, tslab_epoch_t e) {
  tslab_stats_epoch_t s;
  REQUIRE(tslab_stats_epoch(a, e, &s) == TSLAB_OK);
  return s.live_objects;
}

// Every block the resource hands out belongs to its epoch.
class recording_resource : public std::pmr::memory_resource {
 public:
  explicit recording_resource(tslab::epoch_resource& inner) : inner_(inner) {}
  std::size_t blocks = 0, foreign = 0;

 private:
  void* do_allocate(std::size_t n, std::size_t align) override {
    void* p = inner_.allocate(n, align);
    blocks++;
    if (tslab_epoch_of(inner_.instance(), p) != inner_.epoch()) foreign++;
    if (reinterpret_cast<std::uintptr_t>(p) % align != 0) foreign++;
    return p;
  }
  void do_deallocate(void* p, std::size_t n, std::size_t align) override { inner_.deallocate(p, n, align); }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
  tslab::epoch_resource& inner_;
};

void pmr_containers_live_in_the_epoch(tslab_t* a) {
  tslab::epoch_scope request(a);
  REQUIRE(request);
  recording_resource rec(request.resource());
  {
    std::pmr::vector<int> v(&rec);
    for (int i = 0; i < 10000; i++) v.push_back(i);
    std::pmr::string s("a request body long enough to leave the small-string buffer behind", &rec);
    for (int i = 0; i < 50; i++) s += " and more";
    std::pmr::unordered_map<int, std::pmr::string> m(&rec);
    for (int i = 0; i < 500; i++) m.emplace(i, std::pmr::string(64, static_cast<char>('a' + i % 26)));
    std::pmr::map<std::pmr::string, int> ordered(&rec);
    for (int i = 0; i < 300; i++) {
      std::pmr::string key(40, static_cast<char>('A' + i % 26), &rec);
      key += std::to_string(i);
      ordered[key] = i;
    }

    CHECK(live_objects(a, request.epoch()) > 500);
    long sum = 0;
    for (int x : v) sum += x;
    CHECK_EQ_U(sum, 49995000);
    CHECK_EQ_U(m.size(), 500);
    CHECK(m.at(27) == std::pmr::string(64, 'b'));
    CHECK_EQ_U(ordered.size(), 300);
    CHECK(s.size() > 400);
    // The elements' own strings took the container's resource too.
    CHECK(m.at(3).get_allocator().resource() == &rec);
  }
  CHECK(rec.blocks > 800);
  CHECK_EQ_U(rec.foreign, 0);
  // Everything went back when the containers did.
  CHECK_EQ_U(live_objects(a, request.epoch()), 0);
  CHECK_CONSISTENT(a);
}

void plain_allocator_in_the_epoch(tslab_t* a) {
  tslab::epoch_scope batch(a);
  tslab::allocator<int> ai(a, batch.epoch());
  {
    std::vector<int, tslab::allocator<int>> v(ai);
    for (int i = 0; i < 5000; i++) v.push_back(i * 3);
    CHECK(tslab_epoch_of(a, v.data()) == batch.epoch());

    using pair_alloc = tslab::allocator<std::pair<const int, std::string>>;
    std::map<int, std::string, std::less<int>, pair_alloc> m(ai);  // rebound from allocator<int>
    for (int i = 0; i < 400; i++) m.emplace(i, "value");
    CHECK_EQ_U(m.size(), 400);
    CHECK(live_objects(a, batch.epoch()) >= 401);  // one node each, plus the vector
    CHECK_EQ_U(v[4999], 14997);
  }
  CHECK_EQ_U(live_objects(a, batch.epoch()), 0);

  // allocator_traits: rebind, equality across rebinds, value semantics.
  using traits = std::allocator_traits<tslab::allocator<int>>;
  using rebound = traits::rebind_alloc<double>;
  static_assert(std::is_same_v<rebound, tslab::allocator<double>>);
  static_assert(!traits::propagate_on_container_move_assignment::value);
  static_assert(!traits::is_always_equal::value);
  rebound ad(ai);
  CHECK(ad == ai);
  CHECK(!(ad != ai));
  tslab::allocator<int> other_epoch(a, tslab_epoch_current(a) + 1000);
  CHECK(ai != other_epoch);
  double* d = ad.allocate(3);
  CHECK(tslab_epoch_of(a, d) == batch.epoch());
  ad.deallocate(d, 3);
  // Over-aligned element types get their alignment.
  struct alignas(64) line { char bytes[64]; };
  tslab::allocator<line> al(ai);
  line* l = al.allocate(5);
  CHECK(reinterpret_cast<std::uintptr_t>(l) % 64 == 0);
  al.deallocate(l, 5);
}

void resource_equality(tslab_t* a) {
  tslab::epoch_scope one(a), two(a);
  tslab::epoch_resource one_again(a, one.epoch());
  CHECK(one.resource() == one.resource());
  CHECK(one.resource() == one_again);  // same instance and epoch
  CHECK(one_again == one.resource());
  CHECK(one.resource() != two.resource());
  CHECK(one.resource() != *std::pmr::new_delete_resource());
  CHECK(*std::pmr::new_delete_resource() != one.resource());

  // Move-assignment between epochs copies into the target's epoch: the
  // containers stay where they were built.
  std::pmr::vector<int> in_one({1, 2, 3, 4, 5, 6, 7, 8}, &one.resource());
  std::pmr::vector<int> in_two(&two.resource());
  in_two = std::move(in_one);
  CHECK_EQ_U(in_two.size(), 8);
  CHECK(tslab_epoch_of(a, in_two.data()) == two.epoch());
  // Between equal resources the buffer itself moves.
  std::pmr::vector<int> src({9, 9, 9}, &one.resource());
  const int* buffer = src.data();
  std::pmr::vector<int> dst(&one_again);
  dst = std::move(src);
  CHECK(dst.data() == buffer);
}

void failures(tslab_t* a) {
  tslab::epoch_scope closed(a);
  tslab::epoch_resource r(a, closed.epoch());
  void* ok = r.allocate(100, 8);
  CHECK(ok != nullptr);
  CHECK_EQ_U(closed.end(), TSLAB_OK);
  bool threw = false;
  try {
    (void)r.allocate(100, 8);
  } catch (const std::bad_alloc&) {
    threw = true;
    CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_EPOCH_CLOSED);
  }
  CHECK(threw);
  r.deallocate(ok, 100, 8);  // a closed epoch's objects are still freed normally
  CHECK_EQ_U(live_objects(a, closed.epoch()), 0);

  std::vector<int, tslab::allocator<int>> v(tslab::allocator<int>(a, closed.epoch()));
  threw = false;
  try {
    v.push_back(1);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  threw = false;
  try {
    (void)tslab::allocator<std::uint64_t>(a, tslab_epoch_current(a)).allocate(SIZE_MAX / 4);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);

  // Zero bytes, and the default alignment (max_align_t) of a direct call.
  tslab::epoch_scope open(a);
  void* z = open.resource().allocate(0);
  CHECK(z != nullptr && reinterpret_cast<std::uintptr_t>(z) % alignof(std::max_align_t) == 0);
  open.resource().deallocate(z, 0);
  void* odd = open.resource().allocate(40);  // 40 bytes: tslab_alloc alone would give 8
  CHECK(reinterpret_cast<std::uintptr_t>(odd) % alignof(std::max_align_t) == 0);
  open.resource().deallocate(odd, 40);
}

}  // namespace

int main() {
  tslab::instance inst;
  REQUIRE(inst);
  pmr_containers_live_in_the_epoch(inst.get());
  plain_allocator_in_the_epoch(inst.get());
  resource_equality(inst.get());
  failures(inst.get());
  CHECK_CONSISTENT(inst.get());
  TEST_DONE();
}
