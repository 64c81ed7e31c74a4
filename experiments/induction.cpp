// ./induction — does an induction head form? A 2-layer attention-only transformer and a 1-layer control are
// trained on a task where copying pays: each sequence is a random run of n tokens (n drawn per sequence, so no
// fixed-offset positional head can solve it) repeated until the window is full. The first n tokens are
// unpredictable (loss ≈ ln V); every later token is a copy of the one n positions back, found by an induction
// head: attend to the token after the previous occurrence of the current token (needs a previous-token head in
// an earlier layer, so one layer cannot build it). Every `--eval-every` steps we log
//   induction  the best head's induction score on random distinct runs repeated twice (head_scores.h)
//   loss_rep   mean loss on the repeated part (targets at positions ≥ n), loss_first on the first run
//   make induction                       build/bin/induction --steps 1500 --out out/induction
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>

#include "adamw.h"
#include "atomic_file.h"
#include "cross_entropy.h"
#include "head_scores.h"
#include "model.h"
#include "plot.h"
#include "rng.h"
#include "threads.h"

struct Batch {
  std::vector<int> x, y_all, y_rep, y_first;
};

// B windows of T + 1 tokens: random run of n ∈ [n_min, n_max] tokens from [0, V), then w[t] = w[t − n].
static Batch make_batch(int B, int T, int V, int n_min, int n_max, Rng& rng) {
  Batch b;
  b.x.resize((size_t)B * T), b.y_all.resize(b.x.size()), b.y_rep.resize(b.x.size()), b.y_first.resize(b.x.size());
  std::vector<int> w(T + 1);
  for (int s = 0; s < B; s++) {
    const int n = n_min + rng.below(n_max - n_min + 1);
    for (int t = 0; t <= T; t++) w[t] = t < n ? rng.below(V) : w[t - n];
    for (int t = 0; t < T; t++) {
      const size_t i = (size_t)s * T + t;
      b.x[i] = w[t], b.y_all[i] = w[t + 1];
      const bool repeated = t + 1 >= n;  // the target w[t+1] is a copy
      b.y_rep[i] = repeated ? w[t + 1] : kNoTarget;
      b.y_first[i] = repeated ? kNoTarget : w[t + 1];
    }
  }
  return b;
}

struct Row {
  int step;
  double induction, prev_token, loss_rep, loss_first;
};

static std::vector<Row> train(int n_layer, const cxxopts::ParseResult& f, const std::string& name) {
  ModelConfig c;
  c.n_layer = n_layer, c.n_head = f["n-head"].as<int>(), c.n_embd = f["n-embd"].as<int>();
  c.block_size = f["block"].as<int>(), c.vocab_size = f["vocab"].as<int>(), c.attn_only = true;
  GPT model(c);
  model.init_weights(f["seed"].as<uint64_t>());
  AdamW opt;
  AdamWConfig acfg;
  acfg.lr = f["lr"].as<float>(), acfg.min_lr = acfg.lr / 10, acfg.warmup_steps = 100;
  const int steps = f["steps"].as<int>(), every = f["eval-every"].as<int>(), B = f["batch"].as<int>();
  const int T = c.block_size, V = c.vocab_size, n_min = 4, n_max = T / 2;
  Rng rng(f["seed"].as<uint64_t>() + 1), eval_rng(99);
  Batch eval = make_batch(64, T, V, n_min, n_max, eval_rng);  // fixed evaluation windows
  std::vector<Row> rows;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step <= steps; step++) {
    if (step % every == 0 || step == steps) {
      Row r{step, 0, 0, 0, 0};
      std::vector<HeadScores> scores = score_heads(model, V, 32, 7);
      for (const HeadScores& s : scores)
        r.induction = std::max(r.induction, s.induction.value()), r.prev_token = std::max(r.prev_token, s.previous_token.value());
      r.loss_rep = model.forward(eval.x.data(), eval.y_rep.data(), 64, T);
      r.loss_first = model.forward(eval.x.data(), eval.y_first.data(), 64, T);
      rows.push_back(r);
      std::printf("%s step %5d | induction %.3f | prev-token %.3f | loss repeated %.3f | loss first run %.3f | %.0fs\n",
                  name.c_str(), step, r.induction, r.prev_token, r.loss_rep, r.loss_first,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      std::fflush(stdout);
    }
    if (step == steps) break;
    Batch b = make_batch(B, T, V, n_min, n_max, rng);
    model.zero_grad();
    model.forward(b.x.data(), b.y_all.data(), B, T);
    model.backward();
    clip_global_norm(model.grads_memory, acfg.grad_clip);
    opt.update(model, acfg, learning_rate(acfg, step, steps));
  }
  return rows;
}

int main(int argc, char** argv) {
  cxxopts::Options options("induction", "Induction heads: 2-layer attention-only model vs a 1-layer control.");
  // clang-format off
  options.add_options()
    ("out", "output directory", cxxopts::value<std::string>()->default_value("out/induction"))
    ("steps", "training steps per model", cxxopts::value<int>()->default_value("1500"))
    ("eval-every", "steps between measurements", cxxopts::value<int>()->default_value("100"))
    ("batch", "sequences per step", cxxopts::value<int>()->default_value("16"))
    ("block", "window length", cxxopts::value<int>()->default_value("48"))
    ("vocab", "distinct tokens", cxxopts::value<int>()->default_value("32"))
    ("n-head", "heads per layer", cxxopts::value<int>()->default_value("4"))
    ("n-embd", "width", cxxopts::value<int>()->default_value("64"))
    ("lr", "peak learning rate", cxxopts::value<float>()->default_value("3e-3"))
    ("seed", "seed", cxxopts::value<uint64_t>()->default_value("1"))
    ("threads", "threads (0 = all cores)", cxxopts::value<int>()->default_value("0"))
    ("h,help", "show this help");
  // clang-format on
  try {
    auto f = options.parse(argc, argv);
    if (f.count("help")) return std::printf("%s\n", options.help().c_str()), 0;
    set_threads(f["threads"].as<int>() > 0 ? f["threads"].as<int>() : default_threads());
    const std::string out = f["out"].as<std::string>();
    std::system(("mkdir -p '" + out + "'").c_str());
    std::vector<Row> two = train(2, f, "2-layer"), one = train(1, f, "1-layer");
    std::string csv = "model,step,induction,prev_token,loss_repeated,loss_first\n";
    char line[256];
    Chart score{"Best induction score during training", "step", "induction score", {}};
    Chart loss{"Loss on the repeated part (copyable tokens)", "step", "loss (nats)", {}};
    for (auto [rows, label] : {std::pair{&two, "2-layer attn-only"}, std::pair{&one, "1-layer attn-only"}}) {
      Series s{label, {}, {}}, l{label, {}, {}};
      for (const Row& r : *rows) {
        std::snprintf(line, sizeof line, "%s,%d,%.4f,%.4f,%.4f,%.4f\n", label, r.step, r.induction, r.prev_token,
                      r.loss_rep, r.loss_first);
        csv += line;
        s.x.push_back(r.step), s.y.push_back(r.induction), l.x.push_back(r.step), l.y.push_back(r.loss_rep);
      }
      score.series.push_back(s), loss.series.push_back(l);
    }
    std::string table = "| model | induction score (start → end) | loss on repeated part (start → end) | loss on first run (end) |\n|---|---|---|---|\n";
    for (auto [rows, label] : {std::pair{&two, "2-layer attn-only"}, std::pair{&one, "1-layer attn-only"}}) {
      std::snprintf(line, sizeof line, "| %s | %.3f → %.3f | %.3f → %.3f | %.3f |\n", label, rows->front().induction,
                    rows->back().induction, rows->front().loss_rep, rows->back().loss_rep, rows->back().loss_first);
      table += line;
    }
    std::printf("\n%s\nln V = %.3f (the loss of a uniform guess)\n", table.c_str(), std::log((double)f["vocab"].as<int>()));
    const std::string s1 = render_svg(score), s2 = render_svg(loss);
    write_file_atomically(out + "/induction.csv", {{csv.data(), csv.size()}});
    write_file_atomically(out + "/induction_score.svg", {{s1.data(), s1.size()}});
    write_file_atomically(out + "/loss_repeated.svg", {{s2.data(), s2.size()}});
    write_file_atomically(out + "/table.md", {{table.data(), table.size()}});
    std::printf("wrote %s/induction.csv, induction_score.svg, loss_repeated.svg, table.md\n", out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "induction: error: %s\n", e.what());
    return 1;
  }
}
