// ./induction — does an induction head form? A 2-layer attention-only transformer and a 1-layer control are
// trained on a task where copying pays. Two tasks (--task):
//   periodic  a random run of n tokens (n drawn per sequence, so no single fixed-offset head solves it) repeated
//             until the window is full: every token after the first n is a copy of the one n positions back;
//   segment   random tokens, with one random segment of m tokens copied once to a random later place (source,
//             gap and m drawn per sequence): the copy's tokens after its first are predictable, nothing else.
//   shifted   periodic, but starting after a random number of random tokens.
// The default is segment with --loss copies (train on the copied tokens only). On the periodic tasks a 2-layer
// model learns to copy without an induction head: the right token recurs at every multiple of the period, so broad
// offset heads already favour it (see docs/lab.md).
// The copied tokens are found by an induction head: attend to the token after the previous occurrence of the
// current token. That needs to know, at each key, which token came before it — a previous-token head in an
// earlier layer — so one layer cannot build it. Every `--eval-every` steps we log
//   induction    the best head's induction score, per layer, on random distinct runs repeated twice (TransformerLens's
//                probe, head_scores.h). A layer-0 head cannot be an induction head (nothing has told its keys
//                what preceded them), so a layer-0 "induction" score can only come from position (an offset head
//                that happens to match the probe's period).
//   prev_token   the best previous-token score in layer 0
//   loss_rep     mean loss on the copyable targets; loss_first on the others
//
// --mixer mamba (or linear) trains the same two models with that mixer in every layer (docs/mamba.md). A
// Mamba layer's "pattern" is its hidden attention M (ops/mamba.h): not normalised and possibly negative. The
// scores here read every pattern as row shares of |P|: |P_ij| / Σ_j |P_ij|, which leaves a softmax pattern as it
// is (its rows are already non-negative and sum to 1) and makes M's scores comparable with a softmax head's: the
// share of the row's weight that sits on the pattern's positions. M weighs the conv's outputs, not the tokens: a
// Mamba layer whose conv already mixed the previous token in can copy without any previous-token pattern in M.
//   make induction                       build/bin/induction (writes build/induction/)
//   make induction-mamba                 the same with --mixer mamba (writes build/induction-mamba/)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>

#include "base/program_flags.h"
#include "optim/adamw.h"
#include "io/atomic_file.h"
#include "ops/cross_entropy.h"
#include "lab/head_scores.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "io/checkpoint.h"
#include "train/loop.h"
#include "train/snapshots.h"
#include "train/plan.h"
#include "train/train_config.h"
#include "lab/plot.h"
#include "base/rng.h"
#include "base/runtime.h"
#include "base/threads.h"

struct Batch {
  std::vector<int> x, y_all, y_rep, y_first;
};

// B windows of T + 1 tokens from [0, V); `copied[t]` says whether w[t] is a copy an induction head can predict.
//   periodic: a run of n ∈ [n_min, n_max] random tokens, then w[t] = w[t − n]
//   segment:  all random, then w[b + k] = w[a + k] for k < m, with m ∈ [n_min, n_max], source a, gap g ≥ 0 and
//             b = a + m + g drawn per window (w[b] itself is not predictable: nothing says where the copy starts)
static Batch make_batch(const std::string& task, int B, int T, int V, int n_min, int n_max, Rng& rng) {
  Batch b;
  b.x.resize((size_t)B * T), b.y_all.resize(b.x.size()), b.y_rep.resize(b.x.size()), b.y_first.resize(b.x.size());
  std::vector<int> w(T + 1);
  std::vector<char> copied(T + 1);
  for (int s = 0; s < B; s++) {
    const int n = n_min + rng.below(n_max - n_min + 1);
    std::fill(copied.begin(), copied.end(), 0);
    if (task == "periodic" || task == "shifted") {
      // shifted: the periodic part starts after p ∈ [0, T + 1 − 2n] random tokens, so absolute position says
      // nothing about where the copies are.
      const int p = task == "shifted" ? rng.below(T + 2 - 2 * n) : 0;
      for (int t = 0; t <= T; t++) w[t] = t < p + n ? rng.below(V) : w[t - n], copied[t] = t >= p + n;
    } else {
      for (int t = 0; t <= T; t++) w[t] = rng.below(V);
      const int a = rng.below(T + 2 - 2 * n), g = rng.below(T + 2 - 2 * n - a), start = a + n + g;
      for (int k = 0; k < n; k++) w[start + k] = w[a + k], copied[start + k] = k > 0;
    }
    for (int t = 0; t < T; t++) {
      const size_t i = (size_t)s * T + t;
      b.x[i] = w[t], b.y_all[i] = w[t + 1];
      b.y_rep[i] = copied[t + 1] ? w[t + 1] : kNoTarget;
      b.y_first[i] = copied[t + 1] ? kNoTarget : w[t + 1];
    }
  }
  return b;
}

struct Row {
  int step;
  double induction[2], prev_token, loss_rep, loss_first;  // induction: best head of layer 0 and of layer 1
  double duplicate[2];                                     // best duplicate-token head per layer
};

// score_heads (lab/head_scores.h), reading each pattern as row shares of |P| (see the top of this file).
static std::vector<HeadScores> row_share_scores(GPT& model, int vocab, int B, uint64_t seed) {
  const int L = model.config.n_layer, NH = model.config.n_head;
  const int T = 2 * (std::min(model.config.block_size, 2 * vocab) / 2);
  Rng rng(seed);
  std::vector<int> x = repeated_random_sequences(B, T / 2, vocab, rng);
  model.forward(x.data(), nullptr, B, T);
  std::vector<HeadScores> scores((size_t)L * NH);
  std::vector<float> P((size_t)T * T);
  for (int l = 0; l < L; l++) {
    const float* probs = model.mixing_weights(l);
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++) {
        const float* M = probs + ((size_t)b * NH + h) * T * T;
        for (int i = 0; i < T; i++) {
          double sum = 0;
          for (int j = 0; j < T; j++) sum += std::fabs(M[(size_t)i * T + j]);
          for (int j = 0; j < T; j++) P[(size_t)i * T + j] = sum > 0 ? (float)(std::fabs(M[(size_t)i * T + j]) / sum) : 0.0f;
        }
        score_pattern(scores[(size_t)l * NH + h], P.data(), &x[(size_t)b * T], T, model.masks()[l]);
      }
  }
  return scores;
}

// Every registered kind's own settings, as rows of ./train's table, in the order of kinds.h: a layer of any kind is
// configured here as in ./train.
static std::vector<Setting<TrainConfig>> kinds_settings() {
  std::vector<Setting<TrainConfig>> rows;
  for (const MixerKind* kind : mixer_kinds()) {
    for (const Setting<ModelConfig>& own : kind->settings) {
      for (const Setting<TrainConfig>& row : train_settings()) {
        if (own.key && row.key && std::string(row.key) == own.key) rows.push_back(row);
      }
    }
  }
  return rows;
}

// The settings this experiment shares with ./train, read through ./train's own table (train/train_config.cpp): the same
// flags, help lines and ranges; only the defaults are the experiment's (recipe()).
static std::vector<Setting<TrainConfig>> shared_settings() {
  std::vector<Setting<TrainConfig>> rows = select_settings(train_settings(), {"n_head", "n_embd", "block_size", "mixer"});
  for (const Setting<TrainConfig>& row : kinds_settings()) rows.push_back(row);
  const std::vector<Setting<TrainConfig>> run = select_settings(
      train_settings(), {"batch", "steps", "eval_every", "lr", "weight_decay", "seed", "threads", "snapshot_every",
                         "snapshot_keep"});
  rows.insert(rows.end(), run.begin(), run.end());
  return rows;
}
// The experiment's tokens as characters, so that its checkpoints open in the explorer: V of "+/0-9A-Za-z" (64),
// then the other printable ASCII characters (at most 94 in all).
static Tokenizer token_characters(int V) {
  std::string chars = "+/0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  for (char c = '!'; c <= '~'; c++)
    if (chars.find(c) == std::string::npos) chars.push_back(c);
  if (V > (int)chars.size())
    throw std::runtime_error("--vocab " + std::to_string(V) + ": the run folder's checkpoints name each token by a "
                             "printable character, and there are " + std::to_string(chars.size()));
  chars.resize(V);
  std::sort(chars.begin(), chars.end());
  return Tokenizer::from_vocab(chars, {}, "induction's tokens");
}

static TrainConfig recipe() {
  TrainConfig r;
  r.model.n_head = 4, r.model.n_embd = 64, r.model.block_size = 32;  // block_size: the window length
  r.batch = 64, r.steps = 2000, r.eval_every = 100;
  r.adamw.lr = 3e-3f, r.adamw.min_lr = 3e-4f, r.adamw.warmup_steps = 100, r.adamw.weight_decay = 0;
  r.seed = 1, r.threads = 0;
  // Snapshots for the explorer's timeline (docs/explore.md): 81 of them over the 2,000 steps, the phase change
  // resolved to 25 steps.
  r.snapshots.every = 25, r.snapshots.keep = 100;
  return r;
}

static std::vector<Row> train(int n_layer, const TrainConfig& cfg, const cxxopts::ParseResult& f,
                              const std::string& name) {
  ModelConfig c = cfg.model;
  c.n_layer = n_layer, c.vocab_size = f["vocab"].as<int>(), c.no_mlp = !f["mlp"].as<bool>();
  GPT model(c);
  model.init_weights(cfg.seed);
  // ./train's step (train/loop.h) with AdamW, down to a tenth of the peak rate at the end.
  TrainConfig training = cfg;
  training.optimizer = "adamw";
  training.adamw.min_lr = cfg.adamw.lr / 10;
  Replicas replicas(model, 1);
  AdamW state;
  Learner learner{replicas, plan_training(training).optimizer->kind, state};
  const std::string task = f["task"].as<std::string>();
  const bool copies_only = f["loss"].as<std::string>() == "copies";
  const int steps = cfg.steps, B = cfg.batch;
  const int every = std::max(1, cfg.eval_every > 0 ? cfg.eval_every : steps);  // 0: the start and the end only
  const int T = c.block_size, V = c.vocab_size, n_min = f["n-min"].as<int>();
  const int n_max = f["n-max"].as<int>() > 0 ? f["n-max"].as<int>() : T / 2;
  if (n_min < 2 || n_max < n_min || 2 * n_max > T + 1)
    throw std::runtime_error("need 2 ≤ --n-min ≤ --n-max ≤ (block + 1) / 2");
  Rng rng(cfg.seed + 1), eval_rng(99);
  Batch eval = make_batch(task, 64, T, V, n_min, n_max, eval_rng);  // fixed evaluation windows
  std::vector<Row> rows;
  // The run folder the explorer reads (make explore-induction): OUT/<name>/ with ckpt.safetensors at the end,
  // metrics.csv (train_loss: the step's batch loss on the copies; val_loss: the fixed windows' loss on the copies)
  // and snapshots/ every --snapshot-every steps (train/snapshots.h). The tokens are shown as characters.
  const std::string folder = f["out"].as<std::string>() + "/" + (n_layer == 2 ? "2-layer" : "1-layer");
  const Tokenizer tokenizer = token_characters(V);
  std::system(("mkdir -p '" + folder + "'").c_str());
  prepare_snapshots(folder, false, 0);
  std::string metrics = "step,train_loss,val_loss\n";
  double last_batch_loss = NAN;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step <= steps; step++) {
    if (snapshot_due(cfg.snapshots, step)) write_snapshot(folder, step, cfg.snapshots, model, tokenizer, Objective::CLM);
    if (step % every == 0 || step == steps) {
      Row r{step, {0, 0}, 0, 0, 0, {0, 0}};
      std::vector<HeadScores> scores = row_share_scores(model, V, 32, 7);
      for (size_t i = 0; i < scores.size(); i++) {
        const int layer = (int)i / c.n_head;
        r.induction[layer] = std::max(r.induction[layer], scores[i].induction.value());
        r.duplicate[layer] = std::max(r.duplicate[layer], scores[i].duplicate_token.value());
        if (layer == 0) r.prev_token = std::max(r.prev_token, scores[i].previous_token.value());
      }
      r.loss_rep = model.forward(eval.x.data(), eval.y_rep.data(), 64, T);
      r.loss_first = model.forward(eval.x.data(), eval.y_first.data(), 64, T);
      rows.push_back(r);
      char cells[96];
      std::snprintf(cells, sizeof cells, "%d,%s,%.6f\n", step,
                    std::isfinite(last_batch_loss) ? std::to_string(last_batch_loss).c_str() : "", r.loss_rep);
      metrics += cells;
      std::printf("%s step %5d | induction L0 %.3f L1 %.3f | prev-token L0 %.3f | duplicate L0 %.3f L1 %.3f | loss "
                  "copies %.3f | loss others %.3f | %.0fs\n", name.c_str(), step, r.induction[0], r.induction[1],
                  r.prev_token, r.duplicate[0], r.duplicate[1], r.loss_rep, r.loss_first,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      std::fflush(stdout);
    }
    if (step == steps) break;
    Batch b = make_batch(task, B, T, V, n_min, n_max, rng);
    // --loss copies trains on the copied tokens only: the others are pure noise (their best prediction is uniform),
    // so leaving them out keeps the gradient on what an induction head can learn.
    last_batch_loss =
        train_step(learner, training, step, {b.x.data(), copies_only ? b.y_rep.data() : b.y_all.data(), B, T}).loss;
  }
  save_checkpoint(checkpoint_path(folder), model, tokenizer, nullptr, Objective::CLM);
  write_file_atomically(folder + "/metrics.csv", {{metrics.data(), metrics.size()}});
  return rows;
}

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("induction", "Induction heads: 2-layer attention-only model vs a 1-layer control.");
  // clang-format off
  options.add_options()
    ("out", "output directory", cxxopts::value<std::string>()->default_value("build/induction"))
    ("task", "periodic, shifted or segment (see the top of experiments/induction.cpp)",
     cxxopts::value<std::string>()->default_value("segment"))
    ("loss", "train on all tokens or only on the copies (all|copies)", cxxopts::value<std::string>()->default_value("copies"))
    ("vocab", "distinct tokens", cxxopts::value<int>()->default_value("64"))
    ("n-min", "shortest period or copied segment", cxxopts::value<int>()->default_value("4"))
    ("n-max", "longest period or copied segment (0 = block / 2)", cxxopts::value<int>()->default_value("0"))
    ("mlp", "give every block its MLP (default: attention-only, as the induction-head models of Olsson et al.)", cxxopts::value<bool>()->default_value("false"));
  // clang-format on
  add_flags(options, shared_settings(), recipe());
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& f = *parsed;
    const std::string task = f["task"].as<std::string>();
    if (task != "periodic" && task != "shifted" && task != "segment")
      throw std::runtime_error("--task must be periodic, shifted or segment");
    TrainConfig cfg = recipe();
    apply_flags(f, shared_settings(), cfg);
    check_ranges(shared_settings(), cfg);
    set_threads(cfg.threads > 0 ? cfg.threads : default_threads());
    const std::string out = f["out"].as<std::string>();
    std::system(("mkdir -p '" + out + "'").c_str());
    std::vector<Row> two = train(2, cfg, f, "2-layer"), one = train(1, cfg, f, "1-layer");
    // "attn-only" for the GPT's own mixer without MLPs, else the mixer's kind (and "+ MLP").
    const std::string kind = cfg.model.mixer == ModelConfig{}.mixer ? "attn" : cfg.model.mixer;
    const std::string suffix = f["mlp"].as<bool>() ? " + MLP" : "-only";
    const std::string two_label = "2-layer " + kind + suffix, one_label = "1-layer " + kind + suffix;
    std::string csv = "model,step,induction_L0,induction_L1,prev_token_L0,duplicate_L0,duplicate_L1,loss_copies,loss_others\n";
    char line[256];
    Chart score{"Best induction score during training (" + task + " task)", "step", "induction score", {}};
    Chart loss{"Loss on the copied tokens", "step", "loss (nats)", {}};
    for (auto [rows, label] : {std::pair{&two, two_label.c_str()}, std::pair{&one, one_label.c_str()}}) {
      Series s{rows == &two ? "2-layer: layer 1" : "1-layer: layer 0", {}, {}}, l{label, {}, {}};
      for (const Row& r : *rows) {
        std::snprintf(line, sizeof line, "%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", label, r.step, r.induction[0],
                      rows == &one ? NAN : r.induction[1], r.prev_token, r.duplicate[0],
                      rows == &one ? NAN : r.duplicate[1], r.loss_rep, r.loss_first);
        csv += line;
        s.x.push_back(r.step), s.y.push_back(rows == &one ? r.induction[0] : r.induction[1]);
        l.x.push_back(r.step), l.y.push_back(r.loss_rep);
      }
      score.series.push_back(s), loss.series.push_back(l);
    }
    // The plotted score: layer 1's best head for the 2-layer model (where an induction head can be), layer 0's for
    // the control (its only layer).
    std::string table =
        "| model | induction score, best head (start → end) | previous-token, layer 0 (end) | duplicate-token, best "
        "head (end) | loss on copies (start → end) | loss on the rest (end) |\n|---|---|---|---|---|---|\n";
    for (auto [rows, label] : {std::pair{&two, two_label.c_str()}, std::pair{&one, one_label.c_str()}}) {
      const Row &a = rows->front(), &z = rows->back();
      const bool deep = rows == &two;
      std::snprintf(line, sizeof line, "| %s | %s %.3f → %.3f%s | %.3f | %.3f | %.3f → %.3f | %.3f |\n", label,
                    deep ? "layer 1:" : "layer 0:", deep ? a.induction[1] : a.induction[0],
                    deep ? z.induction[1] : z.induction[0],
                    deep ? (" (layer 0: " + std::to_string(z.induction[0]).substr(0, 5) + ")").c_str() : "",
                    z.prev_token, std::max(z.duplicate[0], deep ? z.duplicate[1] : 0.0), a.loss_rep, z.loss_rep,
                    z.loss_first);
      table += line;
    }
    std::printf("\n%s\nln V = %.3f (the loss of a uniform guess)\n", table.c_str(), std::log((double)f["vocab"].as<int>()));
    const std::string s1 = render_svg(score), s2 = render_svg(loss);
    write_file_atomically(out + "/induction.csv", {{csv.data(), csv.size()}});
    write_file_atomically(out + "/induction_score.svg", {{s1.data(), s1.size()}});
    write_file_atomically(out + "/loss_copies.svg", {{s2.data(), s2.size()}});
    write_file_atomically(out + "/table.md", {{table.data(), table.size()}});
    std::printf("wrote %s/induction.csv, induction_score.svg, loss_copies.svg, table.md\n", out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "induction: error: %s\n", e.what());
    return 1;
  }
}
