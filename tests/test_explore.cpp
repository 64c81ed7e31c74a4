// The explorer (src/explore/): the server started in-process on an ephemeral port and called with cpp-httplib's
// client. Its numbers are checked against the double-precision textbook model (surprisal, attention, the
// next-character distribution), against ./sample --score, ./inspect attention --json, ./sample's generation and
// ./sample --fill for the same text, and the sampling distribution against sample_token's draws; then the error
// answers, several clients at once, a checkpoint that changes on disk, the Host check and the page's safety rules.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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
#include "model/mixers/registry.h"
#include "model/model.h"
#include "explore_running.h"
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
  c.mixer = attention;
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

// A raw TCP connection to 127.0.0.1:port, for what a well-behaved client never sends (slow or endless bodies).
class Raw {
 public:
  explicit Raw(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, (sockaddr*)&a, sizeof a) == 0;
  }
  ~Raw() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& bytes) { return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == (ssize_t)bytes.size(); }
  // Has the server answered (or closed)? Waits at most ms.
  bool answered(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }
  std::string read_some() {
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, n) : "";
  }

 private:
  int fd_;
  bool connected_ = false;
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

// A run folder with one random masked LM (bidirectional, [MASK] in its vocabulary) saved as bert.safetensors.
struct MaskedFolder {
  progutil::TempDir dir;
  Tokenizer tok = Tokenizer::from_text(kVocab);
  std::unique_ptr<GPT> model;
  explicit MaskedFolder(int block_size = 32) {
    tok.add_special(kMaskToken);
    ModelConfig c = explore_config(tok);
    c.block_size = block_size;
    model = std::make_unique<GPT>(c, std::vector<AttentionMask>(2, AttentionMask::parse("bidirectional")));
    randomise(*model, 8);
    save_checkpoint(ckpt(), *model, tok, nullptr, Objective::MLM);
  }
  std::string ckpt() const { return dir / "bert.safetensors"; }
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
    ASSERT_EQ(j["top"][t].size(), 10u);
    EXPECT_EQ(j["top"][t][0][0].get<std::string>(), f.tok.decode_one(order[0])) << t;
    EXPECT_NEAR(j["top"][t][0][1].get<double>(), std::exp(-surprisal_bits(z, V, order[0]) * std::log(2.0)), 1e-5);
    // The actual character's probability and its rank among the reference's (1 = the most likely).
    EXPECT_NEAR(j["p"][t].get<double>(), std::exp(-expected * std::log(2.0)), 1e-5) << t;
    const int rank = (int)(std::find(order.begin(), order.end(), ids[t]) - order.begin()) + 1;
    EXPECT_EQ(j["rank"][t].get<int>(), rank) << t;
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
                                                    {"layer", std::to_string(layer)}, {"head", std::to_string(head)},
                                                    {"map", "1"}});
  ASSERT_EQ(status, 200) << j.dump();
  const std::vector<int> ids = f.ids(kText);
  const int T = (int)ids.size(), NH = 2;
  for (int l = 0; l < 2; l++)
    EXPECT_EQ(j["mixers"][l]["kind"], f.model->mixer(l).kind()) << "layer " << l;
  EXPECT_EQ(j["masks"], json({"causal", "window:5"}));
  ReferenceGPT<double> ref = reference_of(*f.model, ids);
  for (int l = 0; l < 2; l++)
    for (int h = 0; h < NH; h++)
      for (int k = 0; k < T; k++) {
        const double p = ref.layers[l].probs[(((size_t)h * T) + position) * T + k];
        EXPECT_NEAR(j["rows"][l][h][k].get<double>(), p, 2e-6) << l << " " << h << " " << k;
        const bool allowed = k <= position && (l == 0 || k > position - 5);
        EXPECT_EQ(j["mask_rows"][l][k].get<int>(), allowed ? 1 : 0) << l << " " << k;
        // The column: query k's weight on the chosen character (what attends to it).
        const double to = ref.layers[l].probs[(((size_t)h * T) + k) * T + position];
        EXPECT_NEAR(j["cols"][l][h][k].get<double>(), to, 2e-6) << l << " " << h << " " << k;
        const bool sees = position <= k && (l == 0 || position > k - 5);
        EXPECT_EQ(j["mask_cols"][l][k].get<int>(), sees ? 1 : 0) << l << " " << k;
      }
  // The map, compact: each query's allowed keys (window:5: the last 5 up to itself), 4 decimals.
  for (int q = 0; q < T; q++) {
    const int begin = std::max(0, q - 4);
    ASSERT_EQ(j["map_begin"][q].get<int>(), begin) << q;
    ASSERT_EQ(j["map"][q].size(), (size_t)(q + 1 - begin)) << q;
    for (int k = begin; k <= q; k++)
      EXPECT_NEAR(j["map"][q][k - begin].get<double>(), ref.layers[layer].probs[(((size_t)head * T) + q) * T + k], 5.1e-5);
  }
  EXPECT_FALSE(j.contains("mask"));
  // Every head's thumbnail (T ≤ 32: one weight a cell, 4 decimals) and its previous-token score, the mean over the
  // queries i ≥ 1 of P[i][i − 1], from the textbook's P.
  ASSERT_EQ(j["thumb_size"], T);
  for (int l = 0; l < 2; l++)
    for (int h = 0; h < NH; h++) {
      const double* P = &ref.layers[l].probs[(size_t)h * T * T];
      double previous = 0;
      for (int q = 0; q < T; q++) {
        if (q > 0) previous += P[(size_t)q * T + q - 1];
        for (int k = 0; k < T; k++) EXPECT_NEAR(j["thumbs"][l][h][q * T + k].get<double>(), P[(size_t)q * T + k], 6e-5);
      }
      EXPECT_NEAR(j["head_scores"][l][h]["previous_token"].get<double>(), previous / (T - 1), 1e-5) << l << " " << h;
    }

  progutil::RunResult r = progutil::run_command("./inspect attention --ckpt " + f.ckpt() + " --prompt " +
                                                    progutil::quote(kText) + " --json " + f.dir / "a.json" + " --threads 1",
                                                f.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  json inspect = json::parse(progutil::read_file(f.dir / "a.json"));
  for (int l = 0; l < 2; l++)
    for (int h = 0; h < NH; h++) EXPECT_EQ(j["rows"][l][h], inspect["attn"][l][h][position]) << l << " " << h;
  for (int q = 0; q < T; q++) {
    const int begin = j["map_begin"][q].get<int>();
    for (int k = 0; k < T; k++) {
      const bool inside = k >= begin && k < begin + (int)j["map"][q].size();
      EXPECT_EQ(inside ? 1 : 0, inspect["mask"][layer][q][k].get<int>()) << q << " " << k;
      if (inside) {
        EXPECT_NEAR(j["map"][q][k - begin].get<double>(), inspect["attn"][layer][head][q][k].get<double>(), 5.1e-5);
      }
    }
  }
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
  MaskedFolder bert;
  const Tokenizer& tok = bert.tok;
  Running server(bert.ckpt());
  const std::string text = "a_c <_> d__ f";
  auto [status, j] = server.post("/api/fill", {{"text", text}, {"blank", "_"}});
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["filled"], json({1, 5, 9, 10}));
  progutil::RunResult r = progutil::run_command(
      "./sample --ckpt " + bert.ckpt() + " --fill " + progutil::quote(text) + " --threads 1", bert.dir.path());
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
    ReferenceGPT<double> ref = reference_of(*bert.model, masked);
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
  const std::vector<RefusedRequest> cases = {
      {"/api/attention", {{"text", std::string(33, 'a')}}, 400, "text has 33 characters; this model reads at most 32"},
      {"/api/next", {{"text", std::string(33, 'a')}}, 400, "text has 33 characters; this model reads at most 32"},
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
  expect_refused(server, cases);
  // A body above 1 MiB is refused before it is read.
  httplib::Client c = server.client();
  auto big = c.Post("/api/score", std::string((1 << 20) + 1000, 'a'), "application/x-www-form-urlencoded");
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
  // Half-written (a copy in progress, changed moments ago): refused, naming the file, and read again once whole.
  const std::string whole = progutil::read_file(f.ckpt());
  progutil::write_file(f.ckpt(), whole.substr(0, whole.size() / 2));
  auto [s3, refused] = server.post("/api/score", {{"text", text}});
  EXPECT_EQ(s3, 409);
  EXPECT_CONTAINS(refused["error"].get<std::string>(), "ckpt.safetensors cannot be read now");
  EXPECT_CONTAINS(refused["error"].get<std::string>(), "try again");
  // The same bytes, unchanged for an hour: no checkpoint, whatever the wait. 422 says what is wrong, not "try again".
  const struct timeval an_hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimes(f.ckpt().c_str(), an_hour_ago), 0);
  auto [s3b, invalid] = server.post("/api/score", {{"text", text}});
  EXPECT_EQ(s3b, 422);
  EXPECT_CONTAINS(invalid["error"].get<std::string>(), "ckpt.safetensors cannot be loaded: ");
  EXPECT_EQ(invalid["error"].get<std::string>().find("try again"), std::string::npos) << invalid.dump();
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

// Two explorers never share a port: the second one started from the first one's port moves on to the next free one
// (with SO_REUSEPORT both bound the same port and the kernel split the connections between two models).
TEST(ExploreServer, TwoServersGetTwoPorts) {
  Folder f;
  ExploreServer first(f.ckpt()), second(f.ckpt());
  const int taken = first.bind(0);
  EXPECT_THROW(second.bind(taken), std::runtime_error);
  const int moved = second.bind_first_free(taken, 50);
  EXPECT_NE(moved, taken);
  EXPECT_GT(moved, 0);
}

// A server on ::1 and one on 127.0.0.1 may bind the same port number ("localhost" then reaches either): the first
// free port is free on both. A plain listening socket on one loopback address takes a port; a server on the other
// must move past it. Skipped where the machine has no IPv6 loopback.
TEST(ExploreServer, TheFirstFreePortIsFreeOnBothLoopbackAddresses) {
  Folder f;
  for (const bool taken_on_v6 : {true, false}) {
    const int fd = ::socket(taken_on_v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool bound = taken_on_v6 ? ::bind(fd, (sockaddr*)&a6, sizeof a6) == 0 : ::bind(fd, (sockaddr*)&a4, sizeof a4) == 0;
    if (!bound || ::listen(fd, 1) != 0) {
      ::close(fd);
      GTEST_SKIP() << "no IPv6 loopback here";
    }
    sockaddr_storage got{};
    socklen_t len = sizeof got;
    ::getsockname(fd, (sockaddr*)&got, &len);
    const int taken = ntohs(taken_on_v6 ? ((sockaddr_in6*)&got)->sin6_port : ((sockaddr_in*)&got)->sin_port);
    ServeOptions options;
    options.host = taken_on_v6 ? "127.0.0.1" : "::1";
    ExploreServer server(f.ckpt(), options);
    int port = -1;
    try {
      port = server.bind_first_free(taken, 20);
    } catch (const std::runtime_error& e) {
      ::close(fd);
      GTEST_SKIP() << "cannot listen on " << options.host << ": " << e.what();
    }
    EXPECT_NE(port, taken) << (taken_on_v6 ? "::1" : "127.0.0.1") << " holds " << taken << "; a server on "
                           << options.host << " took the same number";
    EXPECT_GT(port, 0);
    ::close(fd);
  }
}

// A chunked body has no Content-Length for cpp-httplib's cap to compare: the server must stop reading it at its
// cap (1 MiB) itself (it read on to 1 GB before) and answer 413, long before the client is done sending (64 MB):
// within 8 MB, the cap and what the loopback's socket buffers hold besides (4.6 MB were sent once).
TEST(ExploreHardening, ChunkedBodiesAreCutAtTheCap) {
  Folder f;
  Running server(f.ckpt());
  Raw raw(server.port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.send("POST /api/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "4000\r\n" + std::string(0x4000, 'a') + "\r\n";  // 16 KiB a chunk
  size_t sent = 0;
  while (sent < (64u << 20) && !raw.answered(0) && raw.send(chunk)) sent += 0x4000;
  ASSERT_TRUE(raw.answered(5000));
  EXPECT_LT(sent, 8u << 20) << "the server read " << sent << " bytes before answering";
  EXPECT_CONTAINS(raw.read_some(), "413");
  EXPECT_EQ(server.post("/api/score", {{"text", "abc"}}).first, 200);
}

// The documented cap holds for form bodies too (cpp-httplib alone refuses them above 8,192 bytes): 1000 CJK
// characters, 9,000 bytes percent-encoded, reach the model, which says how many characters it reads.
TEST(ExploreHardening, FormBodiesUpToTheCapAreRead) {
  Folder f;
  Running server(f.ckpt());
  std::string cjk;
  for (int i = 0; i < 1000; i++) cjk += "\xe5\xad\x97";  // 字
  auto [status, j] = server.post("/api/attention", {{"text", cjk}});
  EXPECT_EQ(status, 400) << j.dump();
  EXPECT_CONTAINS(j.value("error", ""), "text has 1000 characters; this model reads at most 32");
}

// The documented limit of a scored text, 65,536 characters, is reachable as a form body however the characters are
// encoded (here every byte percent-encoded, 3 bytes each: 192 KiB, three times the old 64 KiB cap), and one more
// character is refused with a message that says so.
TEST(ExploreHardening, AScoredTextOf65536CharactersIsAcceptedAndOneMoreRefused) {
  Folder f;
  Running server(f.ckpt());
  auto body = [](size_t n) {
    std::string b = "top_from=0&top_to=0&text=";  // no top-10 lists but the first: the answer stays small
    for (size_t i = 0; i < n; i++) b += "%61";       // 'a'
    return b;
  };
  httplib::Client c = server.client();
  auto ok = c.Post("/api/score", body(65536), "application/x-www-form-urlencoded");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body.substr(0, 300);
  EXPECT_EQ(json::parse(ok->body)["predicted"], 65535);
  auto refused = c.Post("/api/score", body(65537), "application/x-www-form-urlencoded");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_CONTAINS(refused->body, "text has 65537 characters; this model reads at most 65536");
}

// Half of a character: a UTF-16 surrogate encoded on its own (CESU-8, what a lone surrogate becomes when encoded
// naively) is not UTF-8, and is answered 400 with a message naming the parameter, not a crash or a blank answer.
TEST(ExploreHardening, AnEncodedSurrogateIsAClearError) {
  Folder f;
  Running server(f.ckpt());
  auto [status, j] = server.post("/api/refresh", {{"text", "ab\xed\xa0\xbd"}});
  EXPECT_EQ(status, 400) << j.dump();
  EXPECT_CONTAINS(j.value("error", ""), "text");
}

// A mistyped folder is named as a missing folder, not as a file name with the wrong ending; an existing file with
// the wrong ending still gets that message.
TEST(ExploreHardening, AMissingFolderIsNamedAsSuch) {
  Folder f;
  const std::string missing = f.dir / "tinny";
  try {
    ExploreServer server(missing);
    FAIL() << "a missing folder was served";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(std::string(e.what()), missing + ": no such folder or file");
  }
  progutil::write_file(f.dir / "notes.txt", "not a checkpoint");
  try {
    ExploreServer server(f.dir / "notes.txt");
    FAIL() << "a .txt file was served";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(std::string(e.what()), "does not end in .safetensors");
  }
}

// Only the page itself may call the API: a "simple" POST from a page elsewhere carries its Origin (or Referer),
// and a browser marks every cross-site request with Sec-Fetch-Site.
TEST(ExploreHardening, PostsFromAnotherOriginAreRefused) {
  Folder f;
  Running server(f.ckpt());
  const std::string self = "http://127.0.0.1:" + std::to_string(server.port());
  auto post_with = [&](const httplib::Headers& headers) {
    httplib::Client c = server.client();
    c.set_default_headers(headers);
    auto r = c.Post("/api/score", "text=abc", "application/x-www-form-urlencoded");
    return r ? r->status : -1;
  };
  EXPECT_EQ(post_with({{"Origin", self}}), 200);
  EXPECT_EQ(post_with({{"Referer", self + "/#text=abc"}}), 200);
  EXPECT_EQ(post_with({}), 200);  // curl and scripts send neither
  EXPECT_EQ(post_with({{"Origin", "http://evil.example"}}), 403);
  EXPECT_EQ(post_with({{"Origin", "null"}}), 403);  // a sandboxed frame or a page without a referrer
  EXPECT_EQ(post_with({{"Referer", "http://evil.example/page"}}), 403);
  EXPECT_EQ(post_with({{"Referer", self + ".evil.example/"}}), 403);
  EXPECT_EQ(post_with({{"Origin", self}, {"Sec-Fetch-Site", "cross-site"}}), 403);
  httplib::Client c = server.client();
  c.set_default_headers({{"Sec-Fetch-Site", "cross-site"}});
  EXPECT_EQ(c.Get("/api/score?text=abc")->status, 403);  // an <img src> elsewhere
  EXPECT_EQ(c.Get("/")->status, 200);                    // a link to the page itself still opens it
  auto other = server.client().Post("/api/score", "text=abc", "multipart/form-data; boundary=x");
  EXPECT_EQ(other->status, 415);
  auto put = server.client().Put("/api/score", "text=abc", "application/x-www-form-urlencoded");
  EXPECT_EQ(put->status, 405);
}

// 40 clients that send a header byte every 200 ms each hold a connection (slowloris); requests from another
// client are still answered at once. With cpp-httplib's pool of 8 threads they all timed out.
TEST(ExploreHardening, SlowClientsDoNotStarveOthers) {
  Folder f;
  Running server(f.ckpt());
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 40; i++) {
    slow.push_back(std::make_unique<Raw>(server.port()));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->send("GET /api/checkpoints HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  }
  std::atomic<bool> done{false};
  std::thread dribble([&] {
    for (int tick = 0; !done; tick++) {
      for (auto& s : slow) s->send("X-" + std::to_string(tick) + ": y\r\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // every slow client is being read by now
  for (int i = 0; i < 3; i++) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(2, 0);
    const auto start = std::chrono::steady_clock::now();
    auto r = c.Post("/api/score", httplib::Params{{"text", "abc"}});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(r && r->status == 200) << "request " << i << " with 40 slow clients: no answer after " << seconds << " s";
  }
  done = true;
  dribble.join();
}

// A checkpoint whose header takes long to parse (1024 layers, the most a model may have: some 37,000 tensors, a 3 MB header) is read outside the
// models' lock: a request for the model already loaded, sent while the big one is being parsed, is answered first.
// (Held under the lock, as before, it waited for the whole parse and answered after.)
TEST(ExploreHardening, ParsingALargeCheckpointDoesNotHoldUpOtherModels) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  Folder f;
  const std::string deep_path = f.dir / "deep.safetensors";
  {
    ModelConfig c = explore_config(f.tok);
    c.n_layer = 1024, c.n_head = 1, c.n_embd = 4, c.block_size = 8;
    GPT deep(c);
    deep.init_weights(1);
    save_checkpoint(deep_path, deep, f.tok, nullptr);
  }
  Clock::time_point start = Clock::now();
  load_checkpoint(deep_path);
  const double parse = seconds_since(start);  // what one load of the deep file takes here, now
  Running server(f.ckpt());
  ASSERT_EQ(server.post("/api/score", {{"text", "abc"}}).first, 200);  // the default model on the shelf
  int deep_status = 0;
  std::thread deep_request([&] { deep_status = server.post("/api/model", {{"ckpt", "deep.safetensors"}}).first; });
  std::this_thread::sleep_for(std::chrono::duration<double>(parse / 8));  // the deep file is being parsed by now
  start = Clock::now();
  const int small_status = server.post("/api/score", {{"text", "abc"}}).first;
  const double small = seconds_since(start);
  deep_request.join();
  EXPECT_EQ(deep_status, 200);
  EXPECT_EQ(small_status, 200);
  // Held up, the small request would wait out the rest of the parse, about 7/8 of it.
  EXPECT_LT(small, 0.6 * parse) << "the small model's answer took " << small << " s while a " << parse
                              << " s parse ran: it waited for the parse";
}

// A file in the folder that cannot be a checkpoint the machine can load (a sparse file larger than its memory)
// gets a message that says so, not "std::bad_alloc", and not "try again".
TEST(ExploreHardening, AFileLargerThanMemoryIsRefusedWithItsSize) {
  Folder f;
  const std::string huge = f.dir / "huge.safetensors";
  const long long memory = (long long)::sysconf(_SC_PHYS_PAGES) * ::sysconf(_SC_PAGESIZE);
  {
    FILE* out = std::fopen(huge.c_str(), "wb");
    ASSERT_TRUE(out);
    ASSERT_EQ(::ftruncate(::fileno(out), memory + 4096), 0);  // sparse: no disk used
    std::fclose(out);
  }
  Running server(f.ckpt());
  auto [status, j] = server.post("/api/score", {{"text", "abc"}, {"ckpt", "huge.safetensors"}});
  EXPECT_EQ(status, 500) << j.dump();
  EXPECT_CONTAINS(j.value("error", ""), "more than this machine's memory");
  EXPECT_EQ(j.value("error", "").find("bad_alloc"), std::string::npos);
}

// A model whose predictions are NaN answers an error from every endpoint, never 200 with nulls.
TEST(ExploreHardening, ANonFiniteModelAnswersAnError) {
  Folder f;
  for (float& p : f.model->params_memory()) p = 3e37f;  // finite (the loader refuses NaN) but overflowing
  save_checkpoint(f.ckpt(), *f.model, f.tok, nullptr);
  Running server(f.ckpt());
  for (const char* path : {"/api/score", "/api/attention", "/api/next"}) {
    auto [status, j] = server.post(path, {{"text", "abc"}});
    EXPECT_EQ(status, 500) << path << " " << j.dump();
    EXPECT_CONTAINS(j.value("error", ""), "not finite");
  }
}

// A NUL byte in a name or a text is shown escaped, and the message goes on after it (what() stopped at the NUL).
TEST(ExploreHardening, MessagesSurviveANulByte) {
  Folder f;
  Running server(f.ckpt());
  auto [s1, j1] = server.post("/api/score", {{"text", "abc"}, {"ckpt", std::string("a\0b.safetensors", 15)}});
  EXPECT_EQ(s1, 404);
  EXPECT_CONTAINS(j1.value("error", ""), "a\\x00b.safetensors' in the served folder");
  auto [s2, j2] = server.post("/api/score", {{"text", std::string("ab\0c", 4)}});
  EXPECT_EQ(s2, 400);
  EXPECT_CONTAINS(j2.value("error", ""), "at position 2 is not in the model's vocabulary");
}

// A format-1 checkpoint (no header checksum: it cannot be verified) is served with the note ./sample prints for it;
// a verified file's note is empty.
TEST(ExploreHardening, AFormat1CheckpointIsServedWithItsNote) {
  Folder f;
  std::filesystem::copy_file(progutil::source_root() + "/tests/fixtures/ckpt_5b9387c.safetensors",
                             f.dir / "old.safetensors");
  Running server(f.ckpt());
  auto [s1, own] = server.post("/api/model", {});
  EXPECT_EQ(s1, 200) << own.dump();
  EXPECT_EQ(own.value("note", "?"), "");
  auto [s2, old] = server.post("/api/model", {{"ckpt", "old.safetensors"}});
  EXPECT_EQ(s2, 200) << old.dump();
  EXPECT_CONTAINS(old.value("note", ""), "is a format-1 checkpoint");
}

// Every number parameter must be all number: trailing garbage is refused, not read as its leading digits.
TEST(ExploreHardening, NumbersWithTrailingGarbageAreRefused) {
  Folder f;
  Running server(f.ckpt());
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"temperature", "0.8abc"}, {"top_p", "0.9 "}, {"top_k", "40x"}, {"temperature", " "}, {"top_k", "4e1"}, {"top_p", " 0.9"}, {"top_k", " 4"}}) {
    auto [status, j] = server.post("/api/next", {{"text", "abc"}, {name, value}});
    EXPECT_EQ(status, 400) << name << "=" << value << " " << j.dump();
    EXPECT_CONTAINS(j.value("error", ""), name + " must be a");
  }
  auto [status, j] = server.post("/api/attention", {{"text", "abc"}, {"position", "1.5"}});
  EXPECT_EQ(status, 400) << j.dump();
}

// A layer whose implied weights are not probabilities (signed, or not normalised) is said to be so per layer, from
// the mixer itself (MixerLab::weights_are_probabilities, weights_description), and each head is scaled by its largest
// |weight| over its whole map, which the page draws by; the full map only when asked for. Every registered kind in
// the second layer of a two-layer model whose first is the first kind; the signed case must be met by one of them.
TEST(ExploreApi, AttentionDescribesEachKindAndScalesSignedHeads) {
  const std::string first = mixer_kinds().front()->name;
  bool any_negative = false;
  for (const MixerKind* kind : mixer_kinds()) {
    SCOPED_TRACE(kind->name);
    Folder f(first + "," + kind->name);
    Running server(f.ckpt());
    auto [status, j] = server.post("/api/attention", {{"text", kText}, {"position", "7"}});
    ASSERT_EQ(status, 200) << j.dump();
    EXPECT_FALSE(j.contains("map"));
    for (int l = 0; l < 2; l++) {
      const MixerLab& lab = f.model->mixer(l).lab();
      EXPECT_EQ(j["mixers"][l]["probabilities"], lab.weights_are_probabilities()) << l;
      EXPECT_EQ(j["mixers"][l]["about"], lab.weights_description()) << l;
    }
    EXPECT_FALSE(j["mixers"][1]["about"].get<std::string>().empty());
    progutil::RunResult r = progutil::run_command("./inspect attention --ckpt " + f.ckpt() + " --prompt " +
                                                      progutil::quote(kText) + " --json " + f.dir / "a.json" +
                                                      " --threads 1",
                                                  f.dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const json inspect = json::parse(progutil::read_file(f.dir / "a.json"));
    for (int l = 0; l < 2; l++) {
      for (int h = 0; h < 2; h++) {
        double largest = 0;
        for (const json& row : inspect["attn"][l][h]) {
          for (const json& v : row) {
            largest = std::max(largest, std::fabs(v.get<double>()));
            any_negative |= v.get<double>() < 0;
          }
        }
        EXPECT_NEAR(j["scale"][l][h].get<double>(), largest, 2e-6) << l << " " << h;
      }
    }
  }
  EXPECT_TRUE(any_negative) << "no registered kind's random layer implied a negative weight: the signed scale is untested";
}

// A text longer than the block is scored end to end with ./sample --score's sliding windows: each character
// predicted once, from the textbook model run on the window that predicts it, and the mean is ./sample's.
TEST(ExploreApi, ALongTextIsScoredWithSlidingWindows) {
  Folder f;
  Running server(f.ckpt());
  std::string text;
  for (int i = 0; i < 4; i++) text += kText + " ";  // 92 characters, block 32
  const std::vector<int> ids = f.ids(text);
  const int n = (int)ids.size(), V = f.tok.size(), B = 32;
  auto [status, j] = server.post("/api/score", {{"text", text}});
  ASSERT_EQ(status, 200) << j.dump();
  ASSERT_EQ(j["bits"].size(), (size_t)n);
  EXPECT_EQ(j["predicted"], n - 1);
  // Windows of 32 every 16 characters and one flush with the end; character t is predicted by the first window
  // that holds t − 1 past the previous window's end (written out here, not taken from score_windows).
  std::vector<int> predicted(n, 0);
  double sum = 0;
  long until = 0;
  std::vector<long> starts;
  for (long s = 0; s + B < n; s += B / 2) starts.push_back(s);
  if (starts.back() + B < n - 1) starts.push_back(n - 1 - B);
  for (long s : starts) {
    const std::vector<int> window(ids.begin() + s, ids.begin() + s + B);
    ReferenceGPT<double> ref = reference_of(*f.model, window);
    for (long i = std::max(s, until); i < s + B; i++) {
      const double expected = surprisal_bits(&ref.logits[(size_t)(i - s) * V], V, ids[i + 1]);
      EXPECT_NEAR(j["bits"][i + 1].get<double>(), expected, 1e-4) << "character " << i + 1;
      predicted[i + 1]++, sum += expected;
    }
    until = s + B;
  }
  for (int t = 1; t < n; t++) EXPECT_EQ(predicted[t], 1) << "character " << t;
  EXPECT_NEAR(j["bits_per_char"].get<double>(), sum / (n - 1), 1e-5);
  progutil::write_file(f.dir / "long.txt", text);
  progutil::RunResult r = progutil::run_command(
      "./sample --ckpt " + f.ckpt() + " --score " + f.dir / "long.txt" + " --threads 1", f.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  char expected[96];
  std::snprintf(expected, sizeof expected, "%.4f bits/char over %d predicted", j["bits_per_char"].get<double>(), n - 1);
  EXPECT_CONTAINS(r.out, expected);
}

// Typing into a long text (issue 48): a key reruns only the score windows whose characters it changed, the others
// come from the model's window cache, and the answer is still the textbook's for the new text. Counted through the
// refresh's `forwards`: attention's window is one forward, each changed score window one more.
TEST(ExploreApi, AKeyInALongTextRescoresOnlyTheWindowsItChanged) {
  Folder f;
  Running server(f.ckpt());
  std::string text;
  for (int i = 0; i < 4; i++) text += kText + " ";  // 92 characters, block 32: windows at 0, 16, 32, 48 and 59
  const int n = 92, V = f.tok.size(), B = 32;
  auto [s1, first] = server.post("/api/refresh", {{"text", text}});
  ASSERT_EQ(s1, 200) << first.dump();
  EXPECT_EQ(first["forwards"], 1 + 5);
  EXPECT_EQ(server.post("/api/refresh", {{"text", text}}).second["forwards"], 1) << "the same text again";
  // Character 50 changed: the windows that read it (or predict it) are those at 32 and 48 (written out here).
  // Attention's window, the last 32 characters, is unchanged and was the last forward: it is reused.
  text[50] = text[50] == 'a' ? 'b' : 'a';
  auto [s2, j] = server.post("/api/refresh", {{"text", text}});
  ASSERT_EQ(s2, 200) << j.dump();
  EXPECT_EQ(j["forwards"], 2);
  const std::vector<int> ids = f.ids(text);
  const std::vector<long> starts = {0, 16, 32, 48, n - 1 - B};
  long until = 0;
  for (long s : starts) {
    ReferenceGPT<double> ref = reference_of(*f.model, std::vector<int>(ids.begin() + s, ids.begin() + s + B));
    for (long i = std::max(s, until); i < s + B; i++)
      EXPECT_NEAR(j["score"]["bits"][i + 1].get<double>(), surprisal_bits(&ref.logits[(size_t)(i - s) * V], V, ids[i + 1]),
                  1e-4) << "character " << i + 1;
    until = s + B;
  }
}

// The window cache keeps at most kMaxPositions predictions, dropping the window used least recently.
TEST(ExploreApi, TheWindowCacheIsBounded) {
  WindowCache cache;
  const size_t half = WindowCache::kMaxPositions / 2;
  cache.put({1, 2}, std::vector<Prediction>(half));
  cache.put({3, 4}, std::vector<Prediction>(half));
  ASSERT_NE(cache.find({1, 2}), nullptr);  // now the most recently used: {3, 4} goes first
  cache.put({5, 6}, std::vector<Prediction>(half));
  EXPECT_EQ(cache.windows(), 2u);
  EXPECT_LE(cache.positions(), WindowCache::kMaxPositions);
  EXPECT_NE(cache.find({1, 2}), nullptr);
  EXPECT_EQ(cache.find({3, 4}), nullptr);
  EXPECT_NE(cache.find({5, 6}), nullptr);
}

// A page numbers its refreshes (tab, seq): one that arrives, or waits for the model, after a newer one from the
// same page is answered 409 without being computed; other pages and requests without a tab are not affected.
TEST(ExploreApi, ASupersededRefreshIsNotComputed) {
  Folder f;
  Running server(f.ckpt());
  EXPECT_EQ(server.post("/api/refresh", {{"text", kText}, {"tab", "t1"}, {"seq", "5"}}).first, 200);
  auto [status, j] = server.post("/api/refresh", {{"text", kText}, {"tab", "t1"}, {"seq", "4"}});
  EXPECT_EQ(status, 409);
  EXPECT_CONTAINS(j.value("error", ""), "superseded");
  EXPECT_EQ(server.post("/api/refresh", {{"text", kText}, {"tab", "t2"}, {"seq", "1"}}).first, 200);
  EXPECT_EQ(server.post("/api/refresh", {{"text", kText}}).first, 200);
  EXPECT_EQ(server.post("/api/refresh", {{"text", kText}, {"tab", "t1"}, {"seq", "x"}}).first, 400);
}

// top_from, top_to: the ten most likely characters are listed for those characters only (null elsewhere), and
// they are the full answer's.
TEST(ExploreApi, TopListsCanBeAskedForARangeOfCharacters) {
  Folder f;
  Running server(f.ckpt());
  std::string text;
  for (int i = 0; i < 4; i++) text += kText + " ";
  const json all = server.post("/api/score", {{"text", text}}).second;
  const json some = server.post("/api/refresh", {{"text", text}, {"top_from", "40"}, {"top_to", "45"}}).second["score"];
  ASSERT_EQ(some["top"].size(), all["top"].size());
  for (size_t t = 0; t < all["top"].size(); t++) {
    if (t >= 40 && t <= 45) EXPECT_EQ(some["top"][t], all["top"][t]) << t;
    else EXPECT_TRUE(some["top"][t].is_null()) << t;
  }
  EXPECT_EQ(some["bits"], all["bits"]);
  EXPECT_EQ(some["rank"], all["rank"]);
}

// A masked LM's long score (one forward per character) lets other requests in between its batches: another tab's
// request is answered while it runs, not after it.
TEST(ExploreApi, ALongMaskedScoreDoesNotHoldTheModelForEveryTab) {
  MaskedFolder bert(320);  // long enough that the 30 ms below are a small part of the score on a fast machine
  Running server(bert.ckpt());
  std::string text;
  while (text.size() < 320) text += "abc de.";
  text.resize(320);
  std::atomic<bool> long_done{false};
  std::atomic<int> long_status{0};
  const auto start = std::chrono::steady_clock::now();
  std::thread long_score([&] {
    long_status = server.post("/api/score", {{"text", text}}).first;
    long_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int short_status = server.post("/api/attention", {{"text", "abc"}}).first;
  const bool short_first = !long_done;
  const double short_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  long_score.join();
  const double long_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(short_status, 200);
  EXPECT_EQ(long_status, 200);
  // Held for the whole score, the short request would be answered just as the long one ends.
  EXPECT_TRUE(short_first && short_at < long_at / 2)
      << "the short request was answered at " << short_at << " s, the long score at " << long_at << " s";
}

// The page's refresh is one request whose three parts are exactly what score, attention and next answer alone, and
// one forward pass for a text within the block: attention's forward leaves the logits that next and score of the
// same characters read (they ran a forward each before). A long text adds its score windows; a prefix-LM's next
// reads the text as a bidirectional prefix, another mask, so another forward.
TEST(ExploreApi, RefreshIsScoreAttentionAndNextFromOneForward) {
  Folder f;
  Running server(f.ckpt());
  const httplib::Params sampling = {{"temperature", "0.7"}, {"top_k", "5"}, {"top_p", "0.9"}};
  auto with = [](httplib::Params a, const httplib::Params& b) { a.insert(b.begin(), b.end()); return a; };
  auto [status, j] = server.post("/api/refresh", with({{"text", kText}, {"position", "9"}, {"layer", "1"}, {"head", "1"},
                                                       {"map", "1"}}, sampling));
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["forwards"], 1);
  EXPECT_EQ(j["window_start"], 0);
  EXPECT_EQ(j["score"], server.post("/api/score", {{"text", kText}}).second);
  EXPECT_EQ(j["attention"], server.post("/api/attention", {{"text", kText}, {"position", "9"}, {"layer", "1"},
                                                           {"head", "1"}, {"map", "1"}}).second);
  EXPECT_EQ(j["next"], server.post("/api/next", with({{"text", kText}}, sampling)).second);

  std::string text;
  for (int i = 0; i < 4; i++) text += kText + " ";  // 92 characters, block 32: 5 score windows
  auto [s2, long_text] = server.post("/api/refresh", {{"text", text}});
  ASSERT_EQ(s2, 200) << long_text.dump();
  EXPECT_EQ(long_text["forwards"], 5 + 1);
  EXPECT_EQ(long_text["window_start"], 92 - 32);
  EXPECT_EQ(long_text["score"], server.post("/api/score", {{"text", text}}).second);
  EXPECT_EQ(long_text["next"], server.post("/api/next", {{"text", text.substr(92 - 32)}}).second);
  // Character 40 chosen: attention reads the 32 characters ending at it.
  auto [s3, early] = server.post("/api/refresh", {{"text", text}, {"position", "40"}});
  ASSERT_EQ(s3, 200);
  EXPECT_EQ(early["window_start"], 40 - 31);
  EXPECT_EQ(early["attention"], server.post("/api/attention", {{"text", text.substr(9, 32)}, {"position", "31"}}).second);

  Folder prefix("softmax", std::vector<AttentionMask>(2, AttentionMask::parse("prefix:0")));
  Running prefix_server(prefix.ckpt());
  EXPECT_EQ(prefix_server.post("/api/refresh", {{"text", kText}}).second["forwards"], 2);
}

// Every forward pass the explorer runs goes through the seam that counts them (analysis.h), so the count the
// refresh reports is every forward: analysis.cpp calls GPT::forward in two places only, dump_attention nowhere.
TEST(ExploreApi, EveryForwardGoesThroughTheCountedSeam) {
  const std::string code = progutil::read_file(progutil::source_root() + "/src/explore/analysis.cpp");
  EXPECT_EQ(progutil::occurrences(code, ".forward("), 2u);
  EXPECT_EQ(progutil::occurrences(code, "dump_attention("), 0u);
  // Before fill_blanks and generate, which run it themselves.
  EXPECT_EQ(progutil::occurrences(code, "forward_rows(nullptr, 0, 0)"), 2u);
  EXPECT_EQ(progutil::occurrences(code, "fill_blanks("), 1u);
  EXPECT_EQ(progutil::occurrences(code, "generate(m.model()"), 1u);
}

// A forward outside the seam (fill runs the model itself) must not leave a stale match: a masked LM's next after a
// fill of the same length is the next before it.
TEST(ExploreApi, AFillDoesNotLeaveStaleLogitsBehind) {
  MaskedFolder bert;
  Running server(bert.ckpt());
  const json before = server.post("/api/next", {{"text", "abc d"}}).second;  // reads "abc d[MASK]"
  ASSERT_EQ(server.post("/api/fill", {{"text", "a_c d_"}}).first, 200);   // one row of 6, as that
  EXPECT_EQ(server.post("/api/next", {{"text", "abc d"}}).second, before);
}

// The README says what `make explore` does: it prints the address to open (it opened no browser, as the README
// once said).
TEST(ExplorePage, TheReadmeSaysMakeExplorePrintsTheAddress) {
  const std::string readme = progutil::read_file(progutil::source_root() + "/README.md");
  const size_t at = readme.find("`make explore` serves");
  ASSERT_NE(at, std::string::npos) << "the README no longer says what make explore does";
  const std::string sentence = readme.substr(at, readme.find(')', at) - at);
  EXPECT_CONTAINS(sentence, "prints the address");
  for (const char* wrong : {"opens the browser", "opens your browser", "opens a browser"})
    EXPECT_EQ(readme.find(wrong), std::string::npos) << wrong;
}
