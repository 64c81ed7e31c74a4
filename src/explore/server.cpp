#include "explore/server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <httplib.h>
#include <map>
#include <chrono>
#include <mutex>
#include <thread>

#include "data/utf8.h"
#include "train/snapshots.h"
#include "explore/ablation.h"
#include "explore/analysis.h"
#include "explore/head_steps.h"
#include "explore/lens.h"
#include "explore/timeline.h"
#include "explore/page.h"

using nlohmann::json;

namespace {

// Bytes of a request body: enough for the kMaxScoredChars characters /api/score documents in any encoding (4 UTF-8
// bytes each, percent-encoded 3 bytes a byte: 768 KiB) and the other parameters. At 64 KiB a form-encoded text hit
// the cap long before 65,536 characters (at 21,845 of 3 bytes each).
constexpr size_t kMaxBody = 1 << 20;
constexpr size_t kKeptModels = 3;       // checkpoints kept loaded at once
constexpr size_t kKeptFailures = 64;    // files remembered as not loadable (until they change)
constexpr int kListenBacklog = 256;     // connections waiting to be accepted (see bind)
constexpr size_t kMaxConnections = 256; // connections answered at once (a thread each); more wait for one to close
constexpr int kMaxScoredChars = 65536;  // characters /api/score reads
constexpr int kReadTimeoutSeconds = 5;  // a connection silent this long is closed (between requests, or mid-request)
constexpr size_t kKeptTabs = 1024;      // pages whose latest refresh is remembered (then forgotten all at once)
constexpr auto kHoldAtMost = std::chrono::milliseconds(20);  // a long computation lets others in this often

// A checkpoint name the folder does not list (404), a listed file that cannot be read now because it is being
// written (409: try again), and one that is not a checkpoint the explorer can load however often it is asked (422:
// what is wrong with it, no advice to try again).
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Unreadable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A file that failed to load and changed this recently (its modification time) may be a copy still being written.
constexpr long long kWritingNs = 2000000000LL;
// A page's refresh that a newer one from the same page has replaced before it was computed (HTTP 409): the page
// has stopped waiting for it (it aborts the fetch), so the model is not run for it.
struct Superseded : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A listed file too large to load (HTTP 500: trying again will not help).
struct TooLarge : std::runtime_error {
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
    add_snapshots(out);
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
      return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.name < b.name;
    });
    return out;
  }

  const std::string& folder() const { return folder_; }
  const std::string& default_name() const { return default_name_; }

  // A run's snapshots (./train --snapshot-every, train/snapshots.h) are checkpoints of the folder too, listed as
  // "snapshots/step-00000200.safetensors": only names of that exact form, so nothing else under snapshots/ opens.
  void add_snapshots(std::vector<Entry>& out) const {
    const std::string snapshots = snapshot_folder(folder_);
    for (int step : snapshot_steps(snapshots)) {
      FileStamp s;
      if (stamp_of(snapshots + "/" + snapshot_name(step), s))
        out.push_back({"snapshots/" + snapshot_name(step), (long long)s.size, s.mtime_ns});
    }
  }

  // The model of checkpoint `name` ("" = the default), as the file is now. Only a name list() returns is opened.
  // Shared: a masked LM's long score lets other requests in between its batches (see /api/score), and one of them
  // may evict the model from the shelf meanwhile. `lock`, when given, is the caller's hold on the models' mutex: it
  // is released while a file is read and parsed (load() touches nothing shared), so a large or slow checkpoint
  // never holds up the requests for models already on the shelf.
  std::shared_ptr<ExploredModel> get(std::string name, std::unique_lock<std::mutex>* lock = nullptr) {
    if (name.empty()) name = default_name_;
    const std::vector<Entry> entries = list();
    if (std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; }))
      throw NotFound("no checkpoint named '" + escape_for_message(name) +
                     "' in the served folder (GET /api/checkpoints lists them)");
    const std::string path = folder_ + "/" + name;
    auto it = kept_.find(name);
    FileStamp before;
    if (!stamp_of(path, before)) throw NotFound(escape_for_message(name) + " is gone from the served folder");
    if (it != kept_.end() && it->second.stamp == before) {
      it->second.used = ++clock_;
      return it->second.model;
    }
    if (it != kept_.end()) kept_.erase(it);  // changed on disk: never serve the old weights under its name
    // A file replaced while we read it is read again once; one that keeps changing is refused for now. One that
    // fails to load is being written if it changed meanwhile or moments before, and invalid if it did not.
    for (int attempt = 0; attempt < 2; attempt++) {
      std::shared_ptr<ExploredModel> model;
      std::string invalid;
      {
        Unlocked outside(lock);
        try {
          model = load(name, path, before);
        } catch (const Invalid& e) {
          invalid = e.what();
        }
      }
      FileStamp after;
      if (!stamp_of(path, after)) throw NotFound(escape_for_message(name) + " is gone from the served folder");
      if (!invalid.empty() && after == before) {
        if (!changed_lately(after)) throw Invalid(invalid);
        throw Unreadable(escape_for_message(name) + " cannot be read now: it changed moments ago and may be being "
                         "written; try again (" + invalid + ")");
      }
      if (after == before) {
        evict_to(kKeptModels - 1);
        Kept& k = kept_[name];
        k = {before, std::move(model), ++clock_};
        return k.model;
      }
      before = after;
    }
    throw Unreadable(escape_for_message(name) + " kept changing while it was read; try again once it is written");
  }

 private:
  // Releases the caller's lock for its scope (none given: nothing to release), and takes it again however the
  // scope ends.
  struct Unlocked {
    std::unique_lock<std::mutex>* lock;
    explicit Unlocked(std::unique_lock<std::mutex>* l) : lock(l) {
      if (lock) lock->unlock();
    }
    ~Unlocked() {
      if (lock) lock->lock();
    }
  };
  static bool changed_lately(const FileStamp& stamp) {
    const long long now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
    return now - stamp.mtime_ns < kWritingNs;
  }
  // Loads one listed file; what cannot be loaded says why (Invalid: get() tells a file being written from one that
  // is not a checkpoint). A file that does not open (no permission) or is larger than this machine's memory would
  // not be loaded by trying again. One file is loaded at a time, however many requests ask: each load may take
  // gigabytes while it parses (a legal but huge header), and the models already on the shelf are served meanwhile.
  // A file that failed is not parsed again until it changes: the requests that queued for it get its message.
  static std::unique_ptr<ExploredModel> load(const std::string& name, const std::string& path, const FileStamp& stamp) {
    static std::mutex one_loader;
    static std::map<std::string, std::pair<FileStamp, std::string>> failed;  // by path; guarded by one_loader
    std::lock_guard<std::mutex> alone(one_loader);
    const auto known = failed.find(path);
    if (known != failed.end() && known->second.first == stamp) throw Invalid(known->second.second);
    const std::string shown = escape_for_message(name);
    if (FILE* f = std::fopen(path.c_str(), "rb")) std::fclose(f);
    else throw Unreadable(shown + " cannot be opened: " + std::strerror(errno));
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const long long memory = pages > 0 && page > 0 ? (long long)pages * page : -1;
    const std::string size = std::to_string((long long)stamp.size) + " bytes";
    if (memory > 0 && (long long)stamp.size > memory)
      throw TooLarge(shown + " is " + size + ", more than this machine's memory (" + std::to_string(memory) +
                     " bytes): it cannot be a checkpoint the explorer can load");
    try {
      return std::make_unique<ExploredModel>(load_checkpoint(path));
    } catch (const std::bad_alloc&) {
      throw TooLarge(shown + " (" + size + ") does not fit in the memory left to load it");
    } catch (const std::exception& e) {
      const std::string why = shown + " cannot be loaded: " + e.what();
      if (failed.size() >= kKeptFailures) failed.clear();
      failed[path] = {stamp, why};
      throw Invalid(why);
    }
  }

  struct Kept {
    FileStamp stamp;
    std::shared_ptr<ExploredModel> model;
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

// A request's parameters (query string and form body), read strictly: a number must be all number.
class Params {
 public:
  explicit Params(httplib::Params values) : values_(std::move(values)) {}
  bool has(const char* name) const { return values_.count(name) > 0; }
  std::string text(const char* name, const std::string& fallback = "") const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  long long integer(const char* name, long long fallback, long long lo, long long hi) const {
    if (!has(name)) return fallback;
    const std::string s = text(name);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || std::isspace((unsigned char)s[0]) || end != s.c_str() + s.size() || errno || v < lo || v > hi)
      throw BadRequest(std::string(name) + " must be a whole number from " + std::to_string(lo) + " to " +
                       std::to_string(hi) + " (got '" + escape_for_message(s) + "')");
    return v;
  }
  double number(const char* name, double fallback, double lo, double hi, bool lo_open = false) const {
    if (!has(name)) return fallback;
    const std::string s = text(name);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || std::isspace((unsigned char)s[0]) || end != s.c_str() + s.size() || !std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
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
  httplib::Params values_;
};

// A POST's body, read through a receiver that stops at kMaxBody bytes whatever the framing: cpp-httplib 0.11 caps
// only a body with a Content-Length (set_payload_max_length); a chunked one (or a compressed one, which it inflates)
// it would read to the end, and a form body it caps at 8,192 bytes itself. So the server reads every POST here.
// false: the body was longer than kMaxBody (or the connection broke).
bool read_body(const httplib::ContentReader& reader, std::string& body, bool& too_long) {
  too_long = false;
  return reader([&](const char* data, size_t n) {
    if (body.size() + n > kMaxBody) return !(too_long = true);
    body.append(data, n);
    return true;
  });
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// An answer sent as it is. cpp-httplib compresses a body (Brotli at its slowest setting) for every client that
// accepts it: on loopback that cost 24.8 s for a 1000-character attention answer that takes 0.75 s to send plain.
// A body given by a content provider of known length it leaves alone.
void send_plain(httplib::Response& res, std::string body, const char* type) {
  auto shared = std::make_shared<std::string>(std::move(body));
  res.set_content_provider(shared->size(), type, [shared](size_t offset, size_t length, httplib::DataSink& sink) {
    return sink.write(shared->data() + offset, length);
  });
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  send_plain(res, dump(body), "application/json");
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

namespace {

// The connections' threads: one per open connection, up to kMaxConnections, started when every thread is busy
// and kept for the next connection. cpp-httplib's default pool has 8 threads, and a connection keeps its thread
// while it waits for bytes, so 8 clients sending a header byte every few seconds held the whole server; here they
// hold 8 of kMaxConnections threads, each asleep in poll(), and every other request gets a thread of its own.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max) : max_(max) {}
  void enqueue(std::function<void()> job) override {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    if (jobs_.size() > idle_ && threads_.size() < max_) threads_.emplace_back([this] { work(); });
    else wake_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      idle_++;
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      idle_--;
      if (jobs_.empty()) return;  // stopping, and nothing left to answer
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }
  const size_t max_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

// The Host header's name without its port ("127.0.0.1:8000" → "127.0.0.1", "[::1]:8000" → "[::1]").
std::string host_name(const std::string& host) {
  if (!host.empty() && host[0] == '[') return host.substr(0, host.find(']') + 1);
  if (std::count(host.begin(), host.end(), ':') == 1) return host.substr(0, host.find(':'));
  return host;
}

}  // namespace

struct ExploreServer::Impl {
  // An endpoint's computation, called holding `lock` on model_mutex (which it may release between steps).
  using Handler = std::function<json(const Params&, std::unique_lock<std::mutex>& lock)>;
  ServeOptions options;
  Shelf shelf;
  httplib::Server http;
  std::mutex model_mutex;  // every use of a model (and of the shelf) holds it; Shelf::get lets go while it parses a file
  std::map<std::string, Handler> apis;
  std::mutex tabs_mutex;
  std::map<std::string, long long> latest_refresh;  // a page's `tab` → the highest `seq` of its refreshes so far
  int port = 0;
  socket_t listening = INVALID_SOCKET;  // the socket bind() made, while it is being made

  Impl(const std::string& folder, const std::string& default_name, const ServeOptions& o)
      : options(o), shelf(folder, default_name) {}

  // An API endpoint: the handler's JSON with 200, or the error's status and message.
  void api(const char* path, Handler handler) { apis[path] = std::move(handler); }
  void answer(const std::string& path, const Params& p, httplib::Response& res) {
    if (path == "/api/generate") return generate(p, res);
    const auto it = apis.find(path);
    if (it == apis.end()) return send_error(res, 404, "no such page or endpoint");
    try {
      note_refresh(p);  // before waiting for the model: a newer refresh supersedes those still waiting
      std::unique_lock<std::mutex> lock(model_mutex);
      send_json(res, 200, it->second(p, lock));
    } catch (const BadRequest& e) {
      send_error(res, 400, e.what());
    } catch (const Superseded& e) {
      send_error(res, 409, e.what());
    } catch (const NotFound& e) {
      send_error(res, 404, e.what());
    } catch (const Unreadable& e) {
      send_error(res, 409, e.what());
    } catch (const Invalid& e) {
      send_error(res, 422, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    }
  }

  // The request's model, held for the handler (the shelf may drop it while another request loads a file).
  std::shared_ptr<ExploredModel> model_of(const Params& p, std::unique_lock<std::mutex>& lock) {
    return shelf.get(p.text("ckpt"), &lock);
  }
  std::vector<int> text_ids(ExploredModel& m, const Params& p, int min_chars, char32_t blank = 0) {
    return request_ids(m, p.text("text"), "text", min_chars, m.block_size(), blank);
  }

  // The text a score reads: a next-token model's any length (sliding windows); a masked LM's one block (one
  // forward per character, each over the whole text).
  std::vector<int> scored_ids(ExploredModel& m, const Params& p) {
    return request_ids(m, p.text("text"), "text", 1, m.mask_token >= 0 ? m.block_size() : kMaxScoredChars);
  }
  // What a long score calls between its forwards (a masked LM's batches: at T = 1000 it takes minutes; a long
  // text's windows): the other tabs' requests get the model meanwhile, at least every kHoldAtMost. A page's
  // refresh (`tab` and `seq` given) is given up there as soon as a newer one from the same page has arrived.
  std::function<void()> let_others_in(std::unique_lock<std::mutex>& lock, const Params& p) {
    auto since = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    return [this, &lock, &p, since] {
      throw_if_superseded(p);
      if (std::chrono::steady_clock::now() - *since < kHoldAtMost) return;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // long enough for a waiting request to take it
      lock.lock();
      *since = std::chrono::steady_clock::now();
      throw_if_superseded(p);
    };
  }
  // The page numbers its refreshes: `tab` (random, one per page) and `seq` (rising). Remembers the newest.
  void note_refresh(const Params& p) {
    if (!p.has("tab")) return;
    const long long seq = p.integer("seq", 0, 0, 1LL << 53);
    std::lock_guard<std::mutex> guard(tabs_mutex);
    if (latest_refresh.size() >= kKeptTabs && !latest_refresh.count(p.text("tab"))) latest_refresh.clear();
    long long& latest = latest_refresh[p.text("tab")];
    latest = std::max(latest, seq);
  }
  void throw_if_superseded(const Params& p) {
    if (!p.has("tab")) return;
    const long long seq = p.integer("seq", 0, 0, 1LL << 53);
    std::lock_guard<std::mutex> guard(tabs_mutex);
    const auto it = latest_refresh.find(p.text("tab"));
    if (it != latest_refresh.end() && it->second > seq)
      throw Superseded("refresh " + std::to_string(seq) + " was superseded by this page's refresh " +
                       std::to_string(it->second) + " before it was computed");
  }

  // Why a request is refused before its body is read ("" = it is not): see the header's Safety.
  std::string refusal(const httplib::Request& req, int& status) const;
  void routes();
  void interpretability_routes();
  void generate(const Params& p, httplib::Response& res);
};

std::string ExploreServer::Impl::refusal(const httplib::Request& req, int& status) const {
  status = 403;
  const std::string host = req.get_header_value("Host");
  // Only loopback Host names when serving on loopback (DNS rebinding).
  if (is_loopback_host(options.host) && !is_loopback_host(host_name(host)))
    return "this server answers only requests addressed to a loopback address";
  const bool is_api = req.path.rfind("/api/", 0) == 0;
  // A browser names where a request comes from: Sec-Fetch-Site on every request, Origin on every POST (and the
  // Referer, unless a policy removes it). Only the page itself may call the API; a page elsewhere can still send
  // a "simple" cross-origin POST or load an API address as an image, and the model would compute it.
  const std::string site = req.get_header_value("Sec-Fetch-Site");
  if (is_api && (site == "cross-site" || site == "same-site"))
    return "this API answers only its own page (the request came from another site)";
  if (req.method == "POST") {
    const std::string self = "http://" + host;
    const std::string origin = req.get_header_value("Origin"), referer = req.get_header_value("Referer");
    if (req.has_header("Origin") && origin != self)
      return "this API answers only its own page (Origin '" + origin + "', not " + self + ")";
    if (!req.has_header("Origin") && req.has_header("Referer") && referer.rfind(self + "/", 0) != 0)
      return "this API answers only its own page (Referer '" + referer + "')";
  }
  status = 405;
  if (req.method != "GET" && req.method != "HEAD" && req.method != "POST")
    return "this server answers GET and POST only (got " + req.method + ")";
  status = 415;
  const std::string type = req.get_header_value("Content-Type");
  if (req.method == "POST" && !type.empty() && type.rfind("application/x-www-form-urlencoded", 0) != 0)
    return "send the parameters as a query string or a form body (application/x-www-form-urlencoded), not " + type;
  return "";
}

void ExploreServer::Impl::routes() {
  http.set_payload_max_length(kMaxBody);
  http.set_tcp_nodelay(true);  // else each small answer on a kept-alive connection waits ~40 ms for an ACK (Nagle)
  http.set_read_timeout(kReadTimeoutSeconds, 0);
  http.set_keep_alive_timeout(kReadTimeoutSeconds);
  http.new_task_queue = [] { return new ConnectionThreads(kMaxConnections); };
  // Runs after the request line and headers are read and before any byte of the body.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    int status = 0;
    const std::string why = refusal(req, status);
    if (why.empty()) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, status, why);
    return httplib::Server::HandlerResponse::Handled;
  });
  // cpp-httplib's own refusals (a malformed request, a body above the cap) come without a body: give them one.
  // Ours all have a Content-Type (send_plain), though their bytes are not in res.body.
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.has_header("Content-Type"))
      send_error(res, res.status, res.status == 404 ? "no such page or endpoint" : "HTTP " + std::to_string(res.status));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error");
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    // Everything the page needs is in it: no script, style or font from anywhere else, no frames. The referrer
    // policy sends the page's own address (and so its Origin on a POST) to itself only.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                   "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "same-origin");
    res.set_header("Cache-Control", "no-store");
    send_plain(res, kExplorePage, "text/html; charset=utf-8");
  });
  http.Get("/api/.*", [this](const httplib::Request& req, httplib::Response& res) {
    answer(req.path, Params(req.params), res);
  });
  // Every POST, whatever its address, so that no body is ever read by cpp-httplib itself (see read_body).
  http.Post(".*", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    if (req.path.rfind("/api/", 0) != 0) return send_error(res, 404, "no such page or endpoint");
    std::string body;
    bool too_long = false;
    // cpp-httplib refuses a Content-Length above kMaxBody itself, before our receiver sees a byte (status 413).
    if (!read_body(reader, body, too_long) || res.status == 413)
      return too_long || res.status == 413
                 ? send_error(res, 413, "the request body is longer than " + std::to_string(kMaxBody) + " bytes")
                 : send_error(res, 400, "the request body could not be read");
    httplib::Params params = req.params;  // the query string's, then the form's
    httplib::detail::parse_query_text(body, params);
    answer(req.path, Params(std::move(params)), res);
  });

  api("/api/checkpoints", [this](const Params&, std::unique_lock<std::mutex>&) {
    json list = json::array();
    for (const Shelf::Entry& e : shelf.list())
      list.push_back({{"name", e.name}, {"bytes", e.bytes}, {"modified_unix", e.mtime_ns / 1000000000LL}});
    return json{{"folder", shelf.folder()}, {"default", shelf.default_name()}, {"checkpoints", list}};
  });
  api("/api/model", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    json j = model_summary(*model_of(p, lock));
    j["ckpt"] = p.text("ckpt", shelf.default_name());
    return j;
  });
  api("/api/score", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    return score_text_json(*held, scored_ids(*held, p), let_others_in(lock, p), p.integer("top_from", 0, 0, LONG_MAX),
                           p.integer("top_to", LONG_MAX, 0, LONG_MAX));
  });
  // The page's refresh: score, attention and next in one request (one forward for a text that fits the block).
  api("/api/refresh", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    throw_if_superseded(p);  // a newer refresh of the same page arrived while this one waited for the model
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    const std::vector<int> ids = scored_ids(*held, p);
    const int n = (int)ids.size();
    return refresh_json(*held, ids, (int)p.integer("position", n - 1, 0, n - 1), (int)p.integer("layer", 0, -1, 1 << 20),
                        (int)p.integer("head", 0, -1, 1 << 20), p.integer("map", 0, 0, 1) == 1, p.sampling(),
                        let_others_in(lock, p), p.integer("top_from", 0, 0, LONG_MAX),
                        p.integer("top_to", LONG_MAX, 0, LONG_MAX));
  });
  api("/api/attention", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    ExploredModel& m = *held;
    const std::vector<int> ids = text_ids(m, p, 1);
    const int n = (int)ids.size();
    return attention_at_json(m, ids, (int)p.integer("position", n - 1, 0, n - 1), (int)p.integer("layer", 0, -1, 1 << 20),
                             (int)p.integer("head", 0, -1, 1 << 20), p.integer("map", 0, 0, 1) == 1);
  });
  api("/api/next", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    ExploredModel& m = *held;
    return next_json(m, text_ids(m, p, 1), p.sampling());
  });
  api("/api/fill", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    ExploredModel& m = *held;
    std::u32string blank;
    try {
      blank = utf8_decode(p.text("blank", "_"), "blank");
    } catch (const std::runtime_error& e) {
      throw BadRequest(e.what());
    }
    if (blank.size() != 1) throw BadRequest("blank must be exactly one character");
    return fill_json(m, text_ids(m, p, 1, blank[0]));
  });
  interpretability_routes();
}

// Explorer III (docs/explore.md): the run's timeline over its snapshots, heads knocked out, the logit lens.
//   GET /api/timeline   run → metrics.csv's losses and each snapshot's head scores (explore/timeline.h)
//   GET /api/ablate     ckpt, text, heads (L.H,…), how (zero|mean) → surprisal with those heads out and its change
//   GET /api/lens       ckpt, text, pos → each layer's prediction at pos and each head's and MLP's share of the logit
//   GET /api/head       ckpt, text, position, layer, head → one head's computation there, step by step
void ExploreServer::Impl::interpretability_routes() {
  api("/api/timeline", [this](const Params& p, std::unique_lock<std::mutex>&) {
    // The served folder is the run: `run` may name it (as /api/checkpoints's "folder" does) or be left out.
    const std::string run = p.text("run", "");
    if (!run.empty() && run != "." && run != shelf.folder())
      throw BadRequest("run: this server serves one run folder, '" + escape_for_message(shelf.folder()) +
                       "' (got '" + escape_for_message(run) + "'); leave run out or name that folder");
    json j = timeline_json(shelf.folder());
    j["run"] = shelf.folder();
    if (!p.has("step")) return j;
    // One snapshot's entry: `step` must be one the run kept.
    const long long step = p.integer("step", 0, 0, 1LL << 31);
    std::string kept;
    for (const json& s : j["snapshots"]) {
      if (s["step"].get<long long>() == step) {
        j["snapshots"] = json::array({s});
        return j;
      }
      kept += (kept.empty() ? "" : ", ") + s["step"].dump();
    }
    throw BadRequest("step " + std::to_string(step) + ": the run kept no snapshot at that step (" +
                     (kept.empty() ? std::string("it has none") : "it has " + kept) + ")");
  });
  api("/api/ablate", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    ExploredModel& m = *held;
    const std::vector<HeadRef> heads = parse_heads(p.text("heads"), m.model().config.n_layer, m.model().config.n_head);
    const AblateHow how = parse_ablate_how(p.text("how", "zero"));
    return ablate_json(m, scored_ids(m, p), heads, how);
  });
  api("/api/lens", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    ExploredModel& m = *held;
    const std::vector<int> ids = text_ids(m, p, 1);
    const int n = (int)ids.size();
    return lens_json(m, ids, (int)p.integer("pos", n - 1, 0, n - 1));
  });
  api("/api/head", [this](const Params& p, std::unique_lock<std::mutex>& lock) {
    const std::shared_ptr<ExploredModel> held = model_of(p, lock);
    ExploredModel& m = *held;
    const std::vector<int> ids = text_ids(m, p, 1);
    const int n = (int)ids.size();
    return head_steps_json(m, ids, (int)p.integer("position", n - 1, 0, n - 1), (int)p.integer("layer", 0, 0, 1 << 20),
                           (int)p.integer("head", 0, 0, 1 << 20));
  });
}

// Checked first (HTTP 400 for bad input), then streamed: one JSON line per token, {"token": "e"}, and a last line
// {"done": true, "tokens": n} or {"error": "..."}. Closing the connection stops the generation.
void ExploreServer::Impl::generate(const Params& p, httplib::Response& res) {
  std::string name;
  SamplingOptions sampling;
  int n = 0;
  uint64_t seed = 1;
  try {
    std::unique_lock<std::mutex> lock(model_mutex);
    text_ids(*model_of(p, lock), p, 0);
    name = p.text("ckpt");
    sampling = p.sampling();
    n = (int)p.integer("n", 200, 0, options.max_generate);
    seed = (uint64_t)p.integer("seed", 1, 0, (1LL << 53));
  } catch (const BadRequest& e) {
    return send_error(res, 400, e.what());
  } catch (const NotFound& e) {
    return send_error(res, 404, e.what());
  } catch (const Unreadable& e) {
    return send_error(res, 409, e.what());
  } catch (const Invalid& e) {
    return send_error(res, 422, e.what());
  } catch (const std::exception& e) {
    return send_error(res, 500, e.what());
  }
  const std::string text = p.text("text");
  res.set_header("Cache-Control", "no-store");
  res.set_chunked_content_provider(
      "application/x-ndjson", [this, name, text, sampling, n, seed](size_t, httplib::DataSink& sink) {
        std::unique_lock<std::mutex> lock(model_mutex);
        json last;
        try {
          const std::shared_ptr<ExploredModel> held = shelf.get(name, &lock);  // read again if the file changed
          ExploredModel& m = *held;
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
  // A mistyped folder (out/tinny) was reported as a file name that "does not end in .safetensors".
  struct stat st;
  if (::stat(ckpt.c_str(), &st) != 0)
    throw std::runtime_error(ckpt + ": no such folder or file (--ckpt takes a run folder or a .safetensors file)");
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
  // cpp-httplib's default socket options add SO_REUSEPORT, with which every server on this machine binds the same
  // port and the kernel shares the connections out among them (one page would then talk to several models).
  // SO_REUSEADDR alone lets a restarted server take its port back from connections still in TIME_WAIT, no more.
  impl_->http.set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
    impl_->listening = sock;
  });
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : impl_->http.bind_to_port(host, port) ? port : -1;
  if (bound <= 0)
    throw std::runtime_error("cannot listen on " + host + ":" + (port ? std::to_string(port) : "any port") +
                             " (in use, or not an address of this machine)");
  // The queue of connections not yet accepted: Debian's cpp-httplib is built with a backlog of 5, so 32 clients at
  // once had some of their connections dropped (3 to 8 of 32 measured, with every answer a quick error). listen()
  // again on the bound socket sets a longer one (the kernel caps it at net.core.somaxconn).
  ::listen(impl_->listening, kListenBacklog);
  return impl_->port = bound;
}

// Does another program hold `port` on 127.0.0.1 or on ::1? A server on one and a server on the other may bind the
// same port number, and "localhost" then reaches either (a browser tries ::1 first): the first free port is
// chosen free on both. A probe that cannot bind for another reason (no IPv6 here) finds nothing.
static bool loopback_port_taken(int port) {
  const int v4 = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool taken4 = v4 >= 0 && ::bind(v4, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EADDRINUSE;
  if (v4 >= 0) ::close(v4);
  const int v6 = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 b{};
  b.sin6_family = AF_INET6;
  b.sin6_port = htons((uint16_t)port);
  b.sin6_addr = in6addr_loopback;
  const bool taken6 = v6 >= 0 && ::bind(v6, reinterpret_cast<sockaddr*>(&b), sizeof b) != 0 && errno == EADDRINUSE;
  if (v6 >= 0) ::close(v6);
  return taken4 || taken6;
}

int ExploreServer::bind_first_free(int first, int count) {
  const bool loopback = is_loopback_host(impl_->options.host);
  for (int port = first; port < first + count && port <= 65535; port++) {
    if (loopback && loopback_port_taken(port)) continue;
    try {
      return bind(port);
    } catch (const std::runtime_error&) {
    }
  }
  return bind(0);
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
