// ./state_tracking — the task where a recurrence should beat softmax attention: keep a running state and carry it
// past the lengths seen in training (Grazzi et al. 2024, "Unlocking State-Tracking in Linear RNNs Through Negative
// Eigenvalues", arXiv 2411.12537). Two tasks, each a sequence of random tokens with a target at every position:
//     parity   tokens in {0, 1};     target at t = (x_0 + … + x_t) mod 2
//     mod3     tokens in {0, 1, 2};  target at t = (x_0 + … + x_t) mod 3
// The target at position t is the answer for the prefix of length t + 1, so one sequence of --train-length tokens
// trains every length up to it at once. Models train on --train-length (40) and are tested on 256 held-out
// sequences of --test-length (256): accuracy at each position is the accuracy at that prefix length. Chance is 1/2
// and 1/3.
//
// Why a recurrence might win here and softmax attention should not: a layer whose state evolves as h_t = A_t h_{t−1}
// + b_t can hold a parity in the sign of one direction of h if a token 1 can map that direction to its negative, an
// eigenvalue of A_t near −1. A transition with eigenvalues in [0, 1] (a decay, or linear attention's sum) can only
// shrink or count; reading "count mod 2" off a count is then a job for the MLP, at counts never seen in training.
// Softmax attention averages over the prefix: the fraction of ones is not the parity. docs/state_tracking.md says
// what this predicts for each kind's transition before giving the numbers.
//
// Models (--models, comma-separated, spelled as in ./recall: a kind, a hybrid a+b, either with model settings
// kind:key=value, e.g. "deltanet:deltanet_negative_eigenvalues=1", "rwkv:positions=none"); default: every
// registered kind, each with learned positions and with none. Each model trains at every depth of --layers and for
// --seeds training seeds (seed, seed + 1, …; the held-out sequences are the same for all). Output in --out:
// state_tracking.csv (one row per run and length window), state_tracking.md (the tables: mean ± sd over seeds),
// and one plot per task and depth, state_tracking_<task>_<L>l.svg (accuracy against length, error bars = sd).
//   make -j2 state-tracking           (mk/lab.mk: parity and mod3 side by side, one thread each)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <map>
#include <sstream>

#include "base/program_flags.h"
#include "base/read_file.h"
#include "base/rng.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "io/atomic_file.h"
#include "lab/plot.h"
#include "lab/seeds.h"
#include "lab/table_file.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "optim/adamw.h"
#include "train/loop.h"
#include "train/plan.h"
#include "train/train_config.h"

namespace {

struct Task {
  std::string name;  // "parity" or "mod3"
  int modulus;       // tokens and targets are residues mod this
};

Task parse_task(const std::string& name) {
  if (name == "parity") return {name, 2};
  if (name == "mod3") return {name, 3};
  throw std::runtime_error("--tasks: '" + name + "' is not a task (parity, mod3)");
}

// B sequences of T random tokens: x (B, T), and y (B, T) the running sum mod task.modulus.
void make_batch(const Task& task, int B, int T, Rng& rng, std::vector<int>& x, std::vector<int>& y) {
  x.resize((size_t)B * T);
  y.resize((size_t)B * T);
  for (int b = 0; b < B; b++) {
    int sum = 0;
    for (int t = 0; t < T; t++) {
      const size_t i = (size_t)b * T + t;
      x[i] = rng.below(task.modulus);
      sum = (sum + x[i]) % task.modulus;
      y[i] = sum;
    }
  }
}

// Accuracy at each position t of (B, T) held-out sequences: the fraction of rows whose argmax is the target.
std::vector<double> accuracy_by_position(GPT& model, const std::vector<int>& x, const std::vector<int>& y, int B,
                                         int T) {
  model.forward(x.data(), nullptr, B, T);
  const int V = model.config.vocab_size;
  std::vector<double> right(T, 0.0);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const size_t i = (size_t)b * T + t;
      const float* row = model.logits() + i * V;
      right[t] += std::max_element(row, row + V) - row == y[i];
    }
  for (double& r : right) r /= B;
  return right;
}

struct Run {
  std::string task;
  std::string model;  // the model's label, as given in --models
  int layers = 0;
  uint64_t seed = 0;
  std::vector<double> accuracy;  // per position: accuracy[t] is the accuracy at prefix length t + 1
  double seconds = 0;            // training time
  double loss = 0;               // the last step's training loss
};

// What every run trains and tests with (the flags of the same names).
struct Recipe {
  int width = 64;
  int n_head = 1;
  int steps = 1000;
  int batch = 64;
  float lr = 3e-3f;
  int train_length = 40;
  int test_length = 256;
  int eval_rows = 256;  // held-out sequences
  int report_every = 0;
};

Run train_and_test(const Task& task, const ModelVariant& m, int layers, uint64_t seed, const Recipe& r) {
  ModelConfig base;
  base.n_layer = layers;
  base.n_head = r.n_head;
  base.n_embd = r.width;
  base.block_size = r.test_length;  // learned positions past train_length exist but are never trained
  base.vocab_size = task.modulus;
  const ModelConfig c = with_variant(base, m);
  GPT model(c);
  model.init_weights(seed);
  // ./train's step (train/loop.h) with AdamW from its defaults, a tenth of the peak rate at the end, 50 warm-up
  // steps and no weight decay (the recipe of ./recall).
  TrainConfig training;
  training.steps = r.steps;
  training.batch = r.batch;
  training.optimizer = "adamw";
  training.adamw = AdamWConfig();
  training.adamw.lr = r.lr;
  training.adamw.min_lr = r.lr / 10;
  training.adamw.warmup_steps = 50;
  training.adamw.weight_decay = 0.0f;
  Replicas replicas(model, 1);
  AdamW state;
  Learner learner{replicas, plan_training(training).optimizer->kind, state};
  Rng rng(seed + 1000), eval_rng(12345);
  std::vector<int> x, y, ex, ey;
  make_batch(task, r.eval_rows, r.test_length, eval_rng, ex, ey);
  Run run;
  run.task = task.name;
  run.model = m.label;
  run.layers = layers;
  run.seed = seed;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < r.steps; step++) {
    make_batch(task, r.batch, r.train_length, rng, x, y);
    run.loss = train_step(learner, training, step, {x.data(), y.data(), r.batch, r.train_length}).loss;
    if (r.report_every > 0 && (step + 1) % r.report_every == 0 && step + 1 < r.steps) {
      const std::vector<double> a = accuracy_by_position(model, ex, ey, r.eval_rows, r.test_length);
      std::printf("  %-6s %-36s L%d seed %llu  step %5d  loss %.3f  acc ≤%d %.1f%%  at %d %.1f%%\n", task.name.c_str(),
                  m.label.c_str(), layers, (unsigned long long)seed, step + 1, run.loss, r.train_length,
                  100 * a[r.train_length - 1], r.test_length, 100 * a.back());
      std::fflush(stdout);
    }
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.accuracy = accuracy_by_position(model, ex, ey, r.eval_rows, r.test_length);
  return run;
}

// The table's length windows: (0, train], then (train, 64], (64, 128], … doubling up to the test length.
std::vector<int> window_ends(int train_length, int test_length) {
  std::vector<int> ends{train_length};
  for (int end = 64; end < test_length; end *= 2)
    if (end > train_length) ends.push_back(end);
  ends.push_back(test_length);
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  return ends;
}

// Mean accuracy over prefix lengths (from, to].
double window_mean(const std::vector<double>& accuracy, int from, int to) {
  double sum = 0;
  for (int t = from; t < to; t++) sum += accuracy[t];
  return sum / (to - from);
}

std::vector<int> depth_list(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : comma_list(text)) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 64) throw std::runtime_error("--layers: '" + item + "' is not a depth in [1, 64]");
    out.push_back((int)v);
  }
  if (out.empty()) throw std::runtime_error("--layers: name at least one depth");
  return out;
}

// Every registered kind, with learned positions and with none.
std::string every_kind_both_positions() {
  std::string list;
  for (const MixerKind* kind : mixer_kinds()) {
    list += (list.empty() ? "" : ",") + std::string(kind->name);
    list += "," + std::string(kind->name) + ":positions=none";
  }
  return list;
}

// One table per task and depth: a row per model, a column per length window and one for the last 8 lengths, mean ±
// sd over seeds in percent.
std::string tables(const std::vector<Run>& runs, const std::vector<Task>& tasks, const std::vector<ModelVariant>& models,
                   const std::vector<int>& depths, const std::vector<int>& ends) {
  std::string md;
  for (const Task& task : tasks)
    for (int layers : depths) {
      md += "### " + task.name + ", " + std::to_string(layers) + (layers == 1 ? " layer" : " layers") + "\n\n| model |";
      for (size_t w = 0; w < ends.size(); w++)
        md += " " + std::to_string(w ? ends[w - 1] + 1 : 1) + "–" + std::to_string(ends[w]) + (w ? "" : " (trained)") + " |";
      md += " " + std::to_string(ends.back() - 7) + "–" + std::to_string(ends.back()) + " | train s |\n|---|";
      for (size_t w = 0; w <= ends.size() + 1; w++) md += "---|";
      md += "\n";
      for (const ModelVariant& m : models) {
        std::vector<std::vector<double>> cells(ends.size() + 2);
        for (const Run& r : runs) {
          if (r.task != task.name || r.model != m.label || r.layers != layers) continue;
          for (size_t w = 0; w < ends.size(); w++) cells[w].push_back(100 * window_mean(r.accuracy, w ? ends[w - 1] : 0, ends[w]));
          cells[ends.size()].push_back(100 * window_mean(r.accuracy, (int)r.accuracy.size() - 8, (int)r.accuracy.size()));
          cells[ends.size() + 1].push_back(r.seconds);
        }
        if (cells[0].empty()) continue;
        md += "| " + m.label + " |";
        for (size_t w = 0; w < ends.size() + 1; w++) md += " " + mean_spread(cells[w], "%.1f") + " |";
        md += " " + mean_spread(cells.back(), "%.0f") + " |\n";
      }
      md += "\n";
    }
  return md;
}

// Accuracy against length in windows of 8 positions, mean over seeds with the sd as error bars (every fourth
// window): a series per model, coloured by the model's kind and setting, dashed without positions.
Chart chart(const std::vector<Run>& runs, const Task& task, int layers, const std::vector<ModelVariant>& models,
            const Recipe& r) {
  Chart c{task.name + ", " + std::to_string(layers) + " layer(s): trained on lengths ≤ " + std::to_string(r.train_length),
          "prefix length", "accuracy (mean over seeds ± sd)", {}};
  std::map<std::string, int> colours;
  const int window = 8;
  for (const ModelVariant& m : models) {
    std::string family = m.label;
    const size_t none = family.find(":positions=none");
    if (none != std::string::npos) family.erase(none, 15);
    if (!colours.count(family)) colours[family] = (int)colours.size();
    Series s{m.label, {}, {}, colours[family], none != std::string::npos, {}};
    for (int end = window; end <= r.test_length; end += window) {
      std::vector<double> seeds;
      for (const Run& run : runs)
        if (run.task == task.name && run.model == m.label && run.layers == layers)
          seeds.push_back(window_mean(run.accuracy, end - window, end));
      if (seeds.empty()) continue;
      s.x.push_back(end);
      s.y.push_back(mean_of(seeds));
      s.err.push_back(end % (4 * window) == 0 ? sample_sd(seeds) : 0.0);  // a bar every 32 positions: readable
    }
    c.series.push_back(s);
  }
  return c;
}

// state_tracking.csv, state_tracking.md and the plots in `out`, from the runs so far (`seeds` of them per row).
void write_results(const std::string& out, const std::vector<Run>& runs, const std::vector<Task>& tasks,
                   const std::vector<ModelVariant>& models, const std::vector<int>& depths, const Recipe& r, int seeds) {
  const std::vector<int> ends = window_ends(r.train_length, r.test_length);
  char head[512];
  std::snprintf(head, sizeof head,
                "Accuracy (%%) on %d held-out sequences of %d tokens, mean over the prefix lengths of each column, "
                "mean ± sd over %d training seed(s). Trained on sequences of %d tokens: width %d, %d head(s), "
                "%d steps of batch %d, AdamW lr %g. Chance: parity 50%%, mod3 33.3%%.\n\n",
                r.eval_rows, r.test_length, seeds, r.train_length, r.width, r.n_head, r.steps, r.batch, r.lr);
  const std::string md = head + tables(runs, tasks, models, depths, ends);
  std::string csv = "task,model,layers,seed,from,to,accuracy,train_seconds,train_loss\n";
  char line[512];
  for (const Run& run : runs)
    for (int end = 8; end <= r.test_length; end += 8) {
      std::snprintf(line, sizeof line, "%s,\"%s\",%d,%llu,%d,%d,%.17g,%.1f,%.4f\n", run.task.c_str(), run.model.c_str(),
                    run.layers, (unsigned long long)run.seed, end - 7, end, window_mean(run.accuracy, end - 8, end),
                    run.seconds, run.loss);
      csv += line;
    }
  write_file_atomically(out + "/state_tracking.csv", {{csv.data(), csv.size()}});
  write_file_atomically(out + "/state_tracking.md", {{md.data(), md.size()}});
  for (const Task& task : tasks)
    for (int layers : depths) {
      const std::string svg = render_svg(chart(runs, task, layers, models, r));
      const std::string name = "state_tracking_" + task.name + "_" + std::to_string(layers) + "l.svg";
      write_file_atomically(out + "/" + name, {{svg.data(), svg.size()}});
    }
}


// The runs of earlier invocations' state_tracking.csv files (--from), each position's accuracy its window's (the
// windows of 8 the file holds). Throws naming the file and line of a row it cannot read.
std::vector<Run> read_runs(const std::vector<std::string>& paths) {
  std::vector<Run> runs;
  for (const std::string& path : paths)
    for_each_csv_row(path, "results of --from", 9, [&](const std::vector<std::string>& cells) {
      // task,model,layers,seed,from,to,accuracy,train_seconds,train_loss
      const std::string& task = cells[0];
      const std::string& model = cells[1];
      const int layers = (int)cell_number(cells, 2, "layers");
      const uint64_t seed = (uint64_t)cell_number(cells, 3, "seed");
      const int from = (int)cell_number(cells, 4, "from");
      const int to = (int)cell_number(cells, 5, "to");
      if (from < 1 || to < from || to > 4096) throw std::runtime_error("not a window of lengths");
      const bool same_run = !runs.empty() && runs.back().task == task && runs.back().model == model &&
                            runs.back().layers == layers && runs.back().seed == seed;
      if (!same_run) {
        Run run;
        run.task = task;
        run.model = model;
        run.layers = layers;
        run.seed = seed;
        run.seconds = cell_number(cells, 7, "train_seconds");
        run.loss = cell_number(cells, 8, "train_loss");
        runs.push_back(run);
      }
      runs.back().accuracy.resize(to, cell_number(cells, 6, "accuracy"));
    });
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("state_tracking", "Parity and counting mod 3 past the training length.");
  // clang-format off
  options.add_options()
    ("out", "output directory", cxxopts::value<std::string>()->default_value("build/state_tracking"))
    ("tasks", "comma-separated: parity, mod3", cxxopts::value<std::string>()->default_value("parity,mod3"))
    ("models", "comma-separated models, spelled as in ./recall --models (kind, a+b, kind:key=value); default: "
               "every kind (" + mixer_kind_names() + "), with learned positions and with none",
     cxxopts::value<std::string>()->default_value(""))
    ("from", "comma-separated state_tracking.csv files of earlier runs (e.g. one per task): no training; their rows "
             "become the tables and plots in --out", cxxopts::value<std::string>()->default_value(""))
    ("also", "models trained after --models' list (e.g. a kind's ablation beside the default list)",
     cxxopts::value<std::string>()->default_value(""))
    ("layers", "comma-separated depths", cxxopts::value<std::string>()->default_value("1,2"))
    ("seeds", "training seeds per model and depth", cxxopts::value<int>()->default_value("3"))
    ("seed", "the first training seed", cxxopts::value<uint64_t>()->default_value("1"))
    ("width", "model width C", cxxopts::value<int>()->default_value("64"))
    ("n-head", "heads per layer", cxxopts::value<int>()->default_value("1"))
    ("steps", "training steps per run", cxxopts::value<int>()->default_value("1500"))
    ("batch", "sequences per step", cxxopts::value<int>()->default_value("64"))
    ("lr", "AdamW's peak learning rate", cxxopts::value<float>()->default_value("0.003"))
    ("train-length", "tokens per training sequence (every prefix length up to it is trained)", cxxopts::value<int>()->default_value("40"))
    ("test-length", "tokens per held-out sequence", cxxopts::value<int>()->default_value("256"))
    ("threads", "threads (0 = the default)", cxxopts::value<int>()->default_value("0"))
    ("report-every", "print held-out accuracy every N steps (0 = only at the end)", cxxopts::value<int>()->default_value("0"));
  // clang-format on
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& f = *parsed;
    Recipe r;
    r.width = f["width"].as<int>();
    r.n_head = f["n-head"].as<int>();
    r.steps = f["steps"].as<int>();
    r.batch = f["batch"].as<int>();
    r.lr = f["lr"].as<float>();
    r.train_length = f["train-length"].as<int>();
    r.test_length = f["test-length"].as<int>();
    r.report_every = f["report-every"].as<int>();
    const int seeds = f["seeds"].as<int>();
    const int threads = f["threads"].as<int>();
    if (r.steps < 1) throw std::runtime_error("--steps must be ≥ 1");
    if (r.batch < 1) throw std::runtime_error("--batch must be ≥ 1");
    if (!(r.lr > 0 && r.lr < 1)) throw std::runtime_error("--lr must be in (0, 1)");
    if (seeds < 1 || seeds > 100) throw std::runtime_error("--seeds must be in [1, 100]");
    if (threads < 0) throw std::runtime_error("--threads must be ≥ 0");
    if (r.train_length < 1) throw std::runtime_error("--train-length must be ≥ 1");
    if (r.test_length < r.train_length || r.test_length > 4096)
      throw std::runtime_error("--test-length must be in [--train-length, 4096]");
    std::vector<Task> tasks;
    for (const std::string& name : comma_list(f["tasks"].as<std::string>())) tasks.push_back(parse_task(name));
    if (tasks.empty()) throw std::runtime_error("--tasks: name at least one task");
    const std::vector<int> depths = depth_list(f["layers"].as<std::string>());
    std::string model_list = f["models"].as<std::string>();
    if (model_list.empty()) model_list = every_kind_both_positions();
    model_list += "," + f["also"].as<std::string>();
    std::vector<ModelVariant> models;
    for (const std::string& name : comma_list(model_list)) models.push_back(parse_model_variant(name));
    if (models.empty()) throw std::runtime_error("--models: name at least one model");
    for (const ModelVariant& m : models) {  // a bad model or size throws here, before any training
      ModelConfig check;
      check.n_layer = depths[0];
      check.n_head = r.n_head;
      check.n_embd = r.width;
      check.block_size = r.test_length;
      check.vocab_size = 3;
      validate(with_variant(check, m));
    }
    set_threads(threads > 0 ? threads : default_threads());
    const std::string out = f["out"].as<std::string>();
    std::system(("mkdir -p '" + out + "'").c_str());
    const auto start = std::chrono::steady_clock::now();

    if (!f["from"].as<std::string>().empty()) {
      const std::vector<Run> read = read_runs(comma_list(f["from"].as<std::string>()));
      if (read.empty()) throw std::runtime_error("--from: the files hold no runs");
      std::vector<Task> tasks_read;
      std::vector<int> depths_read;
      std::vector<uint64_t> seeds_read;
      for (const Run& run : read) {
        if (std::none_of(tasks_read.begin(), tasks_read.end(), [&](const Task& t) { return t.name == run.task; }))
          tasks_read.push_back(parse_task(run.task));
        if (std::find(depths_read.begin(), depths_read.end(), run.layers) == depths_read.end())
          depths_read.push_back(run.layers);
        if (std::find(seeds_read.begin(), seeds_read.end(), run.seed) == seeds_read.end()) seeds_read.push_back(run.seed);
      }
      Recipe as_read = r;
      as_read.test_length = read.empty() ? r.test_length : (int)read[0].accuracy.size();
      write_results(out, read, tasks_read, models, depths_read, as_read, (int)seeds_read.size());
      std::printf("%s\nwrote in %s from %s\n", read_regular_file(out + "/state_tracking.md").c_str(), out.c_str(),
                  f["from"].as<std::string>().c_str());
      return 0;
    }
    // Seeds outermost, so that a run stopped early has whole seeds of every row; the files are rewritten after each
    // training run.
    std::vector<Run> runs;
    for (int s = 0; s < seeds; s++)
      for (const Task& task : tasks)
        for (int layers : depths)
          for (const ModelVariant& m : models) {
            runs.push_back(train_and_test(task, m, layers, f["seed"].as<uint64_t>() + s, r));
            const Run& run = runs.back();
            std::printf("%-6s %-40s L%d seed %llu | acc ≤%d %5.1f%%  %d–%d %5.1f%%  at %d %5.1f%% | loss %.3f | %.0fs\n",
                        task.name.c_str(), m.label.c_str(), layers, (unsigned long long)run.seed, r.train_length,
                        100 * window_mean(run.accuracy, 0, r.train_length), r.train_length + 1, r.test_length,
                        100 * window_mean(run.accuracy, r.train_length, r.test_length), r.test_length,
                        100 * run.accuracy.back(), run.loss, run.seconds);
            std::fflush(stdout);
            write_results(out, runs, tasks, models, depths, r, s + 1);
          }
    std::printf("\n%s\ntotal %.0fs; wrote in %s: state_tracking.csv, state_tracking.md and a plot per task and depth\n",
                read_regular_file(out + "/state_tracking.md").c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "state_tracking: error: %s\n", e.what());
    return 1;
  }
}
