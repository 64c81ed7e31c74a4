// ./mixers — every mixer kind of the registry (model/mixers/kinds.h) and a hybrid on the same corpus: validation
// loss at equal steps and at equal wall-clock time, several seeds each (docs/mamba.md, "Measurements"). --models
// also takes a kind with settings of its own, kind:key=value (ModelVariant, model/config.h).
//
// 1. Timing. Every kind's training step (./train's, train_step in train/loop.h: zero_grad, forward, backward, clip, the optimizer; random
//    tokens, no data loading) is timed in one process, the kinds alternated round by round, so that whatever else
//    the (shared) machine does falls on all of them alike. Per kind: the median ms/step over all rounds.
// 2. Step budgets. Equal steps: --steps for every kind. Equal time: the time softmax needs for --steps steps,
//    --steps × ms(softmax), divided by each kind's own ms/step: steps_k = round(steps · ms(softmax) / ms(k)). Those
//    runs are separate trainings whose cosine schedule ends at steps_k (not the equal-step run cut short). A run's
//    own wall time is not used: it depends on what else ran beside it.
// 3. Training. Every kind × seed × budget is one ./train run (run_training) of the preset (default tiny) with
//    that kind's --mixer / --layer-mixer; its final checkpoint is then scored on the whole validation split
//    (score_text: every character once, from up to block_size characters of left context), nats per character.
// Output in --out: table.md, mixers.csv, timing.csv, loss_vs_step.svg, loss_vs_time.svg.
//   make mixers                       (MIXERS_FLAGS="--seeds 1 --steps 300" etc.; docs/mamba.md names the run)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <sstream>

#include "base/program_flags.h"
#include "base/rng.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "data/dataset.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "lab/plot.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "train/evaluate.h"
#include "train/loop.h"
#include "train/plan.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace {

struct Kind {
  explicit Kind(ModelVariant v) : name(v.label), mixer(v.mixer), variant(std::move(v)) {}
  std::string name;   // as --models names it: a kind, "hybrid", or a kind with settings ("rwkv:rwkv_erase=0")
  std::string mixer;  // one kind for every layer, or a per-layer list
  ModelVariant variant;
  double ms_per_step = 0;
  int equal_time_steps = 0;
  std::vector<double> params;
  std::vector<double> val_steps, val_time;  // per seed: nats/char on the validation split
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? NAN : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "2.273" for one value, "2.273 ± 0.012 (2.26–2.29)" for several: mean ± sample standard deviation (range).
std::string mean_spread(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) var += (x - mean) * (x - mean);
  char buf[128];
  if (v.size() < 2) return std::snprintf(buf, sizeof buf, "%.3f", mean), buf;
  std::snprintf(buf, sizeof buf, "%.3f ± %.3f (%.3f–%.3f)", mean, std::sqrt(var / (v.size() - 1)),
                *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  return buf;
}

ModelConfig with_kind(const ModelConfig& c, const Kind& kind) {
  const ModelConfig k = with_variant(c, kind.variant);
  canonical_mixers(k);  // throws on a bad list
  return k;
}

// ./train's step (train_step, train/loop.h) on fixed random tokens: ms per step of each
// `reps` steps after one warm-up step, for each kind in turn, `rounds` times.
std::vector<std::vector<double>> time_steps(std::vector<Kind>& kinds, const TrainConfig& cfg, int rounds, int reps) {
  struct Timed {
    std::unique_ptr<GPT> model;
    std::unique_ptr<Replicas> one;  // the model alone, its ops sharing the threads
    AdamW state;
    std::unique_ptr<Learner> learner;
  };
  std::vector<Timed> timed(kinds.size());
  const int B = cfg.batch, T = cfg.model.block_size;
  Rng rng(5);
  std::vector<int> x((size_t)B * T), y(x.size());
  for (size_t i = 0; i < x.size(); i++) x[i] = rng.below(cfg.model.vocab_size), y[i] = rng.below(cfg.model.vocab_size);
  const TrainPlan plan = plan_training(cfg);
  for (size_t k = 0; k < kinds.size(); k++) {
    ModelConfig c = with_kind(cfg.model, kinds[k]);
    timed[k].model = std::make_unique<GPT>(c);
    timed[k].model->init_weights(1);
    timed[k].one = std::make_unique<Replicas>(*timed[k].model, 1);
    timed[k].learner.reset(new Learner{*timed[k].one, plan.optimizer->kind, timed[k].state});
  }
  auto step = [&](Timed& t, int i) { train_step(*t.learner, cfg, i, {x.data(), y.data(), B, T}); };
  std::vector<std::vector<double>> ms(kinds.size());
  for (int r = 0; r < rounds; r++)
    for (size_t k = 0; k < kinds.size(); k++) {
      step(timed[k], 0);  // warm: the other kinds ran in between
      for (int i = 0; i < reps; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        step(timed[k], i + 1);
        ms[k].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  return ms;
}

// The val_loss column of metrics.csv against the step (evaluations only).
Series val_curve(const std::string& metrics_csv, const std::string& label, double x_scale) {
  Series s{label, {}, {}};
  std::ifstream in(metrics_csv);
  std::string line;
  std::getline(in, line);  // header: step,train_loss,val_loss,…
  while (std::getline(in, line)) {
    std::stringstream cells(line);
    std::string step, train, val;
    std::getline(cells, step, ','), std::getline(cells, train, ','), std::getline(cells, val, ',');
    if (!val.empty()) s.x.push_back(std::stod(step) * x_scale), s.y.push_back(std::stod(val));
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("mixers", "Every mixer kind and a hybrid: validation loss at equal steps and equal time.");
  // clang-format off
  options.add_options()
    ("out", "output directory", cxxopts::value<std::string>()->default_value("build/mixers"))
    ("preset", "the ./train preset every run starts from", cxxopts::value<std::string>()->default_value("tiny"))
    ("models", "which to train: mixer kinds (" + mixer_kind_names() + "), 'hybrid' (--hybrid), or a kind with "
               "settings, kind:key=value (model settings by their checkpoint keys); default: every kind, then the "
               "hybrid if --hybrid is given", cxxopts::value<std::string>()->default_value(""))
    ("hybrid", "the hybrid's mixers, one per layer (e.g. softmax,linear,softmax,linear)",
     cxxopts::value<std::string>()->default_value(""))
    ("seeds", "training seeds per model and budget", cxxopts::value<int>()->default_value("3"))
    ("rounds", "timing: rounds of the kinds alternated", cxxopts::value<int>()->default_value("7"))
    ("reps", "timing: steps timed per kind and round", cxxopts::value<int>()->default_value("5"))
    ("equal-time", "also train at equal wall-clock time (budgets from the timing)", cxxopts::value<bool>()->default_value("true"))
    ("first-seed", "train seeds first-seed … first-seed + seeds − 1 (0 = the preset's own seed)", cxxopts::value<int>()->default_value("0"))
    ("ms-per-step", "skip the timing and use these, e.g. softmax=126.3,linear=165.9 (another run's timing, so that "
                    "seeds split over processes share one budget)", cxxopts::value<std::string>()->default_value(""));
  // clang-format on
  const std::vector<Setting<TrainConfig>> shared = select_settings(train_settings(), {"data", "steps", "threads"});
  TrainConfig defaults = preset("tiny");
  defaults.threads = 1;
  defaults.steps = 1000;  // the budget docs/mamba.md was measured with (the tiny preset's own)
  add_flags(options, shared, defaults);
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& f = *parsed;
    TrainConfig recipe = preset(f["preset"].as<std::string>());
    recipe.threads = 1, recipe.steps = defaults.steps;
    recipe.adamw.weight_decay = 0.1f;  // docs/mamba.md and docs/rwkv.md were measured with 0.1 (the tiny preset's is 0.05 now)
    apply_flags(f, shared, recipe);
    check_ranges(shared, recipe);
    set_threads(recipe.threads > 0 ? recipe.threads : default_threads());
    const int seeds = f["seeds"].as<int>(), rounds = f["rounds"].as<int>(), reps = f["reps"].as<int>();
    if (seeds < 1 || rounds < 1 || reps < 1) throw std::runtime_error("--seeds, --rounds and --reps must be ≥ 1");
    const std::string out = f["out"].as<std::string>();
    std::vector<Kind> kinds;
    // The corpus's vocabulary sizes the models, for the check below and the timing run, as the trainer will.
    recipe.model.vocab_size = load_corpus(recipe.data).tokenizer.size();
    std::string models = f["models"].as<std::string>();
    for (const MixerKind* kind : mixer_kinds())
      if (f["models"].as<std::string>().empty()) models += kind->name + std::string(",");
    if (f["models"].as<std::string>().empty() && !f["hybrid"].as<std::string>().empty()) models += "hybrid";
    for (const std::string& name : comma_list(models)) {
      ModelVariant variant = parse_model_variant(name);
      if (name == "hybrid" && f["hybrid"].as<std::string>().empty())
        throw std::runtime_error("--models: 'hybrid' needs --hybrid, its mixers one per layer");
      if (name == "hybrid") variant.mixer = f["hybrid"].as<std::string>();
      kinds.emplace_back(variant);
      try {
        validate(with_kind(recipe.model, kinds.back()));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("--models: " + std::string(e.what()));
      }
    }
    if (kinds.empty() || kinds[0].mixer != ModelConfig{}.mixer)
      throw std::runtime_error("--models must start with the GPT's own mixer, " + ModelConfig{}.mixer +
                               ": the equal-time budget is its time");
    std::system(("mkdir -p '" + out + "'").c_str());

    if (f["ms-per-step"].as<std::string>().empty())
      std::printf("timing %zu kinds alternated, %d rounds × %d steps each, %d thread(s), B=%d T=%d\n", kinds.size(),
                rounds, reps, recipe.threads, recipe.batch, recipe.model.block_size);
    std::fflush(stdout);
    const std::string given = f["ms-per-step"].as<std::string>();
    const std::vector<std::vector<double>> ms = given.empty() ? time_steps(kinds, recipe, rounds, reps)
                                                              : std::vector<std::vector<double>>(kinds.size());
    for (const std::string& item : comma_list(given)) {
      const size_t eq = item.find('=');
      bool found = false;
      for (Kind& k : kinds)
        if (eq != std::string::npos && item.substr(0, eq) == k.name) k.ms_per_step = std::stod(item.substr(eq + 1)), found = true;
      if (!found) throw std::runtime_error("--ms-per-step: '" + item + "' is not name=ms of a model being trained");
    }
    std::string timing_csv = "model,attention,round,ms\n";
    for (size_t k = 0; k < kinds.size(); k++) {
      if (!given.empty()) {
        if (!(kinds[k].ms_per_step > 0)) throw std::runtime_error("--ms-per-step: no time for " + kinds[k].name);
        continue;
      }
      kinds[k].ms_per_step = median(ms[k]);
      for (size_t i = 0; i < ms[k].size(); i++)
        timing_csv += kinds[k].name + ",\"" + kinds[k].mixer + "\"," + std::to_string(i / reps) + "," +
                      std::to_string(ms[k][i]) + "\n";
    }
    for (Kind& k : kinds) {
      k.equal_time_steps = (int)std::lround(recipe.steps * kinds[0].ms_per_step / k.ms_per_step);
      std::printf("  %-8s %-28s %7.2f ms/step (%.2f× softmax) → %d steps in softmax's time of %d steps\n",
                  k.name.c_str(), k.mixer.c_str(), k.ms_per_step, k.ms_per_step / kinds[0].ms_per_step,
                  k.equal_time_steps, recipe.steps);
    }
    std::fflush(stdout);

    Chart by_step{"Validation loss at equal steps (" + f["preset"].as<std::string>() + ")", "step", "val loss (nats/char)", {}};
    Chart by_time{"Validation loss against time (steps × each kind's measured ms/step)", "seconds (derived)",
                  "val loss (nats/char)", {}};
    std::string csv = "model,attention,budget,seed,steps,params,val_nats_per_char,seconds\n";
    const bool equal_time = f["equal-time"].as<bool>();
    const int first_seed = f["first-seed"].as<int>();
    for (int seed = first_seed; seed < first_seed + seeds; seed++)
      for (size_t k = 0; k < kinds.size(); k++) {
        Kind& kind = kinds[k];
        for (int budget = 0; budget < (equal_time ? 2 : 1); budget++) {
          const int steps = budget == 0 ? recipe.steps : kind.equal_time_steps;
          if (budget == 1 && steps == recipe.steps) {  // the same run as at equal steps (softmax itself)
            kind.val_time.push_back(kind.val_steps.back());
            continue;
          }
          TrainConfig config = recipe;
          config.model = with_kind(recipe.model, kind);
          config.seed += seed, config.steps = steps;
          config.eval_every = std::max(1, steps / 4), config.ckpt_every = 0;
          config.out = out + "/" + kind.name + (budget ? "-time" : "") + "-seed" + std::to_string(config.seed);
          std::printf("\n=== %s (%s), %s, %d steps, seed %llu ===\n", kind.name.c_str(), kind.mixer.c_str(),
                      budget ? "equal time" : "equal steps", steps, (unsigned long long)config.seed);
          std::fflush(stdout);
          const auto start = std::chrono::steady_clock::now();
          run_training(config);
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          Checkpoint ckpt = load_checkpoint(checkpoint_path(config.out));
          Corpus corpus = load_corpus(config.data, ckpt.tokenizer);
          const double nats = score_text(*ckpt.model, corpus.val).nats_per_token;
          (budget ? kind.val_time : kind.val_steps).push_back(nats);
          if (seed == first_seed && budget == 0) kind.params.push_back((double)ckpt.model->num_params());
          std::printf("%s: validation %.4f nats/char (whole split), %.0f s\n", kind.name.c_str(), nats, seconds);
          char line[320];
          std::snprintf(line, sizeof line, "%s,\"%s\",%s,%llu,%d,%zu,%.5f,%.1f\n", kind.name.c_str(),
                        kind.mixer.c_str(), budget ? "time" : "steps", (unsigned long long)config.seed, steps,
                        ckpt.model->num_params(), nats, seconds);
          csv += line;
          Series s = val_curve(config.out + "/metrics.csv", kind.name + (seed ? "" : ""), 1.0);
          s.colour = (int)k, s.dashed = seed > first_seed;
          if (seed > first_seed) s.label = "";
          if (budget == 0) by_step.series.push_back(s);
          for (double& x : s.x) x *= kind.ms_per_step / 1000;
          if (budget == 1 || (k == 0 && budget == 0)) by_time.series.push_back(s);
        }
      }

    std::string table =
        "| model | attention | parameters | ms/step (median, alternated) | × softmax | val loss at " +
        std::to_string(recipe.steps) + " steps | steps in softmax's time | val loss at equal time |\n"
        "|---|---|---|---|---|---|---|---|\n";
    for (const Kind& k : kinds) {
      char line[512];
      std::snprintf(line, sizeof line, "| %s | %s | %.0f | %.2f | %.2f | %s | %d | %s |\n", k.name.c_str(),
                    k.mixer.c_str(), k.params.empty() ? 0.0 : k.params[0], k.ms_per_step,
                    k.ms_per_step / kinds[0].ms_per_step, mean_spread(k.val_steps).c_str(), k.equal_time_steps,
                    equal_time ? mean_spread(k.val_time).c_str() : "");
      table += line;
    }
    char foot[512];
    std::snprintf(foot, sizeof foot,
                  "\nValidation loss: nats per character on the whole validation split (score_text), mean ± sample "
                  "standard deviation (min–max) over %d seed(s). Timing: %d rounds × %d steps per kind, alternated, "
                  "%d thread(s), batch %d × block %d.\n",
                  seeds, rounds, reps, recipe.threads, recipe.batch, recipe.model.block_size);
    table += foot;
    if (!f["ms-per-step"].as<std::string>().empty())
      table += "The ms/step column was given (--ms-per-step " + f["ms-per-step"].as<std::string>() + "), not timed by this run.\n";
    std::printf("\n%s", table.c_str());
    const std::string s1 = render_svg(by_step), s2 = render_svg(by_time);
    write_file_atomically(out + "/table.md", {{table.data(), table.size()}});
    write_file_atomically(out + "/mixers.csv", {{csv.data(), csv.size()}});
    write_file_atomically(out + "/timing.csv", {{timing_csv.data(), timing_csv.size()}});
    write_file_atomically(out + "/loss_vs_step.svg", {{s1.data(), s1.size()}});
    write_file_atomically(out + "/loss_vs_time.svg", {{s2.data(), s2.size()}});
    std::printf("wrote %s/table.md, mixers.csv, timing.csv, loss_vs_step.svg, loss_vs_time.svg\n", out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixers: error: %s\n", e.what());
    return 1;
  }
}
