// ./compare — GPT vs BERT vs prefix-LM: the same transformer, the same corpus, the same number of steps and
// tokens; only the attention mask and the objective differ. Prints one table, a sample or fill from each model,
// and writes the loss curves as an SVG plot.
//   make compare                       (defaults: the tiny model with nanoGPT's recipe (--preset nanogpt), data/stories.txt,
//                                      1000 steps each, one seed)
//   make compare COMPARE_SEEDS=3       (three training seeds per model: the table shows mean ± sd; 3× the time)
//   build/bin/compare --steps 3000 --mlm-rate 0.4 --seeds 3 --out out/compare
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <sstream>

#include "base/program_flags.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "data/dataset.h"
#include "train/evaluate.h"
#include "generate/fill.h"
#include "generate/generate.h"
#include "lab/plot.h"
#include "lab/seeds.h"
#include "base/rng.h"
#include "train/trainer.h"
#include "data/utf8.h"
#include "base/runtime.h"
#include "base/threads.h"

struct Contender {
  Contender(std::string n, std::string o) : name(std::move(n)), objective(std::move(o)) {}
  std::string name, objective;
  std::vector<double> seconds, next_bits, masked_bits, masked_accuracy;  // one entry per training seed
  std::string example;                                                   // from the first seed
};

// The honest_bits column of metrics.csv against the step.
static Series honest_curve(const std::string& metrics_csv, const std::string& label) {
  Series s{label, {}, {}};
  std::ifstream in(metrics_csv);
  std::string line;
  std::getline(in, line);  // header: step,train_loss,val_loss,honest_bits,…
  while (std::getline(in, line)) {
    std::stringstream cells(line);
    std::string step, train, val, honest;
    std::getline(cells, step, ','), std::getline(cells, train, ','), std::getline(cells, val, ',');
    std::getline(cells, honest, ',');
    if (!honest.empty()) s.x.push_back(std::stod(step)), s.y.push_back(std::stod(honest));
  }
  return s;
}

// A continuation for the generators, blanks filled for the masked-LM.
static std::string example(Checkpoint& ckpt) {
  const Tokenizer& tok = ckpt.tokenizer;
  if (ckpt.objective == Objective::MLM) {
    const std::u32string text = U"Once upon a time, there w_s a little g_rl named M_ra. She l_ved near the r_ver.";
    const int mask = tok.special_id(kMaskToken);
    std::vector<int> ids;
    for (char32_t c : text) ids.push_back(c == U'_' ? mask : tok.id_of(c));
    if ((int)ids.size() > ckpt.model->config.block_size) ids.resize(ckpt.model->config.block_size);
    return "fill: " + tok.decode(fill_blanks(*ckpt.model, ids, mask, tok.num_chars()));
  }
  std::vector<int> prompt = tok.encode(U"Once upon a time", "prompt");
  std::vector<int> out = prompt;
  Rng rng(1);
  generate(*ckpt.model, prompt, 120, SamplingOptions{}, rng, -1, [&](int t) { out.push_back(t); });
  return "sample: " + tok.decode(out);
}

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("compare", "Train GPT-, BERT- and prefix-LM-style models alike and compare them.");
  // clang-format off
  options.add_options()
    ("out", "output directory", cxxopts::value<std::string>()->default_value("out/compare"))
    ("seeds", "training seeds per model (the table shows mean ± sd over seeds)", cxxopts::value<int>()->default_value("1"));
  // clang-format on
  // The settings it shares with ./train come through ./train's table (its flags, help and ranges); the defaults are
  // the recipe docs/masks.md was measured with: the nanogpt preset, 1000 steps per model.
  const std::vector<Setting<TrainConfig>> shared =
      select_settings(train_settings(), {"data", "steps", "mlm_rate", "threads"});
  TrainConfig recipe = preset("nanogpt");
  recipe.steps = 1000;
  add_flags(options, shared, recipe);
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& flags = *parsed;
    const std::string out = flags["out"].as<std::string>();
    std::vector<Contender> runs = {{"GPT (causal, clm)", "clm"},
                                   {"BERT (bidirectional, mlm)", "mlm"},
                                   {"prefix-LM (prefix, prefix-lm)", "prefix-lm"}};
    Chart chart{"Next-character loss from left context only (validation)", "step", "bits per character", {}};
    const int seeds = flags["seeds"].as<int>();
    if (seeds < 1) throw std::runtime_error("--seeds must be at least 1");
    apply_flags(flags, shared, recipe);
    check_ranges(shared, recipe);
    for (int seed = 0; seed < seeds; seed++)
    for (Contender& run : runs) {
      TrainConfig config = recipe;
      config.seed += seed;  // seed 0 is the preset's own: out/compare/<objective> as before
      config.out = out + "/" + run.objective + (seed ? "-seed" + std::to_string(config.seed) : "");
      config.objective = run.objective;
      config.eval_every = std::max(1, config.steps / 10);
      config.eval_iters = 10;  // a point of the curve every 10% of the run, cheaply
      config.ckpt_every = 0;
      std::printf("\n=== %s, seed %llu ===\n", run.name.c_str(), (unsigned long long)config.seed);
      const auto start = std::chrono::steady_clock::now();
      run_training(config);
      run.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      chart.series.push_back(honest_curve(config.out + "/metrics.csv",
                                          run.name + (seeds > 1 ? ", seed " + std::to_string(config.seed) : "")));

      Checkpoint ckpt = load_checkpoint(checkpoint_path(config.out));
      Corpus corpus = load_corpus(config.data, ckpt.tokenizer);
      const int mask = ckpt.objective == Objective::MLM ? ckpt.tokenizer.special_id(kMaskToken) : -1;
      const CharScore next = next_char_score(*ckpt.model, corpus.val, 4096, 7, mask);
      const int windows = (int)std::min<size_t>(128, corpus.val.size() / ckpt.model->config.block_size - 1);
      const CharScore masked = masked_char_score(*ckpt.model, corpus.val, windows, 0.15f, 7, mask);
      run.next_bits.push_back(next.bits), run.masked_bits.push_back(masked.bits);
      run.masked_accuracy.push_back(100 * masked.accuracy);
      if (seed == 0) run.example = example(ckpt);
    }
    const int tokens_per_run = recipe.steps * recipe.batch * recipe.model.block_size;
    std::string table = "| model | next-char bits/char (left context) | masked-char bits/char | masked-char accuracy "
                        "| tokens/s (incl. evals) |\n|---|---|---|---|---|\n";
    for (const Contender& r : runs) {
      std::vector<double> speed;
      for (double t : r.seconds) speed.push_back(tokens_per_run / t);
      table += "| " + r.name + " | " + mean_spread(r.next_bits, "%.3f") + " | " + mean_spread(r.masked_bits, "%.3f") +
               " | " + mean_spread(r.masked_accuracy, "%.1f") + "% | " + mean_spread(speed, "%.0f") + " |\n";
    }
    if (seeds > 1) table += "\nMean ± sample standard deviation over " + std::to_string(seeds) + " training seeds.\n";
    std::printf("\n%s\nEach model: %d steps × 12 × 64 = %d tokens. Masked-char: BERT sees both sides of each blank; "
                "the others see only the left side.\n\n",
                table.c_str(), recipe.steps, tokens_per_run);
    for (const Contender& r : runs) std::printf("%s\n  %s\n\n", r.name.c_str(), r.example.c_str());
    const std::string svg = render_svg(chart);
    write_file_atomically(out + "/loss_curves.svg", {{svg.data(), svg.size()}});
    write_file_atomically(out + "/table.md", {{table.data(), table.size()}});
    std::printf("wrote %s/loss_curves.svg and %s/table.md\n", out.c_str(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare: error: %s\n", e.what());
    return 1;
  }
}
