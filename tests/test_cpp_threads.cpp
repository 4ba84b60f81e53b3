// The C++ layer's thread-safety statements (docs/CPP.md), checked under
// several threads (and by ThreadSanitizer in its build): a bounded pool
// shared by threads never passes its capacity and counts back to zero;
// slots made on one thread are freed on another; copies of one rc_slot on
// several threads destroy its object once, after every owner's writes; an
// epoch_resource serves containers on several threads at once.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory_resource>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tslab.hpp"  // first: tslab.h through it
#include "test_util.h"

namespace {

constexpr int kThreads = 4;

struct message {
  static inline std::atomic<int> constructed{0}, destroyed{0};
  std::uint64_t seq;
  std::string body;
  message(std::uint64_t s, std::string b) : seq(s), body(std::move(b)) { constructed++; }
  message(message&& o) noexcept : seq(o.seq), body(std::move(o.body)) { constructed++; }
  ~message() { destroyed++; }
};

void bounded_pool_shared_by_threads(tslab_t* a, tslab_epoch_t e) {
  constexpr std::size_t capacity = 48;
  tslab::pool<message> pool(a, e, capacity);
  std::atomic<int> over_capacity{0}, refused{0}, wrong{0}, arrived{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      // Fill: 4 threads want 17 each, more than the 48 the pool allows, so
      // when all have arrived the pool is exactly full.
      std::vector<tslab::slot<message>> held;
      while (held.size() < 17) {
        auto r = pool.emplace(0, std::to_string(t));
        if (!r) {
          refused += r.status() == TSLAB_ERR_LIMIT;
          break;
        }
        held.push_back(std::move(*r));
      }
      arrived++;
      while (arrived.load() < kThreads) std::this_thread::yield();
      if (pool.in_use() != capacity) wrong++;
      arrived++;
      while (arrived.load() < 2 * kThreads) std::this_thread::yield();
      // Churn against the bound.
      for (std::uint64_t i = 0; i < 4000; i++) {
        auto r = pool.emplace(i, std::to_string(t));
        if (r) {
          if (pool.in_use() > capacity) over_capacity++;
          held.push_back(std::move(*r));
        } else {
          refused += r.status() == TSLAB_ERR_LIMIT;
          wrong += r.status() != TSLAB_ERR_LIMIT;
        }
        if (held.size() > 16 || (!r && !held.empty())) {
          message* m = pool.get(held.back());
          if (!m || m->body != std::to_string(t)) wrong++;
          if (pool.free(std::move(held.back())) != TSLAB_OK) wrong++;
          held.pop_back();
        }
      }
      for (auto& s : held)
        if (pool.free(std::move(s)) != TSLAB_OK) wrong++;
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ_U(over_capacity.load(), 0);
  CHECK_EQ_U(wrong.load(), 0);
  CHECK(refused.load() > 0);
  CHECK_EQ_U(pool.in_use(), 0);
  CHECK_EQ_U(message::constructed.load(), message::destroyed.load());
}

void slots_freed_on_another_thread(tslab_t* a, tslab_epoch_t e) {
  tslab::pool<message> pool(a, e);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<tslab::slot<message>> queue;
  bool done = false;
  std::atomic<int> wrong{0};
  std::thread consumer([&] {
    std::uint64_t expect = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done || !queue.empty(); });
      if (queue.empty()) return;
      tslab::slot<message> s = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      auto m = pool.take(std::move(s));
      if (!m || m->seq != expect++) wrong++;
    }
  });
  for (std::uint64_t i = 0; i < 20000; i++) {
    auto s = *pool.emplace(i, "payload");
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(s));
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_one();
  consumer.join();
  CHECK_EQ_U(wrong.load(), 0);
  CHECK_EQ_U(message::constructed.load(), message::destroyed.load());
}

struct counter_block {
  static inline std::atomic<int> destroyed{0};
  static inline std::atomic<std::uint64_t> seen_at_destruction{0};
  std::atomic<std::uint64_t> writes{0};
  std::uint64_t plain[kThreads] = {};  // each thread writes its own, unsynchronized
  ~counter_block() {
    std::uint64_t sum = 0;
    for (auto v : plain) sum += v;
    seen_at_destruction = sum;
    destroyed++;
  }
};

void rc_slot_shared_by_threads(tslab_t* a, tslab_epoch_t e) {
  tslab::pool<counter_block> pool(a, e, 1);
  {
    auto root = *pool.emplace_shared();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
      tslab::rc_slot<counter_block> mine = root;
      threads.emplace_back([t, mine = std::move(mine)]() mutable {
        for (int i = 0; i < 2000; i++) {
          tslab::rc_slot<counter_block> copy = mine;
          copy.get()->plain[t]++;
          copy.get()->writes.fetch_add(1, std::memory_order_relaxed);
        }
        // `mine` dies with the thread: maybe the last owner.
      });
    }
    root.reset();
    for (auto& th : threads) th.join();
  }
  CHECK_EQ_U(counter_block::destroyed.load(), 1);
  CHECK_EQ_U(counter_block::seen_at_destruction.load(), kThreads * 2000);
  CHECK_EQ_U(pool.in_use(), 0);
}

void resource_shared_by_threads(tslab_t* a, tslab_epoch_t e) {
  tslab::epoch_resource r(a, e);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; round++) {
        std::pmr::vector<std::pmr::string> v(&r);
        for (int i = 0; i < 200; i++) v.emplace_back(40 + i % 30, static_cast<char>('a' + t));
        for (auto& s : v)
          if (s[0] != 'a' + t || tslab_epoch_of(a, s.data()) != e) wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ_U(wrong.load(), 0);
}

}  // namespace

int main() {
  tslab::instance inst;
  REQUIRE(inst);
  tslab_t* a = inst.get();
  tslab::epoch_scope scope(a);
  bounded_pool_shared_by_threads(a, scope.epoch());
  slots_freed_on_another_thread(a, scope.epoch());
  rc_slot_shared_by_threads(a, scope.epoch());
  resource_shared_by_threads(a, scope.epoch());
  tslab_stats_epoch_t st;
  REQUIRE(tslab_stats_epoch(a, scope.epoch(), &st) == TSLAB_OK);
  CHECK_EQ_U(st.live_objects, 0);
  TEST_DONE();
}
