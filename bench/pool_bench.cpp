// pool_bench: churn of a 32-byte object through tslab::pool<T>
// (include/tslab.hpp) against std::pmr::unsynchronized_pool_resource and
// new/delete, the C++ side of the comparison (nexus-slab's headline is one
// alloc+free pair of a 32-byte object in about a cycle).
//
// One pair: allocate an object, write its four fields, read them back
// through the allocator's access path, free it. With live=N the object
// freed is the one allocated N pairs earlier (a ring of N live objects), so
// the allocator cannot simply hand the same block back; live=0 frees it at
// once, the best case of LIFO reuse.
//
// Like the C suite, one binary per malloc: pool_bench_glibc, and
// pool_bench_jemalloc / _mimalloc / _tcmalloc linked with that peer, whose
// malloc and operator new replace glibc's in the whole process (each row
// says which library really serves them). new/delete and the pmr pool's
// upstream use that malloc; the tslab variants do not depend on it, so by
// default only the glibc binary runs them.
//
// Usage: pool_bench_<malloc> [variants=a,b,...] [pairs=N] [repeats=N] [live=N] [cpu=N]
//   variants  default: all for glibc, "new_delete,pmr_unsync_pool" for peers
//   pairs     pairs per timed repeat (default 2000000)
//   repeats   timed repeats, after one untimed warm-up (default 11)
//   live      objects kept live while churning (default 0)
//   cpu       pin the process to this CPU (default: not pinned)
//
// Output: one JSON object per line and variant, with the fields
//   bench             "pool_churn"
//   variant           tslab_pool          pool<T>::emplace, get (checked), free
//                     tslab_pool_bounded  the same on a bounded pool (capacity live + 1)
//                     tslab_pool_pinned   reserve, construct, access through the
//                                         reserved pointer (unchecked), free
//                     tslab_handle        the C floor of a pool: tslab_alloc_handle,
//                                         tslab_handle_get, tslab_free_handle
//                     tslab_alloc         the C fast path: tslab_alloc, tslab_free
//                     pmr_unsync_pool     std::pmr::unsynchronized_pool_resource
//                                         over new_delete_resource()
//                     new_delete          new T / delete
//   malloc            the binary's malloc: glibc, jemalloc, mimalloc, tcmalloc
//   malloc_version    its version
//   malloc_from       file of the malloc the process calls (checks the link)
//   new_from          file of the operator new the process calls
//   object_bytes      sizeof(T), 32
//   live, pairs, repeats   as run
//   ns_per_pair       median over the repeats of (wall time / pairs)
//   ns_per_pair_min, ns_per_pair_max
//   cycles_per_pair   median of user-space CPU cycles / pairs (perf_event_open),
//                     null when the counter is not available
//   checksum_ok       every object read back what was written
#include <dlfcn.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <string>
#include <vector>

#include "tslab.hpp"

extern "C" {
#include "backend.h"
#include "harness.h"
}

namespace {

struct order {
  std::uint64_t id, price, qty, flags;
};
static_assert(sizeof(order) == 32);

order make_order(std::uint64_t i) { return order{i, i * 3 + 1, i & 0xff, i ^ 0x5a5a}; }
std::uint64_t read_back(const order& o) { return o.id + o.price + o.qty + o.flags; }
std::uint64_t expected(std::uint64_t i) { return i + (i * 3 + 1) + (i & 0xff) + (i ^ 0x5a5a); }

// User-space CPU cycles of this thread, when the kernel lets us count them.
class cycle_counter {
 public:
  cycle_counter() {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
  }
  ~cycle_counter() {
    if (fd_ >= 0) close(fd_);
  }
  bool available() const { return fd_ >= 0; }
  std::uint64_t read_now() const {
    std::uint64_t v = 0;
    if (fd_ >= 0 && ::read(fd_, &v, sizeof v) != sizeof v) v = 0;
    return v;
  }

 private:
  int fd_;
};

// Each variant: take(i) allocates and writes object i and returns a
// handle; use(h) reads it back; give(h) frees it. The ring holds the live
// handles between take and give.
struct tslab_pool_variant {
  tslab::pool<order> pool;
  using handle = tslab::slot<order>;
  tslab_pool_variant(tslab_t* a, tslab_epoch_t e, std::size_t capacity) : pool(a, e, capacity) {}
  handle take(std::uint64_t i) { return std::move(*pool.emplace(make_order(i))); }
  std::uint64_t use(const handle& h) { return read_back(*pool.get(h)); }
  void give(handle& h) { (void)pool.free(std::move(h)); }
};

struct tslab_pool_pinned_variant {
  tslab::pool<order> pool;
  struct handle {
    tslab::slot<order> slot;
    order* object;
  };
  tslab_pool_pinned_variant(tslab_t* a, tslab_epoch_t e) : pool(a, e) {}
  handle take(std::uint64_t i) {
    auto r = pool.reserve();
    order* object = r->storage();
    return handle{r->construct(make_order(i)), object};
  }
  std::uint64_t use(const handle& h) { return read_back(*h.object); }
  void give(handle& h) { (void)pool.free(std::move(h.slot)); }
};

struct tslab_handle_variant {
  tslab_t* a;
  tslab_epoch_t e;
  using handle = tslab_handle_t;
  handle take(std::uint64_t i) {
    tslab_handle_t h;
    *static_cast<order*>(tslab_alloc_handle(a, sizeof(order), e, &h)) = make_order(i);
    return h;
  }
  std::uint64_t use(handle h) { return read_back(*static_cast<order*>(tslab_handle_get(a, h))); }
  void give(handle h) { tslab_free_handle(a, h); }
};

struct tslab_alloc_variant {
  tslab_t* a;
  tslab_epoch_t e;
  using handle = order*;
  handle take(std::uint64_t i) { return ::new (tslab_alloc(a, sizeof(order), e)) order(make_order(i)); }
  std::uint64_t use(handle p) { return read_back(*p); }
  void give(handle p) { tslab_free(a, p); }
};

struct pmr_pool_variant {
  std::pmr::unsynchronized_pool_resource resource;
  std::pmr::polymorphic_allocator<order> alloc{&resource};
  using handle = order*;
  handle take(std::uint64_t i) {
    order* p = alloc.allocate(1);
    alloc.construct(p, make_order(i));
    return p;
  }
  std::uint64_t use(handle p) { return read_back(*p); }
  void give(handle p) { alloc.deallocate(p, 1); }  // trivially destructible
};

struct new_delete_variant {
  using handle = order*;
  handle take(std::uint64_t i) { return new order(make_order(i)); }
  std::uint64_t use(handle p) { return read_back(*p); }
  void give(handle p) { delete p; }
};

struct params {
  std::uint64_t pairs, repeats, live;
};

struct measurement {
  std::vector<std::uint64_t> ns_x1000, cycles_x1000;  // per pair, in thousandths
  bool checksum_ok = true;
};

// One repeat: `pairs` pairs through a ring of `live` objects.
template <class V>
bool churn(V& v, const params& p, std::vector<typename V::handle>& ring) {
  std::uint64_t sum = 0, want = 0;
  for (std::uint64_t i = 0; i < p.pairs; i++) {
    auto h = v.take(i);
    if (p.live == 0) {
      sum += v.use(h);
      want += expected(i);
      v.give(h);
    } else {
      auto& old = ring[i % p.live];
      if (i >= p.live) {
        sum += v.use(old);
        want += expected(i - p.live);
        v.give(old);
      }
      old = std::move(h);
    }
  }
  for (std::uint64_t i = p.pairs > p.live ? p.pairs - p.live : 0; i < p.pairs && p.live; i++) {
    auto& old = ring[i % p.live];
    sum += v.use(old);
    want += expected(i);
    v.give(old);
  }
  return sum == want;
}

template <class V>
measurement run(V& v, const params& p, const cycle_counter& cycles) {
  measurement m;
  std::vector<typename V::handle> ring(p.live);
  m.checksum_ok = churn(v, p, ring);  // warm-up
  for (std::uint64_t r = 0; r < p.repeats; r++) {
    std::uint64_t c0 = cycles.read_now(), t0 = h_now_ns();
    m.checksum_ok = churn(v, p, ring) && m.checksum_ok;
    std::uint64_t t1 = h_now_ns(), c1 = cycles.read_now();
    m.ns_x1000.push_back((t1 - t0) * 1000 / p.pairs);
    m.cycles_x1000.push_back((c1 - c0) * 1000 / p.pairs);
  }
  return m;
}

const char* library_of(const char* symbol) {
  Dl_info info;
  void* f = dlsym(RTLD_DEFAULT, symbol);
  if (!f || !dladdr(f, &info) || !info.dli_fname) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

void print(const char* variant, const params& p, measurement& m, bool have_cycles) {
  auto median = [](std::vector<std::uint64_t>& v) {
    h_sort_u64(v.data(), v.size());
    return h_pct_sorted(v.data(), v.size(), 0.5);
  };
  std::uint64_t ns = median(m.ns_x1000);
  std::string cycles = "null";
  if (have_cycles) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", median(m.cycles_x1000) / 1000.0);
    cycles = buf;
  }
  std::printf(
      "{\"bench\":\"pool_churn\",\"variant\":\"%s\",\"malloc\":\"%s\",\"malloc_version\":\"%s\","
      "\"malloc_from\":\"%s\",\"new_from\":\"%s\",\"object_bytes\":%zu,\"live\":%llu,\"pairs\":%llu,"
      "\"repeats\":%llu,\"ns_per_pair\":%.3f,\"ns_per_pair_min\":%.3f,\"ns_per_pair_max\":%.3f,"
      "\"cycles_per_pair\":%s,\"checksum_ok\":%s}\n",
      variant, be_name, be_version(), library_of("malloc"), library_of("_Znwm"), sizeof(order),
      (unsigned long long)p.live, (unsigned long long)p.pairs, (unsigned long long)p.repeats, ns / 1000.0,
      m.ns_x1000.front() / 1000.0, m.ns_x1000.back() / 1000.0, cycles.c_str(), m.checksum_ok ? "true" : "false");
  std::fflush(stdout);
}

bool wanted(const std::string& list, const char* variant) {
  return ("," + list + ",").find("," + std::string(variant) + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  params p{h_arg_u64(argc - 1, argv + 1, "pairs", 2000000), h_arg_u64(argc - 1, argv + 1, "repeats", 11),
           h_arg_u64(argc - 1, argv + 1, "live", 0)};
  if (p.pairs == 0 || p.repeats == 0) {
    std::fprintf(stderr, "pool_bench: pairs and repeats must be positive\n");
    return 2;
  }
  const char* cpu = h_arg_str(argc - 1, argv + 1, "cpu", nullptr);
  if (cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(std::atoi(cpu), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("pool_bench: sched_setaffinity");
  }
  bool glibc = std::strcmp(be_name, "glibc") == 0;
  std::string variants = h_arg_str(argc - 1, argv + 1, "variants",
                                   glibc ? "tslab_pool,tslab_pool_bounded,tslab_pool_pinned,tslab_handle,"
                                           "tslab_alloc,pmr_unsync_pool,new_delete"
                                         : "new_delete,pmr_unsync_pool");
  cycle_counter cycles;

  tslab::instance inst;
  if (!inst) {
    std::fprintf(stderr, "pool_bench: tslab_create: %s\n", tslab_strerror(tslab_last_error()));
    return 1;
  }
  tslab_t* a = inst.get();
  tslab_epoch_t e = tslab_epoch_current(a);

  if (wanted(variants, "tslab_pool")) {
    tslab_pool_variant v(a, e, tslab::pool<order>::growing);
    auto m = run(v, p, cycles);
    print("tslab_pool", p, m, cycles.available());
  }
  if (wanted(variants, "tslab_pool_bounded")) {
    tslab_pool_variant v(a, e, p.live + 1);
    auto m = run(v, p, cycles);
    print("tslab_pool_bounded", p, m, cycles.available());
  }
  if (wanted(variants, "tslab_pool_pinned")) {
    tslab_pool_pinned_variant v(a, e);
    auto m = run(v, p, cycles);
    print("tslab_pool_pinned", p, m, cycles.available());
  }
  if (wanted(variants, "tslab_handle")) {
    tslab_handle_variant v{a, e};
    auto m = run(v, p, cycles);
    print("tslab_handle", p, m, cycles.available());
  }
  if (wanted(variants, "tslab_alloc")) {
    tslab_alloc_variant v{a, e};
    auto m = run(v, p, cycles);
    print("tslab_alloc", p, m, cycles.available());
  }
  if (wanted(variants, "pmr_unsync_pool")) {
    pmr_pool_variant v;
    auto m = run(v, p, cycles);
    print("pmr_unsync_pool", p, m, cycles.available());
  }
  if (wanted(variants, "new_delete")) {
    new_delete_variant v;
    auto m = run(v, p, cycles);
    print("new_delete", p, m, cycles.available());
  }
  return 0;
}
