// A C++ program using the standard containers, under the drop-in: every
// form of operator new and delete (plain, array, sized, aligned, nothrow),
// the new-handler and std::bad_alloc, checked against known results.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "tslab_malloc.h"

static int failures;
#define CHECK(c)                                                      \
  do {                                                                \
    if (!(c)) {                                                       \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                     \
    }                                                                 \
  } while (0)

struct alignas(128) Wide {
  char bytes[200];
};

static int handler_calls;
static void handler() {
  handler_calls++;
  std::set_new_handler(nullptr);  // give up: the next failure throws
}

static int throwing_calls;
static void throwing_handler() {
  throwing_calls++;
  throw std::bad_alloc();
}

int main() {
  auto instance = reinterpret_cast<tslab_t* (*)()>(dlsym(RTLD_DEFAULT, "tslab_malloc_instance"));
  auto usable = reinterpret_cast<size_t (*)(tslab_t*, const void*)>(dlsym(RTLD_DEFAULT, "tslab_usable_size"));
  if (!instance || !usable || !instance()) {
    std::fprintf(stderr, "no drop-in: run under LD_PRELOAD=libtslab-malloc.so\n");
    return 1;
  }
  tslab_t* a = instance();

  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 0; i < 200000; i++) v.push_back(i * i % 1000003);
  CHECK(usable(a, v.data()) >= v.size() * sizeof v[0]);
  std::sort(v.begin(), v.end());
  CHECK(std::is_sorted(v.begin(), v.end()));

  std::map<std::string, int> m;
  std::unordered_map<int, std::string> u;
  for (int i = 0; i < 50000; i++) {
    m["key" + std::to_string(i)] = i;
    u[i] = std::string(static_cast<size_t>(i % 100), 'x');
  }
  long sum = 0;
  for (auto& kv : m) sum += kv.second;
  CHECK(sum == 50000L * 49999 / 2);
  CHECK(u[99].size() == 99 && u.size() == 50000);
  for (int i = 0; i < 50000; i += 2) m.erase("key" + std::to_string(i));
  CHECK(m.size() == 25000);

  std::list<std::string> l(1000, "a list element longer than sso");
  std::deque<int> d(100000, 7);
  CHECK(std::accumulate(d.begin(), d.end(), 0L) == 700000L);
  CHECK(l.size() == 1000);
  auto sp = std::make_shared<std::vector<int>>(1000, 1);
  std::unique_ptr<int[]> arr(new int[5000]());
  CHECK(sp->at(999) == 1 && arr[4999] == 0);

  // Over-aligned types use the aligned operators.
  std::unique_ptr<Wide> w(new Wide());
  CHECK(reinterpret_cast<std::uintptr_t>(w.get()) % 128 == 0 && usable(a, w.get()) >= sizeof(Wide));
  std::vector<Wide> ws(10);
  CHECK(reinterpret_cast<std::uintptr_t>(ws.data()) % 128 == 0);
  Wide* wa = new Wide[3];
  CHECK(reinterpret_cast<std::uintptr_t>(wa) % 128 == 0);
  delete[] wa;

  // Nothrow forms return nullptr; throwing forms call the handler, then throw.
  void* huge = ::operator new(static_cast<size_t>(1) << 62, std::nothrow);
  CHECK(huge == nullptr);
  Wide* hw = new (std::nothrow) Wide[static_cast<size_t>(1) << 52];
  CHECK(hw == nullptr);
  std::set_new_handler(handler);
  bool thrown = false;
  try {
    void* p = ::operator new(static_cast<size_t>(1) << 62);
    ::operator delete(p);
  } catch (const std::bad_alloc&) {
    thrown = true;
  }
  CHECK(thrown && handler_calls == 1);
  thrown = false;
  try {
    void* p = ::operator new(static_cast<size_t>(1) << 62, std::align_val_t(64));
    ::operator delete(p, std::align_val_t(64));
  } catch (const std::bad_alloc&) {
    thrown = true;
  }
  CHECK(thrown);

  // The nothrow forms call the new-handler as the throwing ones do, and
  // return nullptr for what the throwing form throws.
  handler_calls = 0;
  std::set_new_handler(handler);
  CHECK(::operator new(static_cast<size_t>(1) << 62, std::nothrow) == nullptr && handler_calls == 1);
  std::set_new_handler(handler);
  CHECK(::operator new[](static_cast<size_t>(1) << 62, std::align_val_t(256), std::nothrow) == nullptr &&
        handler_calls == 2);
  std::set_new_handler(throwing_handler);
  CHECK(new (std::nothrow) char[static_cast<size_t>(1) << 62] == nullptr && throwing_calls == 1);
  CHECK(::operator new(static_cast<size_t>(1) << 62, std::align_val_t(64), std::nothrow) == nullptr &&
        throwing_calls == 2);
  std::set_new_handler(nullptr);

  if (failures) {
    std::fprintf(stderr, "FAILED: %d check(s)\n", failures);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
