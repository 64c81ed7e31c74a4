// The explorer (src/explore/): the server started in-process on an ephemeral port and called with cpp-httplib's
// client. Its numbers are checked against the double-precision textbook model (surprisal, attention, the
// next-character distribution), against ./sample --score, ./inspect attention --json, ./sample's generation and
// ./sample --fill for the same text, and the sampling distribution against sample_token's draws; then the error
// answers, several clients at once, a checkpoint that changes on disk, the Host check and the page's safety rules.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "base/rng.h"
#include "data/objective.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "explore/analysis.h"
#include "explore/server.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/reference.h"

using nlohmann::json;

namespace {

// Characters of every test text; '<', '>', '&' and the quotes are what a page must never read as HTML.
const char32_t* kVocab = U"abcdefghij .<>&\"'";

ModelConfig explore_config(const Tokenizer& tok, const std::string& attention = "softmax") {
  ModelConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.block_size = 32, c.vocab_size = tok.size();
  c.attention = attention;
  return c;
}

void randomise(GPT& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.4f, 0.4f);
  for (float& p : model.params_memory()) p = dist(rng);
}

// The textbook model with the same weights and masks, run on ids: its logits (T × V) and every layer's P.
ReferenceGPT<double> reference_of(const GPT& model, const std::vector<int>& ids) {
  ReferenceGPT<double> ref(model.config, model.masks());
  ref.params = testutil::to_double(model.params_memory());
  ref.forward(ids, {}, 1, (int)ids.size());
  return ref;
}

// −log2 softmax(z)[target], in double.
double surprisal_bits(const double* z, int V, int target) {
  double max = z[0], sum = 0;
  for (int v = 1; v < V; v++) max = std::max(max, z[v]);
  for (int v = 0; v < V; v++) sum += std::exp(z[v] - max);
  return (max + std::log(sum) - z[target]) / std::log(2.0);
}

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
  std::pair<int, json> post(const std::string& path, const httplib::Params& params) const {
    httplib::Client c = client();
    auto r = c.Post(path.c_str(), params);
    if (!r) return {-1, json::object()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

 private:
  ExploreServer server_;
  int port_ = 0;
  std::thread thread_;
};

// A run folder with one random model saved as ckpt.safetensors.
struct Folder {
  progutil::TempDir dir;
  Tokenizer tok = Tokenizer::from_text(kVocab);
  std::unique_ptr<GPT> model;
  explicit Folder(const std::string& attention = "softmax", std::vector<AttentionMask> masks = {}, uint32_t seed = 5) {
    model = std::make_unique<GPT>(explore_config(tok, attention), masks);
    randomise(*model, seed);
    save_checkpoint(ckpt(), *model, tok, nullptr);
  }
  std::string ckpt() const { return dir / "ckpt.safetensors"; }
  std::vector<int> ids(const std::string& text) const { return tok.encode(utf8_decode(text, "test"), "test"); }
};

const std::string kText = "a <b> & \"c\" dea.j'i hg";  // 22 characters, block 32

}  // namespace

TEST(ExploreApi, ScoreIsTheTextbookSurprisalAndAgreesWithSampleScore) {
  Folder f;
  Running server(f.ckpt());
  auto [status, j] = server.post("/api/score", {{"text", kText}});
  ASSERT_EQ(status, 200) << j.dump();
  const std::vector<int> ids = f.ids(kText);
  const int T = (int)ids.size(), V = f.tok.size();
  ReferenceGPT<double> ref = reference_of(*f.model, ids);
  ASSERT_EQ(j["bits"].size(), (size_t)T);
  EXPECT_TRUE(j["bits"][0].is_null());  // nothing predicts the first character
  double sum = 0;
  for (int t = 1; t < T; t++) {
    const double expected = surprisal_bits(&ref.logits[(size_t)(t - 1) * V], V, ids[t]);
    EXPECT_NEAR(j["bits"][t].get<double>(), expected, 1e-4) << "position " << t;
    sum += expected;
    // The top-5 list is the five largest reference probabilities, most likely first.
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    const double* z = &ref.logits[(size_t)(t - 1) * V];
    std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
    ASSERT_EQ(j["top"][t].size(), 5u);
    EXPECT_EQ(j["top"][t][0][0].get<std::string>(), f.tok.decode_one(order[0])) << t;
    EXPECT_NEAR(j["top"][t][0][1].get<double>(), std::exp(-surprisal_bits(z, V, order[0]) * std::log(2.0)), 1e-5);
  }
  EXPECT_NEAR(j["bits_per_char"].get<double>(), sum / (T - 1), 1e-5);
  EXPECT_EQ(j["predicted"], T - 1);
  EXPECT_EQ(j["chars"][2], "<");

  // ./sample --score prints the same mean, to its last printed digit.
  progutil::write_file(f.dir / "t.txt", kText);
  progutil::RunResult r = progutil::run_command(
      "./sample --ckpt " + f.ckpt() + " --score " + f.dir / "t.txt" + " --threads 1", f.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  char expected[96];
  std::snprintf(expected, sizeof expected, "%.4f nats/char, %.4f bits/char over %d predicted", j["nats_per_char"].get<double>(),
                j["bits_per_char"].get<double>(), T - 1);
  EXPECT_CONTAINS(r.out, expected);
}

// Softmax and linear layers, causal and window masks: every head's row at the position and one head's whole map
// are the textbook's P, and digit for digit what ./inspect attention --json writes for the same text.
TEST(ExploreApi, AttentionIsTheTextbookPatternAndInspectsJson) {
  Folder f("softmax,linear", {AttentionMask{}, AttentionMask::parse("window:5")});
  Running server(f.ckpt());
  const int position = 9, layer = 1, head = 1;
  auto [status, j] = server.post("/api/attention", {{"text", kText}, {"position", std::to_string(position)},
                                                    {"layer", std::to_string(layer)}, {"head", std::to_string(head)}});
  ASSERT_EQ(status, 200) << j.dump();
  const std::vector<int> ids = f.ids(kText);
  const int T = (int)ids.size(), NH = 2;
  EXPECT_EQ(j["attention"], json({"softmax", "linear"}));
  EXPECT_EQ(j["masks"], json({"causal", "window:5"}));
  ReferenceGPT<double> ref = reference_of(*f.model, ids);
  for (int l = 0; l < 2; l++)
    for (int h = 0; h < NH; h++)
      for (int k = 0; k < T; k++) {
        const double p = ref.layers[l].probs[(((size_t)h * T) + position) * T + k];
        EXPECT_NEAR(j["rows"][l][h][k].get<double>(), p, 2e-6) << l << " " << h << " " << k;
        const bool allowed = k <= position && (l == 0 || k > position - 5);
        EXPECT_EQ(j["mask_rows"][l][k].get<int>(), allowed ? 1 : 0) << l << " " << k;
      }
  for (int q = 0; q < T; q++)
    for (int k = 0; k < T; k++)
      EXPECT_NEAR(j["map"][q][k].get<double>(), ref.layers[layer].probs[(((size_t)head * T) + q) * T + k], 2e-6);

  progutil::RunResult r = progutil::run_command("./inspect attention --ckpt " + f.ckpt() + " --prompt " +
                                                    progutil::quote(kText) + " --json " + f.dir / "a.json" + " --threads 1",
                                                f.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  json inspect = json::parse(progutil::read_file(f.dir / "a.json"));
  for (int l = 0; l < 2; l++)
    for (int h = 0; h < NH; h++) EXPECT_EQ(j["rows"][l][h], inspect["attn"][l][h][position]) << l << " " << h;
  EXPECT_EQ(j["map"], inspect["attn"][layer][head]);
  EXPECT_EQ(j["mask"], inspect["mask"][layer]);
  EXPECT_EQ(j["chars"], inspect["tokens"]);
}

TEST(ExploreApi, NextIsTheTextbookSoftmaxAndShapedAsSamplingDrawsIt) {
  Folder f;
  Running server(f.ckpt());
  auto [status, j] = server.post("/api/next", {{"text", kText}, {"temperature", "0.5"}, {"top_k", "4"}, {"top_p", "1"}});
  ASSERT_EQ(status, 200) << j.dump();
  const std::vector<int> ids = f.ids(kText);
  const int T = (int)ids.size(), V = f.tok.size();
  ReferenceGPT<double> ref = reference_of(*f.model, ids);
  const double* z = &ref.logits[(size_t)(T - 1) * V];
  // Closed form for temperature 0.5, top-k 4: exp(2 z) over the 4 largest logits, 0 elsewhere.
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
  double kept = 0;
  for (int i = 0; i < 4; i++) kept += std::exp(2 * (z[order[i]] - z[order[0]]));
  for (int v = 0; v < V; v++) {
    EXPECT_NEAR(j["p"][v].get<double>(), std::exp(-surprisal_bits(z, V, v) * std::log(2.0)), 1e-5) << v;
    const int rank = (int)(std::find(order.begin(), order.end(), v) - order.begin());
    const double q = rank < 4 ? std::exp(2 * (z[v] - z[order[0]])) / kept : 0.0;
    EXPECT_NEAR(j["q"][v].get<double>(), q, 1e-5) << v;
  }
  EXPECT_EQ(j["tokens"][f.tok.id_of(U'&')], "&");
}

// sampling_distribution against sample_token itself: frequencies of 40000 draws within 5 standard errors, and no
// draw ever of a token the distribution gives 0.
TEST(ExploreApi, SamplingDistributionIsWhatSampleTokenDraws) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> z(12);
  for (float& x : z) x = normal(gen);
  for (SamplingOptions o : {SamplingOptions{0.7f, 5, 0.8f}, SamplingOptions{1.3f, 0, 1.0f}, SamplingOptions{1.0f, 9, 0.5f}}) {
    SCOPED_TRACE("temperature " + std::to_string(o.temperature) + " top_k " + std::to_string(o.top_k) + " top_p " +
                 std::to_string(o.top_p));
    const std::vector<double> q = sampling_distribution(z.data(), (int)z.size(), o);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 1.0, 1e-12);
    Rng rng(3);
    std::vector<std::pair<float, int>> scratch;
    const int N = 40000;
    std::vector<int> count(z.size(), 0);
    for (int i = 0; i < N; i++) count[sample_token(z.data(), (int)z.size(), o, rng, scratch)]++;
    for (size_t v = 0; v < z.size(); v++) {
      if (q[v] == 0.0) EXPECT_EQ(count[v], 0) << "token " << v;
      else EXPECT_NEAR((double)count[v] / N, q[v], 5 * std::sqrt(q[v] * (1 - q[v]) / N) + 1e-3) << "token " << v;
    }
  }
  // Temperature 0: all mass on the most likely token; on a tie, the lower id (as sample_token picks).
  const float tie[4] = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(sampling_distribution(tie, 4, {0.0f, 0, 1.0f}), (std::vector<double>{0, 1, 0, 0}));
}

// The stream is what ./sample prints for the same prompt, seed and options (both go through the KV cache).
TEST(ExploreApi, GenerateStreamsWhatSampleGenerates) {
  Folder f;
  Running server(f.ckpt());
  const std::string prompt = "a <b> & ";
  httplib::Client c = server.client();
  std::string body;
  auto r = c.Post("/api/generate",
                  httplib::Params{{"text", prompt}, {"n", "40"}, {"seed", "7"}, {"temperature", "0.9"}, {"top_k", "6"},
                                  {"top_p", "0.9"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
  std::string generated;
  std::istringstream lines(r->body);
  json last;
  int tokens = 0;
  for (std::string line; std::getline(lines, line);) {
    last = json::parse(line);
    if (last.contains("token")) generated += last["token"].get<std::string>(), tokens++;
  }
  EXPECT_EQ(last, json({{"done", true}, {"tokens", 40}}));
  EXPECT_EQ(tokens, 40);
  progutil::RunResult s = progutil::run_command("./sample --ckpt " + f.ckpt() + " --prompt " + progutil::quote(prompt) +
                                                    " -n 40 --seed 7 --temperature 0.9 --top-k 6 --top-p 0.9 --threads 1",
                                                f.dir.path());
  ASSERT_EQ(s.exit_code, 0) << s.describe();
  EXPECT_EQ(s.out, prompt + generated + "\n");

  // A reader that leaves after the first chunk stops the generation; the server goes on answering.
  httplib::Client early = server.client();
  int chunks = 0;
  early.Get("/api/generate?text=a&n=2000", [&](const char*, size_t) { return ++chunks < 1; });
  EXPECT_EQ(chunks, 1);
  EXPECT_EQ(server.post("/api/score", {{"text", "abc"}}).first, 200);
}

TEST(ExploreApi, FillIsWhatSampleFillWritesForAMaskedLm) {
  progutil::TempDir dir;
  Tokenizer tok = Tokenizer::from_text(kVocab);
  tok.add_special(kMaskToken);
  GPT model(explore_config(tok), std::vector<AttentionMask>(2, AttentionMask::parse("bidirectional")));
  randomise(model, 8);
  save_checkpoint(dir / "bert.safetensors", model, tok, nullptr, Objective::MLM);
  Running server(dir / "bert.safetensors");
  const std::string text = "a_c <_> d__ f";
  auto [status, j] = server.post("/api/fill", {{"text", text}, {"blank", "_"}});
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["filled"], json({1, 5, 9, 10}));
  progutil::RunResult r = progutil::run_command(
      "./sample --ckpt " + dir / "bert.safetensors" + " --fill " + progutil::quote(text) + " --threads 1", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, j["text"].get<std::string>() + "\n");
  // A masked LM's score: position t predicted with [MASK] at t and both sides visible, as the textbook computes it.
  auto [s, score] = server.post("/api/score", {{"text", "abc d"}});
  ASSERT_EQ(s, 200) << score.dump();
  EXPECT_EQ(score["method"], "masked");
  std::vector<int> ids = tok.encode(U"abc d", "t");
  const int V = tok.size(), mask = tok.special_id(kMaskToken);
  for (int t = 0; t < 5; t++) {
    std::vector<int> masked = ids;
    masked[t] = mask;
    ReferenceGPT<double> ref = reference_of(model, masked);
    EXPECT_NEAR(score["bits"][t].get<double>(), surprisal_bits(&ref.logits[(size_t)t * V], V, ids[t]), 1e-4) << t;
  }
  // Generation is the page's choice for next-token models only; a fill on one is refused.
  Folder gpt;
  Running other(gpt.ckpt());
  auto [refused, message] = other.post("/api/fill", {{"text", "a_c"}});
  EXPECT_EQ(refused, 400);
  EXPECT_CONTAINS(message["error"].get<std::string>(), "masked-LM");
}

// Bad input: HTTP 400 (or 403, 404, 413) with a JSON message that says what is wrong; the server keeps serving.
TEST(ExploreApi, BadRequestsGetAClearJsonErrorNeverACrash) {
  Folder f;
  Running server(f.ckpt());
  struct Case {
    std::string path;
    httplib::Params params;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/api/score", {{"text", std::string(33, 'a')}}, 400, "text has 33 characters; this model reads at most 32"},
      {"/api/score", {{"text", "abZc"}}, 400, "character 'Z' (U+005A) at position 2 is not in the model's vocabulary"},
      {"/api/score", {{"text", "ab\xff" "c"}}, 400, "invalid UTF-8 at byte offset 2"},
      {"/api/score", {{"text", ""}}, 400, "at least 1 character"},
      {"/api/next", {{"text", "abc"}, {"temperature", "nan"}}, 400, "temperature must be a finite number"},
      {"/api/next", {{"text", "abc"}, {"temperature", "1e999"}}, 400, "temperature must be a finite number"},
      {"/api/next", {{"text", "abc"}, {"top_p", "0"}}, 400, "top_p must be a finite number in (0.0, 1.0]"},
      {"/api/next", {{"text", "abc"}, {"top_k", "-1"}}, 400, "top_k must be a whole number"},
      {"/api/next", {{"text", "abc"}, {"top_k", "3x"}}, 400, "top_k must be a whole number"},
      {"/api/attention", {{"text", "abc"}, {"position", "3"}}, 400, "position must be a whole number from 0 to 2"},
      {"/api/attention", {{"text", "abc"}, {"layer", "2"}}, 400, "layer 2 does not exist"},
      {"/api/generate", {{"text", "abc"}, {"n", "100000"}}, 400, "n must be a whole number from 0 to 2000"},
      {"/api/fill", {{"text", "a_c"}, {"blank", "__"}}, 400, "blank must be exactly one character"},
      {"/api/score", {{"text", "abc"}, {"ckpt", "../ckpt.safetensors"}}, 404, "no checkpoint named"},
      {"/api/score", {{"text", "abc"}, {"ckpt", "/etc/passwd"}}, 404, "no checkpoint named"},
      {"/api/nothing", {}, 404, "no such page or endpoint"},
  };
  for (const Case& c : cases) {
    auto [status, j] = server.post(c.path, c.params);
    EXPECT_EQ(status, c.status) << c.path << " " << j.dump();
    ASSERT_TRUE(j.contains("error")) << c.path << " " << j.dump();
    EXPECT_CONTAINS(j["error"].get<std::string>(), c.says);
  }
  // A body above 64 KiB is refused before it is read.
  httplib::Client c = server.client();
  auto big = c.Post("/api/score", std::string(100000, 'a'), "application/x-www-form-urlencoded");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  // A request addressed to another name (a page elsewhere rebinding its name to 127.0.0.1) is refused.
  httplib::Client renamed = server.client();
  renamed.set_default_headers({{"Host", "evil.example:80"}});
  auto r = renamed.Get("/api/checkpoints");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  httplib::Client local = server.client();
  local.set_default_headers({{"Host", "localhost:1234"}});
  EXPECT_EQ(local.Get("/api/checkpoints")->status, 200);
  EXPECT_EQ(server.post("/api/score", {{"text", "abc"}}).first, 200);  // still serving
}

TEST(ExploreApi, SeveralClientsAtOnceGetTheAnswersOneClientGets) {
  Folder f;
  Running server(f.ckpt());
  const std::vector<std::string> texts = {"abc de", kText, "j.i hg <>", "&&&\"''"};
  std::vector<std::string> expected;
  for (const std::string& t : texts) expected.push_back(server.post("/api/score", {{"text", t}}).second.dump());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; k++)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 8; i++) {
        const size_t which = (k + i) % texts.size();
        auto [status, j] = server.post("/api/score", {{"text", texts[which]}});
        if (status != 200 || j.dump() != expected[which]) wrong++;
        if (server.post("/api/attention", {{"text", texts[which]}, {"layer", "1"}}).first != 200) wrong++;
        if (server.post("/api/next", {{"text", texts[which]}}).first != 200) wrong++;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Every *.safetensors of the folder is listed; a file replaced on disk is read again; one that cannot be read is
// refused with 409 until it can.
TEST(ExploreApi, CheckpointsAreListedAndReReadWhenTheyChangeOnDisk) {
  Folder f;
  const std::string hostile = "<img src=x onerror=alert(1)>.safetensors";
  std::filesystem::copy_file(f.ckpt(), f.dir / hostile);
  progutil::write_file(f.dir / "notes.txt", "not a checkpoint");
  Running server(f.ckpt());
  auto [status, list] = server.post("/api/checkpoints", {});
  ASSERT_EQ(status, 200);
  std::vector<std::string> names;
  for (const json& c : list["checkpoints"]) names.push_back(c["name"]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{hostile, "ckpt.safetensors"}));
  EXPECT_EQ(list["default"], "ckpt.safetensors");
  EXPECT_EQ(server.post("/api/score", {{"text", "abc"}, {"ckpt", hostile}}).first, 200);
  EXPECT_EQ(server.post("/api/score", {{"text", "abc"}, {"ckpt", "notes.txt"}}).first, 404);

  const std::string text = "abc de";
  const double before = server.post("/api/score", {{"text", text}}).second["bits_per_char"];
  // Replaced as a training run replaces it (atomically): the next request reads the new weights.
  randomise(*f.model, 99);
  save_checkpoint(f.ckpt(), *f.model, f.tok, nullptr);
  auto [s2, after] = server.post("/api/score", {{"text", text}});
  ASSERT_EQ(s2, 200);
  const std::vector<int> ids = f.ids(text);
  ReferenceGPT<double> ref = reference_of(*f.model, ids);
  EXPECT_NE(after["bits_per_char"].get<double>(), before);
  EXPECT_NEAR(after["bits"][1].get<double>(), surprisal_bits(&ref.logits[0], f.tok.size(), ids[1]), 1e-4);
  // Half-written (a copy in progress): refused, naming the file, and read again once whole.
  const std::string whole = progutil::read_file(f.ckpt());
  progutil::write_file(f.ckpt(), whole.substr(0, whole.size() / 2));
  auto [s3, refused] = server.post("/api/score", {{"text", text}});
  EXPECT_EQ(s3, 409);
  EXPECT_CONTAINS(refused["error"].get<std::string>(), "ckpt.safetensors cannot be read now");
  progutil::write_file(f.ckpt(), whole);
  auto [s4, again] = server.post("/api/score", {{"text", text}});
  EXPECT_EQ(s4, 200);
  EXPECT_EQ(again["bits_per_char"], after["bits_per_char"]);
}

// The page: one self-contained file that builds no HTML from strings and loads nothing from elsewhere.
TEST(ExplorePage, IsSelfContainedAndNeverTurnsDataIntoHtml) {
  Folder f;
  Running server(f.ckpt());
  httplib::Client c = server.client();
  auto r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_CONTAINS(r->get_header_value("Content-Type"), "text/html");
  EXPECT_CONTAINS(r->get_header_value("Content-Security-Policy"), "default-src 'none'");
  const std::string& page = r->body;
  EXPECT_CONTAINS(page, "data-status");
  for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "http://", "https://", "src="})
    EXPECT_EQ(page.find(sink), std::string::npos) << "the page contains " << sink;
}

TEST(ExploreServer, LoopbackHostsAreRecognised) {
  for (const char* yes : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) EXPECT_TRUE(is_loopback_host(yes)) << yes;
  for (const char* no : {"0.0.0.0", "192.168.1.2", "127.0.0.1.evil.com", "localhost.evil.com", "", "::", "127.0.0"})
    EXPECT_FALSE(is_loopback_host(no)) << no;
}
