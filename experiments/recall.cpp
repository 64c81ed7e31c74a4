// ./recall — multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"): what a fixed-size state can
// and cannot remember. Every sequence is N key–value pairs followed by Q queries:
//     k₁ v₁ k₂ v₂ … k_N v_N   q₁ a₁ q₂ a₂ … q_Q a_Q        (keys distinct, each qᵢ one of the keys, aᵢ its value)
// Keys come from the first half of the vocabulary and values from the second; a key's value is drawn afresh in
// every sequence, so nothing can be memorised in the weights: the model must read the pairs from its context. The
// loss is on the answers only (predict aᵢ at the position of qᵢ), and accuracy is argmax = aᵢ on a fixed set of
// held-out sequences.
//
// Softmax attention can look any pair up exactly, however many there are. A linear-attention layer carries its
// whole past in S = Σ φ(k_j) v_jᵀ, HS × HS numbers per head, so it can hold about HS² "bits of association" and
// no more: recall should fall as N grows at a fixed width, and rise with the width at a fixed N. A hybrid keeps
// one softmax layer among linear ones. Two sweeps, each for every model of --models:
//   pairs   N ∈ --pairs at width --width
//   width   C ∈ --widths at N = --fixed-pairs
// Every model has --n-layer layers of --n-head heads (default 1, so the state of a linear layer is HS² + HS =
// C² + C numbers), with MLPs, trained for --steps on fresh batches, for --seeds training seeds (the held-out
// sequences are the same for all). Output in --out: recall.csv (a row per run), recall.md (the tables, mean ± sd
// over seeds), recall_pairs.svg, recall_width.svg and recall_state.svg (the width sweep's recall against the bytes
// a layer keeps while decoding: Zoology's figure; error bars = sd over seeds). See docs/recall.md for measured runs.
//
// Bound pairs (--bound, the default). With each pair written as two tokens "k v", a model must first *bind* each
// value to the key before it (a previous-token head, or the short convolution that Zoology's models put in front
// of every mixer) and only then look the query up. At the budgets of a 2-core machine no model here learned the
// binding — softmax included, up to 5000 steps (docs/recall.md, "What did not work") — so the experiment would not
// separate anything. With --bound each pair is one token of its own (id vocab + key·vocab/2 + value − vocab/2),
// the binding is given, and what is measured is the lookup alone: the part where a fixed-size state and a growing
// key/value cache differ. --bound=false restores the two-token form.
//
// Models (--models, a comma-separated list; default every registered kind): a mixer kind ("linear"), a hybrid with
// one kind per layer joined by '+' ("softmax+linear"), and either with model settings of its kinds after ':'
// ("rwkv:rwkv_erase=0", "mamba:ssm_selective=0"; ModelVariant, model/config.h), so that a kind's ablations are rows
// too, with nothing here that knows the kinds. A whole-number setting given as "match" ("mamba:ssm_state=match")
// takes, at each width, the value in [1, 4096] whose state per layer is nearest --match-state's (a model spelled
// the same way), so that two fixed-size states are compared at (nearly) equal size (ties: the smaller value).
// The state column of the tables is what each layer carries while decoding (Mixer::state_floats: softmax's
// key/value cache for the whole sequence, 2·C·T; a recurrence's fixed state).
//   make recall                          (RECALL_FLAGS="--steps 4000" etc. to change the budget)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <memory>
#include <set>
#include <sstream>

#include "base/program_flags.h"
#include "base/rng.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "io/atomic_file.h"
#include "lab/plot.h"
#include "lab/seeds.h"
#include "lab/table_file.h"
#include "optim/adamw.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "train/loop.h"
#include "train/plan.h"
#include "train/train_config.h"
#include "ops/cross_entropy.h"

namespace {

struct Task {
  int pairs, queries, vocab;  // keys are [0, vocab/2), values [vocab/2, vocab)
  bool bound = false;         // each pair is one token (see --bound)
  int pair_span() const { return bound ? 1 : 2; }
  int length() const { return pair_span() * pairs + 2 * queries - 1; }  // inputs: the last answer is only a target
  // Bound pairs take their own ids after the keys and values: vocab + key · (vocab/2) + (value − vocab/2).
  int model_vocab() const { return bound ? vocab + (vocab / 2) * (vocab / 2) : vocab; }
};

// B sequences: x (B, T) inputs, y (B, T) targets with kNoTarget everywhere but the answers.
void make_batch(const Task& task, int B, Rng& rng, std::vector<int>& x, std::vector<int>& y) {
  const int T = task.length(), half = task.vocab / 2, span = task.pair_span();
  x.assign((size_t)B * T, 0), y.assign((size_t)B * T, kNoTarget);
  std::vector<int> keys(half), values(task.pairs), seq(T + 1);
  for (int b = 0; b < B; b++) {
    for (int k = 0; k < half; k++) keys[k] = k;
    for (int i = 0; i < task.pairs; i++) std::swap(keys[i], keys[i + rng.below(half - i)]);  // N distinct keys
    for (int i = 0; i < task.pairs; i++) {
      values[i] = half + rng.below(half);
      if (task.bound) seq[i] = task.vocab + keys[i] * half + (values[i] - half);
      else seq[2 * i] = keys[i], seq[2 * i + 1] = values[i];
    }
    const int queries_at = span * task.pairs;
    for (int q = 0; q < task.queries; q++) {
      const int i = rng.below(task.pairs), at = queries_at + 2 * q;
      seq[at] = keys[i], seq[at + 1] = values[i];
    }
    for (int t = 0; t < T; t++) {
      x[(size_t)b * T + t] = seq[t];
      if (t >= queries_at && (t - queries_at) % 2 == 0) y[(size_t)b * T + t] = seq[t + 1];  // at a query
    }
  }
}

// Fraction of answers whose argmax logit is the right value.
double accuracy(GPT& model, const std::vector<int>& x, const std::vector<int>& y, int B, int T) {
  model.forward(x.data(), nullptr, B, T);
  const int V = model.config.vocab_size;
  long right = 0, total = 0;
  for (size_t i = 0; i < (size_t)B * T; i++) {
    if (y[i] == kNoTarget) continue;
    const float* row = model.logits() + i * V;
    right += std::max_element(row, row + V) - row == y[i];
    total++;
  }
  return total ? (double)right / total : 0.0;
}

struct Result {
  std::string model, mixer;
  int pairs, width;
  uint64_t seed;
  std::string states;  // floats each layer carries while decoding, "a+b" (Mixer::state_floats)
  size_t largest_state;  // the largest of them
  double accuracy, loss, seconds;
};

// The floats each layer of `c` carries while decoding, "a+b" (Mixer::state_floats), and the largest of them.
std::string layer_states(const ModelConfig& c, size_t& largest) {
  const std::vector<std::unique_ptr<Mixer>> mixers = validated_mixers(c);
  std::string text;
  largest = 0;
  for (size_t l = 0; l < mixers.size(); l++) {
    const size_t floats = mixers[l]->state_floats({});
    text += (l ? "+" : "") + std::to_string(floats);
    largest = std::max(largest, floats);
  }
  return text;
}

// The state of the first layer of `c` whose kind has the setting `key` among its own (the first layer when no
// kind has it).
size_t state_of_layer_with(const ModelConfig& c, const std::string& key) {
  const std::vector<std::unique_ptr<Mixer>> mixers = validated_mixers(c);
  const std::vector<const MixerKind*> kinds = layer_kinds(c);
  for (size_t l = 0; l < kinds.size(); l++)
    for (const Setting<ModelConfig>& s : kinds[l]->settings)
      if (key == s.key) return mixers[l]->state_floats({});
  return mixers[0]->state_floats({});
}

// The model `m` at `base`'s sizes. A setting given as "match" takes the whole value in [1, 4096] whose layer (the
// first of the setting's kind) keeps a state nearest `target` floats (ties: the smaller value).
ModelConfig model_config(const ModelVariant& m, const ModelConfig& base, size_t target) {
  ModelVariant fixed = m;
  for (auto& [key, value] : fixed.settings) {
    if (value != "match") continue;
    int best = 0;
    long best_gap = 0;
    for (int v = 1; v <= 4096; v++) {
      value = std::to_string(v);
      const long gap = std::labs((long)state_of_layer_with(with_variant(base, fixed), key) - (long)target);
      if (best == 0 || gap < best_gap) {
        best = v;
        best_gap = gap;
      }
    }
    value = std::to_string(best);
  }
  return with_variant(base, fixed);
}

// The settings it shares with ./train come through ./train's table (flags, help, ranges); the defaults are the
// experiment's recipe.
static std::vector<Setting<TrainConfig>> shared_settings() {
  return select_settings(train_settings(), {"n_layer", "n_head", "no_mlp", "steps", "batch", "lr", "seed", "threads"});
}
static TrainConfig recipe() {
  TrainConfig r;
  r.model.n_layer = 2, r.model.n_head = 1, r.model.no_mlp = false;  // every width must divide by n_head
  r.steps = 2000, r.batch = 64, r.adamw.lr = 3e-3f, r.seed = 1, r.threads = 0;
  return r;
}

Result run(const ModelVariant& m, const Task& task, int width, uint64_t seed, const TrainConfig& cfg,
           const cxxopts::ParseResult& f, const ModelVariant& match) {
  const std::string& name = m.label;
  ModelConfig base;
  base.n_layer = cfg.model.n_layer;
  base.n_head = cfg.model.n_head;
  base.n_embd = width;
  base.block_size = task.length();
  base.vocab_size = task.model_vocab();
  base.no_mlp = cfg.model.no_mlp;
  const size_t target = match.mixer.empty() ? 0 : validated_mixers(with_variant(base, match))[0]->state_floats({});
  const ModelConfig c = model_config(m, base, target);
  const std::string& mixer = c.mixer;
  GPT model(c);
  model.init_weights(seed);
  // ./train's step (train/loop.h) with AdamW from its defaults, a tenth of the peak rate at the end, 50 warm-up
  // steps and no weight decay.
  TrainConfig training = cfg;
  training.optimizer = "adamw";
  training.adamw = AdamWConfig();
  training.adamw.lr = cfg.adamw.lr, training.adamw.min_lr = cfg.adamw.lr / 10, training.adamw.warmup_steps = 50;
  training.adamw.weight_decay = 0.0f;
  Replicas replicas(model, 1);
  AdamW state;
  Learner learner{replicas, plan_training(training).optimizer->kind, state};
  const int steps = cfg.steps, B = cfg.batch, T = task.length();
  const int report_every = f["report-every"].as<int>();
  Rng rng(seed + 1), eval_rng(12345);
  std::vector<int> x, y, ex, ey;
  const int eval_B = 256;
  make_batch(task, eval_B, eval_rng, ex, ey);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; step++) {
    make_batch(task, B, rng, x, y);
    train_step(learner, training, step, {x.data(), y.data(), B, T});
    if (report_every > 0 && (step + 1) % report_every == 0 && step + 1 < steps)
      std::printf("  %-8s pairs %3d width %4d  step %5d  recall %5.1f%%\n", name.c_str(), task.pairs, width, step + 1,
                  100 * accuracy(model, ex, ey, eval_B, T)), std::fflush(stdout);
  }
  Result r{name, mixer, task.pairs, width, seed, "", 0, 0, 0, 0};
  r.states = layer_states(c, r.largest_state);
  r.loss = model.forward(ex.data(), ey.data(), eval_B, T);
  r.accuracy = accuracy(model, ex, ey, eval_B, T);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-12s %-22s pairs %3d width %4d seed %llu states %-12s | recall %5.1f%%  loss %.3f | %.0fs\n",
              name.c_str(), mixer.c_str(), r.pairs, r.width, (unsigned long long)seed, r.states.c_str(),
              100 * r.accuracy, r.loss, r.seconds);
  std::fflush(stdout);
  return r;
}

std::vector<int> int_list(const std::string& text, const char* flag) {
  std::vector<int> out;
  for (const std::string& item : comma_list(text)) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 4096)
      throw std::runtime_error(std::string("--") + flag + ": '" + item + "' is not a whole number in [1, 4096]");
    out.push_back((int)v);
  }
  return out;
}

struct Results {
  std::vector<Result> by_pairs, by_width;  // every seed's runs
};

// What the output files say about the run.
struct Output {
  std::string folder;
  std::vector<ModelVariant> models;
  int width = 0;        // of the pairs sweep
  int fixed_pairs = 0;  // of the width sweep
  int queries = 0;
  int vocab = 0;
  bool bound = true;
  TrainConfig cfg;      // the recipe: layers, heads, steps, batch, lr
};

// The runs of `model` at sweep value `value` (pairs or width), one per seed.
std::vector<const Result*> runs_at(const std::vector<Result>& rs, const std::string& model, int value, bool pairs_sweep) {
  std::vector<const Result*> out;
  for (const Result& r : rs)
    if (r.model == model && (pairs_sweep ? r.pairs : r.width) == value) out.push_back(&r);
  return out;
}

// The sweep's values in the order first run.
std::vector<int> sweep_values(const std::vector<Result>& rs, bool pairs_sweep) {
  std::vector<int> values;
  for (const Result& r : rs) {
    const int v = pairs_sweep ? r.pairs : r.width;
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  }
  return values;
}

// A table: one row per sweep value, one column per model, recall in percent (mean ± sd over seeds); then each
// model's state per layer.
std::string table(const Output& o, const std::vector<Result>& rs, bool pairs_sweep) {
  std::string s = pairs_sweep ? "| pairs N |" : "| width C |";
  for (const ModelVariant& m : o.models) s += " " + m.label + " |";
  s += "\n|---|";
  for (size_t m = 0; m < o.models.size(); m++) s += "---|";
  s += "\n";
  for (int value : sweep_values(rs, pairs_sweep)) {
    s += "| " + std::to_string(value) + " |";
    for (const ModelVariant& m : o.models) {
      std::vector<double> recall;
      for (const Result* r : runs_at(rs, m.label, value, pairs_sweep)) recall.push_back(100 * r->accuracy);
      s += " " + (recall.empty() ? std::string("—") : mean_spread(recall, "%.1f") + "%") + " |";
    }
    s += "\n";
  }
  s += "\nState per layer while decoding (floats; layers joined by +):\n\n| model | ";
  s += pairs_sweep ? "pairs N | state |\n|---|---|---|\n" : "width C | state |\n|---|---|---|\n";
  for (const ModelVariant& m : o.models)
    for (int value : sweep_values(rs, pairs_sweep)) {
      const std::vector<const Result*> at = runs_at(rs, m.label, value, pairs_sweep);
      if (!at.empty()) s += "| " + m.label + " | " + std::to_string(value) + " | " + at[0]->states + " |\n";
    }
  return s;
}

std::string markdown(const Output& o, const Results& results, int seeds) {
  char head[640];
  std::snprintf(head, sizeof head,
                "Recall accuracy on 256 held-out sequences (%d queries each): %d layers, %d head(s)%s, "
                "%d keys and %d values%s, %d steps of batch %d, lr %g; mean ± sd over %d training seed(s). Chance is "
                "%.1f%%; knowing only the sequence's N values gives 1/N.\n\n",
                o.queries, o.cfg.model.n_layer, o.cfg.model.n_head, o.cfg.model.no_mlp ? " without MLPs" : "",
                o.vocab / 2, o.vocab / 2, o.bound ? " (each pair one token)" : " (each pair two tokens)", o.cfg.steps,
                o.cfg.batch, o.cfg.adamw.lr, seeds, 200.0 / o.vocab);
  std::string md = head;
  if (!results.by_pairs.empty())
    md += "Pairs sweep, width " + std::to_string(o.width) + ":\n\n" + table(o, results.by_pairs, true) + "\n";
  if (!results.by_width.empty())
    md += "Width sweep, " + std::to_string(o.fixed_pairs) + " pairs:\n\n" + table(o, results.by_width, false);
  return md;
}

// A series per model: recall (mean over seeds, sd as error bars) against `x` of each sweep value.
Series recall_series(const std::vector<Result>& rs, const ModelVariant& m, bool pairs_sweep,
                     double (*x)(const Result&)) {
  Series s{m.label, {}, {}};
  for (int value : sweep_values(rs, pairs_sweep)) {
    const std::vector<const Result*> at = runs_at(rs, m.label, value, pairs_sweep);
    if (at.empty()) continue;
    std::vector<double> recall;
    for (const Result* r : at) recall.push_back(r->accuracy);
    s.x.push_back(x(*at[0]));
    s.y.push_back(mean_of(recall));
    s.err.push_back(sample_sd(recall));
  }
  return s;
}

void write_outputs(const Output& o, const Results& results, int seeds) {
  std::string csv = "sweep,model,mixer,pairs,width,seed,layer_states,accuracy,answer_loss,seconds\n";
  char line[360];
  for (auto [rs, sweep] : {std::pair{&results.by_pairs, "pairs"}, std::pair{&results.by_width, "width"}})
    for (const Result& r : *rs) {
      std::snprintf(line, sizeof line, "%s,\"%s\",\"%s\",%d,%d,%llu,%s,%.17g,%.4f,%.1f\n", sweep, r.model.c_str(),
                    r.mixer.c_str(), r.pairs, r.width, (unsigned long long)r.seed, r.states.c_str(), r.accuracy, r.loss,
                    r.seconds);
      csv += line;
    }
  const std::string md = markdown(o, results, seeds);
  write_file_atomically(o.folder + "/recall.csv", {{csv.data(), csv.size()}});
  write_file_atomically(o.folder + "/recall.md", {{md.data(), md.size()}});
  Chart cp{"MQAR recall vs key-value pairs (width " + std::to_string(o.width) + ")", "pairs N", "recall accuracy", {}};
  Chart cw{"MQAR recall vs width (" + std::to_string(o.fixed_pairs) + " pairs)", "width C", "recall accuracy", {}};
  // Zoology's figure: recall against the bytes a layer keeps while decoding (fp32), log scale.
  Chart cs{"MQAR recall vs state per layer (" + std::to_string(o.fixed_pairs) + " pairs)", "state bytes per layer",
           "recall accuracy", {}};
  cs.log_x = true;
  for (const ModelVariant& m : o.models) {
    cp.series.push_back(recall_series(results.by_pairs, m, true, [](const Result& r) { return (double)r.pairs; }));
    cw.series.push_back(recall_series(results.by_width, m, false, [](const Result& r) { return (double)r.width; }));
    cs.series.push_back(recall_series(results.by_width, m, false,
                                      [](const Result& r) { return 4.0 * (double)r.largest_state; }));
  }
  if (!results.by_pairs.empty()) {
    const std::string svg = render_svg(cp);
    write_file_atomically(o.folder + "/recall_pairs.svg", {{svg.data(), svg.size()}});
  }
  if (!results.by_width.empty()) {
    const std::string width_svg = render_svg(cw);
    const std::string state_svg = render_svg(cs);
    write_file_atomically(o.folder + "/recall_width.svg", {{width_svg.data(), width_svg.size()}});
    write_file_atomically(o.folder + "/recall_state.svg", {{state_svg.data(), state_svg.size()}});
  }
}

// The runs of earlier invocations' recall.csv files (--from). Throws naming the file and line of a row it cannot
// read, and of a run (sweep, model, point, seed) that an earlier row holds.
Results read_results(const std::vector<std::string>& paths) {
  Results results;
  std::set<std::string> seen;
  for (const std::string& path : paths)
    for_each_csv_row(path, "results of --from", 10, [&](const std::vector<std::string>& cells) {
      // sweep,model,mixer,pairs,width,seed,layer_states,accuracy,answer_loss,seconds
      Result r{cells[1], cells[2], (int)cell_number(cells, 3, "pairs"), (int)cell_number(cells, 4, "width"),
               (uint64_t)cell_number(cells, 5, "seed"), cells[6], 0, cell_number(cells, 7, "accuracy"),
               cell_number(cells, 8, "answer_loss"), cell_number(cells, 9, "seconds")};
      std::stringstream states(cells[6]);  // "a+b": each layer's floats
      for (std::string floats; std::getline(states, floats, '+');)
        r.largest_state = std::max(r.largest_state, (size_t)cell_number({floats}, 0, "layer_states"));
      const std::string run = cells[0] + " " + r.model + " " + cells[3] + " " + cells[4] + " " + cells[5];
      if (!seen.insert(run).second) throw std::runtime_error("the run '" + run + "' is in an earlier row");
      (cells[0] == "pairs" ? results.by_pairs : results.by_width).push_back(r);
    });
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("recall", "Multi-query associative recall: what a fixed-size state can remember.");
  // clang-format off
  options.add_options()
    ("out", "output directory", cxxopts::value<std::string>()->default_value("build/recall"))
    ("pairs", "key-value pairs, the first sweep", cxxopts::value<std::string>()->default_value("4,8,12"))
    ("width", "model width of the pairs sweep", cxxopts::value<int>()->default_value("64"))
    ("widths", "model widths of the second sweep", cxxopts::value<std::string>()->default_value("32,64,96"))
    ("fixed-pairs", "key-value pairs of the width sweep", cxxopts::value<int>()->default_value("8"))
    ("queries", "queries per sequence", cxxopts::value<int>()->default_value("8"))
    ("vocab", "tokens: keys are the first half, values the second", cxxopts::value<int>()->default_value("64"))
    ("bound", "each key-value pair is one token (the binding a short convolution gives Zoology's models), so only the lookup is learned", cxxopts::value<bool>()->default_value("true"))
    ("models", "which models to train, comma-separated: a kind (" + mixer_kind_names() + "), a hybrid a+b (one kind "
               "per layer), either with model settings kind:key=value[:key=value] (a whole number may be 'match'); "
               "default: every kind", cxxopts::value<std::string>()->default_value(""))
    ("also", "models trained after --models' list (a kind's ablation beside the default list)",
     cxxopts::value<std::string>()->default_value(""))
    ("match-state", "the model whose state per layer a setting given as 'match' matches, spelled as in --models",
     cxxopts::value<std::string>()->default_value(""))
    ("from", "comma-separated recall.csv files of earlier runs (e.g. one seed each): no training; their rows become "
             "the tables and plots in --out", cxxopts::value<std::string>()->default_value(""))
    ("seeds", "training seeds per model and point (seed, seed + 1, …): the tables show mean ± sd, the plots error bars",
     cxxopts::value<int>()->default_value("1"))
    ("report-every", "print held-out recall every N steps (0 = only at the end)", cxxopts::value<int>()->default_value("0"));
  // clang-format on
  add_flags(options, shared_settings(), recipe());
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& f = *parsed;
    TrainConfig cfg = recipe();
    apply_flags(f, shared_settings(), cfg);
    check_ranges(shared_settings(), cfg);
    set_threads(cfg.threads > 0 ? cfg.threads : default_threads());
    const int vocab = f["vocab"].as<int>(), queries = f["queries"].as<int>(), n_layer = cfg.model.n_layer;
    const int n_head = cfg.model.n_head;
    const std::vector<int> pairs = int_list(f["pairs"].as<std::string>(), "pairs");
    const std::vector<int> widths = int_list(f["widths"].as<std::string>(), "widths");
    const int fixed_pairs = f["fixed-pairs"].as<int>();
    for (int w : widths)
      if (w % n_head) throw std::runtime_error("--widths: " + std::to_string(w) + " is not a multiple of --n-head");
    if (f["width"].as<int>() % n_head) throw std::runtime_error("--width must be a multiple of --n-head");
    if (vocab < 4 || vocab % 2) throw std::runtime_error("--vocab must be even and ≥ 4");
    if (queries < 1) throw std::runtime_error("--queries must be ≥ 1");
    for (int n : pairs)
      if (n > vocab / 2) throw std::runtime_error("--pairs: " + std::to_string(n) + " distinct keys need --vocab ≥ " + std::to_string(2 * n));
    if (fixed_pairs < 1 || fixed_pairs > vocab / 2) throw std::runtime_error("--fixed-pairs must be in [1, vocab/2]");
    const bool bound = f["bound"].as<bool>();
    const int seeds = f["seeds"].as<int>();
    if (seeds < 1 || seeds > 100) throw std::runtime_error("--seeds must be in [1, 100]");
    std::string model_list = f["models"].as<std::string>();
    if (model_list.empty()) {
      model_list = mixer_kind_names();
      model_list.erase(std::remove(model_list.begin(), model_list.end(), ' '), model_list.end());
    }
    model_list += "," + f["also"].as<std::string>();
    std::vector<ModelVariant> models;
    for (const std::string& name : comma_list(model_list)) models.push_back(parse_model_variant(name));
    if (models.empty()) throw std::runtime_error("--models: name at least one model");
    const std::string match_text = f["match-state"].as<std::string>();
    const ModelVariant match = match_text.empty() ? ModelVariant{} : parse_model_variant(match_text);
    {  // a bad model throws here, before any training
      ModelConfig check;
      check.n_layer = n_layer;
      check.n_head = n_head;
      check.n_embd = f["width"].as<int>();
      check.vocab_size = vocab;
      for (const ModelVariant& m : models) {
        const bool matched = std::any_of(m.settings.begin(), m.settings.end(),
                                         [](const auto& kv) { return kv.second == "match"; });
        if (matched && match_text.empty())
          throw std::runtime_error("--models: '" + m.label + "' matches a state: name the model with --match-state");
        validate(model_config(m, check, 0));
      }
      if (!match_text.empty()) validate(with_variant(check, match));
    }
    const std::string out = f["out"].as<std::string>();
    std::system(("mkdir -p '" + out + "'").c_str());
    const auto start = std::chrono::steady_clock::now();

    // Seeds outermost, so that a run stopped early has whole seeds of every point; the files are rewritten after
    // each training run.
    Output output;
    output.folder = out;
    output.models = models;
    output.width = f["width"].as<int>();
    output.fixed_pairs = fixed_pairs;
    output.queries = queries;
    output.vocab = vocab;
    output.bound = bound;
    output.cfg = cfg;
    if (!f["from"].as<std::string>().empty()) {
      const Results read = read_results(comma_list(f["from"].as<std::string>()));
      if (read.by_pairs.empty() && read.by_width.empty()) throw std::runtime_error("--from: the files hold no runs");
      std::set<uint64_t> seeds_read;
      for (const std::vector<Result>* rs : {&read.by_pairs, &read.by_width})
        for (const Result& r : *rs) seeds_read.insert(r.seed);
      const int most_seeds = (int)seeds_read.size();
      write_outputs(output, read, most_seeds);
      std::printf("%s\nwrote %s/recall.csv, recall.md and the plots from %s\n", markdown(output, read, most_seeds).c_str(),
                  out.c_str(), f["from"].as<std::string>().c_str());
      return 0;
    }
    Results results;
    for (int s = 0; s < seeds; s++) {
      const uint64_t seed = cfg.seed + s;
      for (int n : pairs)
        for (const ModelVariant& m : models) {
          results.by_pairs.push_back(run(m, {n, queries, vocab, bound}, f["width"].as<int>(), seed, cfg, f, match));
          write_outputs(output, results, s + 1);
        }
      for (int w : widths)
        for (const ModelVariant& m : models) {
          results.by_width.push_back(run(m, {fixed_pairs, queries, vocab, bound}, w, seed, cfg, f, match));
          write_outputs(output, results, s + 1);
        }
    }
    std::printf("\n%s\ntotal %.0fs; wrote %s/recall.csv, recall.md and the plots (recall_pairs.svg, recall_width.svg, "
                "recall_state.svg)\n", markdown(output, results, seeds).c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recall: error: %s\n", e.what());
    return 1;
  }
}
