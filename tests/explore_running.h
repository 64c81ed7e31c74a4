// A local explorer (./inspect serve's server) for tests: on 127.0.0.1 and an ephemeral port, on a thread of the
// test, with a client that posts form parameters and reads the JSON answer.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "explore/server.h"
#include "program_util.h"

// A server on 127.0.0.1 and an ephemeral port, serving until the object goes away.
class Running {
 public:
  explicit Running(const std::string& ckpt, ServeOptions options = {}) : server_(ckpt, options) {
    port_ = server_.bind(0);
    thread_ = std::thread([this] { server_.run(); });
    httplib::Client probe("127.0.0.1", port_);
    for (int i = 0; i < 200 && !probe.Get("/api/checkpoints"); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~Running() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  // POST with form parameters; the status and the parsed JSON (an empty object if the body is not JSON).
  std::pair<int, nlohmann::json> post(const std::string& path, const httplib::Params& params) const {
    httplib::Client c = client();
    auto r = c.Post(path.c_str(), params);
    if (!r) return {-1, nlohmann::json::object()};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }

 private:
  ExploreServer server_;
  int port_ = 0;
  std::thread thread_;
};


// A request the server must refuse: its path and form parameters, the status it answers, and words its message holds.
struct RefusedRequest {
  std::string path;
  httplib::Params params;
  int status;
  std::string says;
};

// Every request answered with its status and a JSON {"error": …} holding its words.
inline void expect_refused(const Running& server, const std::vector<RefusedRequest>& requests) {
  for (const RefusedRequest& r : requests) {
    auto [status, j] = server.post(r.path, r.params);
    EXPECT_EQ(status, r.status) << r.path << " " << j.dump();
    ASSERT_TRUE(j.contains("error")) << r.path << " " << j.dump();
    EXPECT_CONTAINS(j["error"].get<std::string>(), r.says);
  }
}
