// A C++ user program built against an installed tslab: the header, the
// tslab::tslab_cpp targets and the library behind them.
#include <cstdio>
#include <memory_resource>
#include <vector>

#include <tslab.hpp>

int main() {
  tslab::instance inst;
  if (!inst) return 1;
  tslab_epoch_t e = tslab_epoch_advance(inst.get());
  tslab::epoch_resource r(inst.get(), e);
  bool ok;
  {
    std::pmr::vector<int> v({1, 2, 3}, &r);
    tslab::pool<int> pool(inst.get(), e, 1);
    auto s = pool.emplace(42);
    ok = s && *pool.get(*s) == 42 && pool.emplace(1).status() == TSLAB_ERR_LIMIT &&
         pool.free(std::move(*s)) == TSLAB_OK && tslab_epoch_of(inst.get(), v.data()) == e;
  }
  ok = ok && tslab_epoch_close(inst.get(), e) == TSLAB_OK;
  std::puts(ok ? "c++ consumer ok" : "c++ consumer failed");
  return ok ? 0 : 1;
}
