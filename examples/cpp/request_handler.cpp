// A C++ request handler whose standard containers live in the request's
// epoch (include/tslab.hpp).
//
// Every request opens an epoch; its parser and response builder use std::pmr
// containers on that epoch's memory resource, so all the request's memory
// sits in slabs of its own and goes back to the OS when the request ends.
// Long-lived state (the route table, open connections) lives in a session
// epoch and never shares a slab with a request. The handler checks its
// responses and the allocator's counters, and exits non-zero when either is
// wrong.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory_resource>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "example_check.h"
#include "tslab.hpp"

namespace {

using pmr_string = std::pmr::string;

// What the parser makes of a request; every member in the request's epoch.
struct request {
  explicit request(std::pmr::memory_resource* mr) : method(mr), path(mr), query(mr), headers(mr), body(mr) {}
  pmr_string method;
  std::pmr::vector<pmr_string> path;
  std::pmr::map<pmr_string, pmr_string> query;
  std::pmr::unordered_map<pmr_string, pmr_string> headers;
  pmr_string body;
};

// "GET /a/b?x=1 HTTP/1.1\r\nName: value\r\n\r\nbody"
bool parse(std::string_view raw, request& out) {
  std::size_t eol = raw.find("\r\n");
  if (eol == std::string_view::npos) return false;
  std::string_view line = raw.substr(0, eol);
  std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return false;
  out.method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view query = target.find('?') == std::string_view::npos ? "" : target.substr(target.find('?') + 1);
  target = target.substr(0, target.find('?'));
  for (std::size_t at = 1; at <= target.size();) {
    std::size_t next = std::min(target.find('/', at), target.size());
    if (next > at) out.path.emplace_back(target.substr(at, next - at));
    at = next + 1;
  }
  while (!query.empty()) {
    std::string_view pair = query.substr(0, query.find('&'));
    std::size_t eq = pair.find('=');
    out.query.emplace(pair.substr(0, eq), eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    query = pair.size() == query.size() ? "" : query.substr(pair.size() + 1);
  }
  std::string_view rest = raw.substr(eol + 2);
  for (;;) {
    eol = rest.find("\r\n");
    if (eol == std::string_view::npos) return false;
    if (eol == 0) break;
    std::string_view h = rest.substr(0, eol);
    std::size_t colon = h.find(':');
    if (colon == std::string_view::npos) return false;
    out.headers.emplace(h.substr(0, colon), h.substr(colon + 2));
    rest = rest.substr(eol + 2);
  }
  out.body = rest.substr(2);
  return true;
}

struct connection {
  std::uint64_t id;
  std::uint32_t requests;
};

class server {
 public:
  explicit server(tslab_t* a)
      : a_(a),
        session_(a, tslab_epoch_current(a)),
        routes_(&session_),
        connections_(a, session_.epoch(), 4) {
    routes_.emplace("users", "user");
    routes_.emplace("orders", "order");
    routes_.emplace("health", "ok");
  }

  tslab::pool<connection>& connections() { return connections_; }
  tslab_epoch_t session_epoch() const { return session_.epoch(); }

  // Handle one request; the response outlives the request, so it is
  // returned as a std::string (malloc), copied out of the request's epoch.
  std::string handle(connection& conn, std::string_view raw) {
    tslab::epoch_scope epoch(a_);
    EXPECT(epoch, "open a request epoch: %s", tslab_strerror(tslab_last_error()));
    tslab_epoch_set_label(a_, epoch.epoch(), "request");
    std::string response;
    {
      request req(&epoch.resource());
      pmr_string out(&epoch.resource());
      if (!parse(raw, req) || req.path.empty()) {
        out = "400 bad request";
      } else if (auto route = routes_.find(req.path[0]); route == routes_.end()) {
        out = "404 " + std::string(req.path[0]);
      } else {
        out = "200 ";
        out += route->second;
        for (std::size_t i = 1; i < req.path.size(); i++) (out += ' ') += req.path[i];
        for (auto& [k, v] : req.query) ((out += ' ') += k) += "=" + std::string(v);
        if (auto trace = req.headers.find("X-Trace"); trace != req.headers.end()) (out += " trace:") += trace->second;
        if (!req.body.empty()) (out += " body:") += std::to_string(req.body.size());
      }
      if (!req.path.empty())
        EXPECT(tslab_epoch_of(a_, req.path.data()) == epoch.epoch(), "the parsed path is in the request's epoch");
      conn.requests++;
      response.assign(out.data(), out.size());
    }
    // The containers are gone: they gave every block back to the epoch.
    tslab_stats_epoch_t st;
    EXPECT(tslab_stats_epoch(a_, epoch.epoch(), &st) == TSLAB_OK, "epoch stats");
    EXPECT(st.live_objects == 0, "request left %llu objects", (unsigned long long)st.live_objects);
    requests_allocations_ += st.allocations_total;
    return response;
  }

  std::uint64_t request_allocations() const { return requests_allocations_; }

 private:
  tslab_t* a_;
  tslab::epoch_resource session_;  // memory that lives as long as the server
  std::pmr::unordered_map<pmr_string, pmr_string> routes_;
  tslab::pool<connection> connections_;  // at most 4 open connections
  std::uint64_t requests_allocations_ = 0;
};

std::string make_request(int i) {
  std::string body(i % 3 == 0 ? 0 : 100 + i, 'x');
  std::string r = "GET /" + std::string(i % 5 == 4 ? "nowhere" : i % 2 ? "users" : "orders") + "/" +
                  std::to_string(i) + "/details?limit=" + std::to_string(i % 7) + "&sort=descending-by-date HTTP/1.1\r\n";
  r += "Host: example.test\r\nX-Trace: trace-" + std::to_string(i * 7919) + "\r\n";
  for (int h = 0; h < 12; h++) r += "X-Extra-Header-" + std::to_string(h) + ": some longer header value here\r\n";
  return r + "\r\n" + body;
}

std::string expected_response(int i) {
  if (i % 5 == 4) return "404 nowhere";
  std::string s = std::string("200 ") + (i % 2 ? "user" : "order") + " " + std::to_string(i) + " details limit=" +
                  std::to_string(i % 7) + " sort=descending-by-date trace:trace-" + std::to_string(i * 7919);
  if (i % 3 != 0) s += " body:" + std::to_string(100 + i);
  return s;
}

}  // namespace

int main() {
  tslab::instance inst;
  EXPECT(inst, "create: %s", tslab_strerror(tslab_last_error()));
  tslab_t* a = inst.get();
  server srv(a);
  tslab_stats_epoch_t session_before;
  EXPECT(tslab_stats_epoch(a, srv.session_epoch(), &session_before) == TSLAB_OK, "session stats");

  // Four connections fit; the fifth is refused until one closes.
  std::vector<tslab::slot<connection>> open;
  for (std::uint64_t id = 0; id < 4; id++) {
    auto c = srv.connections().emplace(connection{id, 0});
    EXPECT(c, "connection %llu: %s", (unsigned long long)id, c.message());
    open.push_back(std::move(*c));
  }
  auto refused = srv.connections().emplace(connection{4, 0});
  EXPECT(!refused && refused.status() == TSLAB_ERR_LIMIT, "a fifth connection is refused");
  std::printf("fifth connection: %s\n", refused.message());

  const int kRequests = 400;
  for (int i = 0; i < kRequests; i++) {
    connection* conn = srv.connections().get(open[i % open.size()]);
    std::string response = srv.handle(*conn, make_request(i));
    EXPECT(response == expected_response(i), "request %d: got \"%s\"", i, response.c_str());
  }
  std::string bad = srv.handle(*srv.connections().get(open[0]), "garbage");
  EXPECT(bad == "400 bad request", "garbage is refused");

  // Every connection served its share; close them.
  for (auto& c : open) {
    auto closed = srv.connections().take(std::move(c));
    EXPECT(closed && closed->requests >= kRequests / 4, "connection served its requests");
  }
  EXPECT(srv.connections().in_use() == 0, "all connections closed");

  // The requests never touched the session's slabs, and each request epoch
  // was counted under its label.
  tslab_stats_epoch_t session_after;
  EXPECT(tslab_stats_epoch(a, srv.session_epoch(), &session_after) == TSLAB_OK, "session stats");
  EXPECT(session_after.live_objects == session_before.live_objects, "session holds %llu objects, had %llu",
         (unsigned long long)session_after.live_objects, (unsigned long long)session_before.live_objects);
  tslab_stats_label_t labels[TSLAB_LABELS_MAX];
  std::size_t n = tslab_stats_labels(a, labels, TSLAB_LABELS_MAX);
  std::uint64_t request_epochs = 0;
  for (std::size_t i = 0; i < n; i++)
    if (std::strcmp(labels[i].label, "request") == 0) request_epochs = labels[i].epochs_total;
  EXPECT(request_epochs == kRequests + 1, "%llu request epochs", (unsigned long long)request_epochs);
  EXPECT(srv.request_allocations() >= 20 * kRequests, "the requests' containers allocated in their epochs");
  std::printf("%d requests, %llu allocations in request epochs (%.1f per request), all released\n", kRequests + 1,
              (unsigned long long)srv.request_allocations(),
              (double)srv.request_allocations() / (kRequests + 1));
  return 0;
}
