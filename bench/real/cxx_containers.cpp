// cxx-containers: a C++ program built on the standard containers, the way
// real C++ code allocates: a word index (std::unordered_map of std::string
// to std::vector), an ordered map rebuilt and pruned, a std::list of
// records shuffled between threads' work queues, std::shared_ptr graphs.
// It prints a checksum of what it computed, which must not depend on the
// allocator.
//
// Usage: cxx_containers ROUNDS
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static std::uint64_t next(std::uint64_t& s) {
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545F4914F6CDD1DULL;
}

struct Node {
  std::vector<std::shared_ptr<Node>> edges;
  std::string name;
  std::uint64_t value;
};

static std::uint64_t round_work(std::uint64_t seed) {
  std::uint64_t s = seed | 1, sum = 0;
  std::unordered_map<std::string, std::vector<std::uint32_t>> index;
  for (std::uint32_t i = 0; i < 20000; i++) {
    std::string word = "w" + std::to_string(next(s) % 5000) + std::string(next(s) % 24, 'x');
    index[word].push_back(i);
  }
  for (auto& kv : index) sum += kv.first.size() * kv.second.size() + kv.second.back();

  std::map<std::uint64_t, std::string> ordered;
  for (int i = 0; i < 20000; i++) ordered.emplace(next(s) % 100000, std::string(8 + next(s) % 100, 'o'));
  for (auto it = ordered.begin(); it != ordered.end();) it = (it->first % 3 == 0) ? ordered.erase(it) : std::next(it);
  for (auto& kv : ordered) sum += kv.first ^ kv.second.size();

  std::list<std::string> records;
  for (int i = 0; i < 10000; i++) records.emplace_back(16 + next(s) % 200, 'r');
  records.sort([](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  sum += records.front().size() + records.back().size() * 3;

  std::vector<std::shared_ptr<Node>> nodes;
  for (int i = 0; i < 5000; i++) {
    auto n = std::make_shared<Node>();
    n->name = "node" + std::to_string(i);
    n->value = next(s) % 1000;
    if (!nodes.empty())
      for (int k = 0; k < 3; k++) n->edges.push_back(nodes[next(s) % nodes.size()]);
    nodes.push_back(std::move(n));
  }
  for (auto& n : nodes)
    for (auto& e : n->edges) sum += e->value;
  return sum;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  const int threads = 2;
  std::vector<std::uint64_t> sums(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; t++)
    pool.emplace_back([t, rounds, &sums] {
      for (int r = 0; r < rounds; r++) sums[t] += round_work(static_cast<std::uint64_t>(r * 131 + t + 1));
    });
  for (auto& th : pool) th.join();
  std::uint64_t total = 0;
  for (auto v : sums) total += v;
  std::printf("cxx-containers: checksum %llu\n", static_cast<unsigned long long>(total));
  return 0;
}
