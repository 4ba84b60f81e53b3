// Typed pools (include/tslab.hpp): slots of non-trivial types whose
// constructors and destructors are counted (each destructor runs exactly
// once), stale slots after free and after the pool's epoch ends, bounded
// pools at capacity, two-phase construction with a throwing constructor,
// take, rc slots freed by their last owner, over-aligned types and moves.
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tslab.hpp"  // first: tslab.h through it
#include "test_util.h"

namespace {

// Counts constructions and destructions; its destructor checks that it runs
// on a live object, once.
struct tracked {
  static inline int constructed = 0, destroyed = 0, moved = 0;
  static constexpr std::uint64_t alive = 0x11fe11fe11fe11feull;
  std::uint64_t state = alive;
  std::string name;
  std::vector<int> data;

  explicit tracked(std::string n, int count = 8) : name(std::move(n)), data(count, 7) { constructed++; }
  tracked(tracked&& o) noexcept : name(std::move(o.name)), data(std::move(o.data)) {
    constructed++;
    moved++;
  }
  ~tracked() {
    CHECK(state == alive);
    state = 0;
    destroyed++;
  }
  static int live() { return constructed - destroyed; }
};

// Throws from its constructor when asked.
struct fragile {
  static inline int destroyed = 0;
  explicit fragile(bool fail) {
    if (fail) throw std::runtime_error("constructor failed");
  }
  ~fragile() { destroyed++; }
};

struct alignas(16) vec4 { float v[4]; };
struct alignas(64) cache_line { std::uint64_t words[8]; };
struct alignas(256) page_part { char bytes[300]; };

static_assert(sizeof(tslab::slot<tracked>) == 8);
static_assert(sizeof(tslab::slot<page_part>) == 8);
static_assert(!std::is_copy_constructible_v<tslab::slot<int>>);
static_assert(std::is_nothrow_move_constructible_v<tslab::slot<int>>);

void slots_construct_and_destroy_once(tslab_t* a) {
  tslab::epoch_scope scope(a);
  tslab::pool<tracked> pool(a, scope.epoch());
  CHECK(!pool.bounded());
  std::vector<tslab::slot<tracked>> slots;
  for (int i = 0; i < 1000; i++) {
    auto r = pool.emplace("object " + std::to_string(i), i % 50 + 1);
    REQUIRE(r);
    slots.push_back(std::move(*r));
  }
  CHECK_EQ_U(tracked::live(), 1000);
  for (int i = 0; i < 1000; i++) {
    tracked* t = pool.get(slots[i]);
    REQUIRE(t != nullptr);
    CHECK(t->name == "object " + std::to_string(i));
    CHECK_EQ_U(t->data.size(), i % 50 + 1);
    CHECK(tslab_epoch_of(a, t) == scope.epoch());
  }
  // Free half, take the other half.
  int taken_ok = 0;
  for (int i = 0; i < 1000; i++) {
    if (i % 2 == 0) {
      CHECK_EQ_U(pool.free(std::move(slots[i])), TSLAB_OK);
    } else {
      auto v = pool.take(std::move(slots[i]));
      REQUIRE(v);
      taken_ok += v->name == "object " + std::to_string(i);
    }
    CHECK(!slots[i]);
  }
  CHECK_EQ_U(taken_ok, 500);
  CHECK_EQ_U(tracked::live(), 0);  // the taken values died at the end of each iteration
  CHECK_EQ_U(tracked::constructed, 1500);
  tslab_stats_epoch_t st;
  REQUIRE(tslab_stats_epoch(a, scope.epoch(), &st) == TSLAB_OK);
  CHECK_EQ_U(st.live_objects, 0);
}

void stale_slots(tslab_t* a) {
  tslab::epoch_scope scope(a);
  tslab::pool<tracked> pool(a, scope.epoch());
  auto s = *pool.emplace("x");
  tslab_handle_t h = s.handle();
  CHECK(pool.get(s) != nullptr);
  CHECK_EQ_U(pool.free(std::move(s)), TSLAB_OK);
  // Another owner of the same handle now finds it stale, even once the
  // memory serves a new object.
  auto again = *pool.emplace("y");
  auto copy = tslab::slot<tracked>::adopt(h);
  tslab_clear_error();
  CHECK(pool.get(copy) == nullptr);
  CHECK_EQ_U(tslab_last_error(), TSLAB_ERR_INVALID_HANDLE);
  int before = tracked::destroyed;
  CHECK_EQ_U(pool.free(std::move(copy)), TSLAB_ERR_INVALID_HANDLE);
  CHECK(!copy);
  auto gone = pool.take(tslab::slot<tracked>::adopt(h));
  CHECK(!gone);
  CHECK_EQ_U(gone.status(), TSLAB_ERR_INVALID_HANDLE);
  CHECK(std::strcmp(gone.message(), tslab_strerror(TSLAB_ERR_INVALID_HANDLE)) == 0);
  CHECK_EQ_U(tracked::destroyed, before);  // nothing destroyed for a stale slot
  CHECK(pool.get(again)->name == "y");
  CHECK_EQ_U(pool.free(std::move(again)), TSLAB_OK);
  tslab::slot<tracked> empty;
  CHECK_EQ_U(pool.free(std::move(empty)), TSLAB_ERR_INVALID_ARGUMENT);
  CHECK(tracked::live() == 0);
}

void pool_ends_with_its_epoch(tslab_t* a) {
  // Close: the pool takes no new objects; live ones stay until freed.
  {
    tslab::epoch_scope scope(a);
    tslab::pool<tracked> pool(a, scope.epoch());
    auto s = *pool.emplace("survivor");
    CHECK_EQ_U(scope.end(), TSLAB_OK);
    auto r = pool.emplace("late");
    CHECK(!r);
    CHECK_EQ_U(r.status(), TSLAB_ERR_EPOCH_CLOSED);
    CHECK_EQ_U(tracked::live(), 1);  // "late" was never built
    CHECK(pool.get(s)->name == "survivor");
    CHECK_EQ_U(pool.free(std::move(s)), TSLAB_OK);
    CHECK_EQ_U(tracked::live(), 0);
  }
  // Free-all: every slot of the pool is stale at once (no destructor runs:
  // a trivially destructible type is the natural fit).
  {
    struct order { std::uint64_t id, price, qty, side; };
    tslab::epoch_scope scope(a, tslab::epoch_end::free_all);
    tslab::pool<order> pool(a, scope.epoch(), 64);
    std::vector<tslab::slot<order>> slots;
    for (std::uint64_t i = 0; i < 64; i++) slots.push_back(*pool.emplace(order{i, 100 + i, 1, 0}));
    auto shared = *tslab::pool<order>(a, scope.epoch()).emplace(order{});  // a second pool, same epoch
    CHECK_EQ_U(pool.in_use(), 64);
    CHECK(pool.get(slots[10])->price == 110);
    CHECK_EQ_U(scope.end(), TSLAB_OK);
    for (auto& s : slots) {
      CHECK(pool.get(s) == nullptr);
      CHECK_EQ_U(pool.free(std::move(s)), TSLAB_ERR_INVALID_HANDLE);
    }
    CHECK(pool.get(shared) == nullptr);
    (void)shared.release();
    CHECK_EQ_U(pool.emplace(order{}).status(), TSLAB_ERR_EPOCH_CLOSED);
  }
}

void bounded_pools(tslab_t* a) {
  tslab::epoch_scope scope(a);
  tslab::pool<tracked> pool(a, scope.epoch(), 3);
  CHECK(pool.bounded());
  CHECK_EQ_U(pool.capacity(), 3);
  auto s1 = *pool.emplace("1");
  auto s2 = *pool.emplace("2");
  auto r3 = pool.reserve();
  REQUIRE(r3);
  CHECK_EQ_U(pool.in_use(), 3);
  auto full = pool.emplace("4");
  CHECK(!full);
  CHECK_EQ_U(full.status(), TSLAB_ERR_LIMIT);
  CHECK(std::strcmp(full.message(), tslab_strerror(TSLAB_ERR_LIMIT)) == 0);
  CHECK_EQ_U(pool.emplace_shared("4").status(), TSLAB_ERR_LIMIT);
  CHECK_EQ_U(tracked::live(), 2);  // a refused object is never built
  // A dropped reservation gives its slot back.
  { auto dropped = std::move(*r3); }
  CHECK_EQ_U(pool.in_use(), 2);
  auto s3 = *pool.emplace("3");
  CHECK_EQ_U(pool.free(std::move(s1)), TSLAB_OK);
  auto v = pool.take(std::move(s2));
  CHECK(v && v->name == "2");
  CHECK_EQ_U(pool.in_use(), 1);
  auto s4 = *pool.emplace("4");
  auto s5 = *pool.emplace("5");
  CHECK_EQ_U(pool.emplace("6").status(), TSLAB_ERR_LIMIT);
  for (auto* s : {&s3, &s4, &s5}) CHECK_EQ_U(pool.free(std::move(*s)), TSLAB_OK);
  CHECK_EQ_U(pool.in_use(), 0);
}

void two_phase_construction(tslab_t* a) {
  tslab::epoch_scope scope(a);
  tslab::pool<tracked> pool(a, scope.epoch(), 10);
  // Construct in place at the address known in advance.
  auto r = pool.reserve();
  REQUIRE(r);
  tracked* where = r->storage();
  auto s = r->construct("placed", 3);
  CHECK(pool.get(s) == where);
  CHECK(where->name == "placed");
  // The caller's own placement new, then commit.
  auto r2 = *pool.reserve();
  ::new (static_cast<void*>(r2.storage())) tracked("by hand");
  auto s2 = r2.commit();
  CHECK(pool.get(s2)->name == "by hand");
  CHECK_EQ_U(pool.in_use(), 2);
  CHECK_EQ_U(pool.free(std::move(s)), TSLAB_OK);
  CHECK_EQ_U(pool.free(std::move(s2)), TSLAB_OK);

  // A throwing constructor: the slot goes back, no destructor runs.
  tslab::pool<fragile> fp(a, scope.epoch(), 1);
  bool threw = false;
  try {
    (void)fp.emplace(true);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  CHECK(threw);
  CHECK_EQ_U(fp.in_use(), 0);
  threw = false;
  try {
    (void)fp.emplace_shared(true);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  CHECK(threw);
  CHECK_EQ_U(fp.in_use(), 0);
  CHECK_EQ_U(fragile::destroyed, 0);
  auto ok = fp.emplace(false);
  REQUIRE(ok);
  CHECK_EQ_U(fp.free(std::move(*ok)), TSLAB_OK);
  CHECK_EQ_U(fragile::destroyed, 1);
  tslab_stats_epoch_t st;
  REQUIRE(tslab_stats_epoch(a, scope.epoch(), &st) == TSLAB_OK);
  CHECK_EQ_U(st.live_objects, 0);
}

void rc_slots(tslab_t* a) {
  tslab::epoch_scope scope(a);
  tslab::pool<tracked> pool(a, scope.epoch(), 2);
  int destroyed = tracked::destroyed;
  {
    auto h1 = *pool.emplace_shared("shared");
    CHECK_EQ_U(h1.use_count(), 1);
    tslab::rc_slot<tracked> h2 = h1;
    tslab::rc_slot<tracked> h3;
    h3 = h2;
    CHECK_EQ_U(h1.use_count(), 3);
    CHECK(h1.get() == h3.get());
    h1.get()->name += " and changed";
    tslab::rc_slot<tracked> h4 = std::move(h2);
    CHECK(!h2);
    CHECK(h2.get() == nullptr);
    CHECK_EQ_U(h4.use_count(), 3);
    h1.reset();
    h3 = tslab::rc_slot<tracked>();
    CHECK_EQ_U(h4.use_count(), 1);
    CHECK_EQ_U(tracked::destroyed, destroyed);  // still owned
    CHECK(h4.get()->name == "shared and changed");
    CHECK_EQ_U(pool.in_use(), 1);
  }
  CHECK_EQ_U(tracked::destroyed, destroyed + 1);  // the last owner destroyed it, once
  CHECK_EQ_U(pool.in_use(), 0);
  CHECK_EQ_U(tracked::live(), 0);

  // An rc slot whose epoch is freed-all is stale; its owners leave quietly.
  struct point { double x, y; };
  tslab::epoch_scope frame(a, tslab::epoch_end::free_all);
  tslab::pool<point> points(a, frame.epoch());
  auto p1 = *points.emplace_shared(point{1, 2});
  auto p2 = p1;
  CHECK(p2.get()->y == 2);
  CHECK_EQ_U(frame.end(), TSLAB_OK);
  CHECK(p1.get() == nullptr);
  CHECK_EQ_U(p2.use_count(), 0);
  auto p3 = p2;
  CHECK(p3.get() == nullptr);
}

template <class T>
bool aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

template <class T>
void alignment_of(tslab_t* a, tslab_epoch_t e) {
  tslab::pool<T> pool(a, e);
  std::vector<tslab::slot<T>> slots;
  std::vector<tslab::rc_slot<T>> shared;
  bool ok = true;
  for (int i = 0; i < 200; i++) {
    slots.push_back(*pool.emplace());
    shared.push_back(*pool.emplace_shared());
    T* p = pool.get(slots.back());
    ok = ok && p != nullptr && aligned(p) && aligned(shared.back().get());
    std::memset(static_cast<void*>(p), 0xab, sizeof(T));  // the whole object is ours
  }
  CHECK(ok);
  for (auto& s : slots) CHECK_EQ_U(pool.free(std::move(s)), TSLAB_OK);
}

void over_aligned_types(tslab_t* a) {
  tslab::epoch_scope scope(a);
  alignment_of<vec4>(a, scope.epoch());
  alignment_of<cache_line>(a, scope.epoch());
  alignment_of<page_part>(a, scope.epoch());
  alignment_of<long double>(a, scope.epoch());
  alignment_of<char>(a, scope.epoch());
  tslab_stats_epoch_t st;
  REQUIRE(tslab_stats_epoch(a, scope.epoch(), &st) == TSLAB_OK);
  CHECK_EQ_U(st.live_objects, 0);
}

void moves(tslab_t* a) {
  tslab::epoch_scope scope(a);
  tslab::pool<std::unique_ptr<int>> pool(a, scope.epoch());
  auto s = *pool.emplace(std::make_unique<int>(42));
  tslab_handle_t h = s.handle();
  tslab::slot<std::unique_ptr<int>> t(std::move(s));
  CHECK(!s && t && t.handle() == h);
  tslab::slot<std::unique_ptr<int>> u;
  u = std::move(t);
  CHECK(!t && u.handle() == h);
  CHECK(**pool.get(u) == 42);
  // take moves a move-only value out.
  auto v = pool.take(std::move(u));
  REQUIRE(v);
  CHECK(**v == 42);
  // release / adopt round trip.
  auto w = *pool.emplace(std::make_unique<int>(7));
  tslab_handle_t raw = w.release();
  CHECK(!w);
  auto back = tslab::slot<std::unique_ptr<int>>::adopt(raw);
  CHECK(**pool.get(back) == 7);
  CHECK_EQ_U(pool.free(std::move(back)), TSLAB_OK);
  // Slots of two instances do not mix: a foreign handle is refused.
  tslab::instance other;
  tslab::pool<int> foreign(other.get(), tslab_epoch_current(other.get()));
  tslab::pool<int> mine(a, scope.epoch());
  auto f = *foreign.emplace(5);
  auto alias = tslab::slot<int>::adopt(f.handle());
  CHECK(mine.get(alias) == nullptr);
  (void)alias.release();
  CHECK_EQ_U(foreign.free(std::move(f)), TSLAB_OK);
  // Moving instances keeps the allocator alive exactly once.
  tslab::instance moved = std::move(other);
  CHECK(!other && moved);
}

}  // namespace

int main() {
  tslab::instance inst;
  REQUIRE(inst);
  tslab_t* a = inst.get();
  slots_construct_and_destroy_once(a);
  stale_slots(a);
  pool_ends_with_its_epoch(a);
  bounded_pools(a);
  two_phase_construction(a);
  rc_slots(a);
  over_aligned_types(a);
  moves(a);
  CHECK_EQ_U(tracked::live(), 0);
  CHECK_CONSISTENT(a);
  TEST_DONE();
}
