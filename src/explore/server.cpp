#include "explore/server.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <httplib.h>
#include <map>
#include <mutex>

#include "data/utf8.h"
#include "explore/analysis.h"
#include "explore/page.h"

using nlohmann::json;

namespace {

constexpr size_t kMaxBody = 64 * 1024;  // bytes of a request body
constexpr size_t kKeptModels = 3;       // checkpoints kept loaded at once

// A checkpoint name the folder does not list (404), and a listed file that cannot be read now (409).
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Unreadable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What says that a file is still the one that was loaded: a replaced file (rename) has a new inode, a rewritten one
// a new size or modification time.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  long long mtime_ns = -1;
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

bool stamp_of(const std::string& path, FileStamp& stamp) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
#ifdef __APPLE__
  const long long ns = (long long)st.st_mtimespec.tv_sec * 1000000000LL + st.st_mtimespec.tv_nsec;
#else
  const long long ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
#endif
  stamp = {st.st_dev, st.st_ino, st.st_size, ns};
  return true;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The run folder's checkpoints: every regular file "*.safetensors" directly in it (a run writes ckpt.safetensors;
// copies such as step200.safetensors sit beside it), loaded on demand and read again when the file changes.
class Shelf {
 public:
  Shelf(std::string folder, std::string default_name)
      : folder_(std::move(folder)), default_name_(std::move(default_name)) {}

  struct Entry {
    std::string name;
    long long bytes, mtime_ns;
  };

  // Newest first; the same order every time for files written in the same nanosecond (by name).
  std::vector<Entry> list() const {
    std::vector<Entry> out;
    DIR* dir = ::opendir(folder_.c_str());
    if (!dir) return out;
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      FileStamp s;
      if (name[0] != '.' && ends_with(name, ".safetensors") && stamp_of(folder_ + "/" + name, s))
        out.push_back({name, (long long)s.size, s.mtime_ns});
    }
    ::closedir(dir);
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
      return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.name < b.name;
    });
    return out;
  }

  const std::string& folder() const { return folder_; }
  const std::string& default_name() const { return default_name_; }

  // The model of checkpoint `name` ("" = the default), as the file is now. Only a name list() returns is opened.
  ExploredModel& get(std::string name) {
    if (name.empty()) name = default_name_;
    const std::vector<Entry> entries = list();
    if (std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; }))
      throw NotFound("no checkpoint named '" + name + "' in the served folder (GET /api/checkpoints lists them)");
    const std::string path = folder_ + "/" + name;
    auto it = kept_.find(name);
    FileStamp before;
    if (!stamp_of(path, before)) throw NotFound(name + " is gone from the served folder");
    if (it != kept_.end() && it->second.stamp == before) {
      it->second.used = ++clock_;
      return *it->second.model;
    }
    if (it != kept_.end()) kept_.erase(it);  // changed on disk: never serve the old weights under its name
    // A file replaced while we read it is read again once; one that keeps changing is refused for now.
    for (int attempt = 0; attempt < 2; attempt++) {
      std::unique_ptr<ExploredModel> model;
      try {
        model = std::make_unique<ExploredModel>(load_checkpoint(path));
      } catch (const std::exception& e) {
        throw Unreadable(name + " cannot be read now (it may be being written; try again): " + e.what());
      }
      FileStamp after;
      if (!stamp_of(path, after)) throw NotFound(name + " is gone from the served folder");
      if (after == before) {
        evict_to(kKeptModels - 1);
        Kept& k = kept_[name];
        k = {before, std::move(model), ++clock_};
        return *k.model;
      }
      before = after;
    }
    throw Unreadable(name + " kept changing while it was read; try again once it is written");
  }

 private:
  struct Kept {
    FileStamp stamp;
    std::unique_ptr<ExploredModel> model;
    unsigned long long used = 0;
  };
  void evict_to(size_t n) {
    while (kept_.size() > n) {
      auto oldest = std::min_element(kept_.begin(), kept_.end(),
                                     [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
      kept_.erase(oldest);
    }
  }

  std::string folder_, default_name_;
  std::map<std::string, Kept> kept_;
  unsigned long long clock_ = 0;
};

// A request's parameters (query string or form body), read strictly: a number must be all number.
class Params {
 public:
  explicit Params(const httplib::Request& req) : req_(req) {}
  std::string text(const char* name, const std::string& fallback = "") const {
    return req_.has_param(name) ? req_.get_param_value(name) : fallback;
  }
  long long integer(const char* name, long long fallback, long long lo, long long hi) const {
    if (!req_.has_param(name)) return fallback;
    const std::string s = req_.get_param_value(name);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end || errno || v < lo || v > hi)
      throw BadRequest(std::string(name) + " must be a whole number from " + std::to_string(lo) + " to " +
                       std::to_string(hi) + " (got '" + escape_for_message(s) + "')");
    return v;
  }
  double number(const char* name, double fallback, double lo, double hi, bool lo_open = false) const {
    if (!req_.has_param(name)) return fallback;
    const std::string s = req_.get_param_value(name);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end || !std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
      throw BadRequest(std::string(name) + " must be a finite number in " + (lo_open ? "(" : "[") +
                       json(lo).dump() + ", " + json(hi).dump() + "] (got '" + escape_for_message(s) + "')");
    return v;
  }
  SamplingOptions sampling() const {
    SamplingOptions o;
    o.temperature = (float)number("temperature", o.temperature, 0, 100);
    o.top_k = (int)integer("top_k", o.top_k, 0, 1 << 30);
    o.top_p = (float)number("top_p", o.top_p, 0, 1, /*lo_open=*/true);
    return o;
  }

 private:
  const httplib::Request& req_;
};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, {{"error", escape_for_message(message)}});
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') dots++;
    else if (c < '0' || c > '9') return false;
  }
  return dots == 3;
}

struct ExploreServer::Impl {
  ServeOptions options;
  Shelf shelf;
  httplib::Server http;
  std::mutex model_mutex;  // every use of a model (and of the shelf) holds it
  int port = 0;

  Impl(const std::string& folder, const std::string& default_name, const ServeOptions& o)
      : options(o), shelf(folder, default_name) {}

  // An API endpoint: the handler's JSON with 200, or the error's status and message.
  template <typename Handler>
  void api(const char* path, Handler handler) {
    auto wrapped = [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        std::lock_guard<std::mutex> lock(model_mutex);
        send_json(res, 200, handler(Params(req)));
      } catch (const BadRequest& e) {
        send_error(res, 400, e.what());
      } catch (const NotFound& e) {
        send_error(res, 404, e.what());
      } catch (const Unreadable& e) {
        send_error(res, 409, e.what());
      } catch (const std::exception& e) {
        send_error(res, 500, e.what());
      }
    };
    http.Get(path, wrapped);
    http.Post(path, wrapped);
  }

  ExploredModel& model_of(const Params& p) { return shelf.get(p.text("ckpt")); }
  std::vector<int> text_ids(ExploredModel& m, const Params& p, int min_chars, char32_t blank = 0) {
    return request_ids(m, p.text("text"), "text", min_chars, m.block_size(), blank);
  }

  void routes();
  void generate(const httplib::Request& req, httplib::Response& res);
};

void ExploreServer::Impl::routes() {
  http.set_payload_max_length(kMaxBody);
  // Only loopback Host names when serving on loopback (see the header: DNS rebinding).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!is_loopback_host(options.host)) return httplib::Server::HandlerResponse::Unhandled;
    std::string host = req.get_header_value("Host");
    if (!host.empty() && host[0] == '[') host = host.substr(0, host.find(']') + 1);
    else if (std::count(host.begin(), host.end(), ':') == 1) host = host.substr(0, host.find(':'));
    if (is_loopback_host(host)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 403, "this server answers only requests addressed to a loopback address");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      send_error(res, res.status, res.status == 404 ? "no such page or endpoint" : "HTTP " + std::to_string(res.status));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error");
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    // Everything the page needs is in it: no script, style or font from anywhere else, no frames.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                   "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
    res.set_content(kExplorePage, "text/html; charset=utf-8");
  });

  api("/api/checkpoints", [this](const Params&) {
    json list = json::array();
    for (const Shelf::Entry& e : shelf.list())
      list.push_back({{"name", e.name}, {"bytes", e.bytes}, {"modified_unix", e.mtime_ns / 1000000000LL}});
    return json{{"folder", shelf.folder()}, {"default", shelf.default_name()}, {"checkpoints", list}};
  });
  api("/api/model", [this](const Params& p) {
    json j = model_summary(model_of(p));
    j["ckpt"] = p.text("ckpt", shelf.default_name());
    return j;
  });
  api("/api/score", [this](const Params& p) {
    ExploredModel& m = model_of(p);
    return score_text_json(m, text_ids(m, p, 1));
  });
  api("/api/attention", [this](const Params& p) {
    ExploredModel& m = model_of(p);
    const std::vector<int> ids = text_ids(m, p, 1);
    const int n = (int)ids.size();
    return attention_at_json(m, ids, (int)p.integer("position", n - 1, 0, n - 1), (int)p.integer("layer", 0, -1, 1 << 20),
                             (int)p.integer("head", 0, -1, 1 << 20));
  });
  api("/api/next", [this](const Params& p) {
    ExploredModel& m = model_of(p);
    return next_json(m, text_ids(m, p, 1), p.sampling());
  });
  api("/api/fill", [this](const Params& p) {
    ExploredModel& m = model_of(p);
    std::u32string blank;
    try {
      blank = utf8_decode(p.text("blank", "_"), "blank");
    } catch (const std::runtime_error& e) {
      throw BadRequest(e.what());
    }
    if (blank.size() != 1) throw BadRequest("blank must be exactly one character");
    return fill_json(m, text_ids(m, p, 1, blank[0]));
  });
  auto generate_handler = [this](const httplib::Request& req, httplib::Response& res) { generate(req, res); };
  http.Get("/api/generate", generate_handler);
  http.Post("/api/generate", generate_handler);
}

// Checked first (HTTP 400 for bad input), then streamed: one JSON line per token, {"token": "e"}, and a last line
// {"done": true, "tokens": n} or {"error": "..."}. Closing the connection stops the generation.
void ExploreServer::Impl::generate(const httplib::Request& req, httplib::Response& res) {
  const Params p(req);
  std::string name;
  SamplingOptions sampling;
  int n = 0;
  uint64_t seed = 1;
  try {
    std::lock_guard<std::mutex> lock(model_mutex);
    ExploredModel& m = model_of(p);
    text_ids(m, p, 0);
    name = p.text("ckpt");
    sampling = p.sampling();
    n = (int)p.integer("n", 200, 0, options.max_generate);
    seed = (uint64_t)p.integer("seed", 1, 0, (1LL << 53));
  } catch (const BadRequest& e) {
    return send_error(res, 400, e.what());
  } catch (const NotFound& e) {
    return send_error(res, 404, e.what());
  } catch (const std::exception& e) {
    return send_error(res, 409, e.what());
  }
  const std::string text = p.text("text");
  res.set_header("Cache-Control", "no-store");
  res.set_chunked_content_provider(
      "application/x-ndjson", [this, name, text, sampling, n, seed](size_t, httplib::DataSink& sink) {
        std::lock_guard<std::mutex> lock(model_mutex);
        json last;
        try {
          ExploredModel& m = shelf.get(name);  // read again if the file changed since the request was checked
          const std::vector<int> ids = request_ids(m, text, "text", 0, m.block_size());
          long count = 0;
          stream_generation(m, ids, n, sampling, seed, [&](const std::string& token) {
            const std::string line = dump(json{{"token", token}}) + "\n";
            count++;
            return sink.is_writable() && sink.write(line.data(), line.size());
          });
          last = {{"done", true}, {"tokens", count}};
        } catch (const std::exception& e) {
          last = {{"error", escape_for_message(e.what())}};
        }
        const std::string line = dump(last) + "\n";
        if (sink.is_writable()) sink.write(line.data(), line.size());
        sink.done();
        return true;
      });
}

ExploreServer::ExploreServer(const std::string& ckpt, const ServeOptions& options) {
  const std::string file = resolve_checkpoint(ckpt);
  const size_t slash = file.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
  const std::string name = slash == std::string::npos ? file : file.substr(slash + 1);
  if (!ends_with(name, ".safetensors"))
    throw std::runtime_error(file + ": the explorer serves the *.safetensors files of a folder; this name does not end "
                             "in .safetensors");
  impl_ = std::make_unique<Impl>(folder, name, options);
  try {
    impl_->shelf.get(name);  // a checkpoint that cannot be read stops the program now, not at the first request
  } catch (const NotFound&) {
    throw std::runtime_error(file + ": no such checkpoint file");
  }
  impl_->routes();
}

ExploreServer::~ExploreServer() = default;

int ExploreServer::bind(int port) {
  const std::string& host = impl_->options.host;
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : impl_->http.bind_to_port(host, port) ? port : -1;
  if (bound <= 0)
    throw std::runtime_error("cannot listen on " + host + ":" + (port ? std::to_string(port) : "any port") +
                             " (in use, or not an address of this machine)");
  return impl_->port = bound;
}

void ExploreServer::run() { impl_->http.listen_after_bind(); }
void ExploreServer::stop() { impl_->http.stop(); }

std::string ExploreServer::url() const {
  const std::string& host = impl_->options.host;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(impl_->port) + "/";
}

const std::string& ExploreServer::folder() const { return impl_->shelf.folder(); }

std::vector<std::string> ExploreServer::checkpoint_names() const {
  std::vector<std::string> names;
  for (const auto& e : impl_->shelf.list()) names.push_back(e.name);
  return names;
}
