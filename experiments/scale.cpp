// ./scale — the 1/√d_k sweep. Attention multiplies q·k by a scale s before the softmax. With q and k of unit-variance
// entries, q·k = Σ_{d<HS} q_d k_d has variance HS, so s = 1/√HS ("sqrt", the default) gives logits of variance 1,
// s = 1 ("none") variance HS, and s = 1/HS ("inv") variance 1/HS: the softmax starts, respectively, neither flat nor
// one-hot, peaked (for large HS), or almost uniform. Under AdamW every weight moves ≈ lr per step whatever its
// gradient's size, so s also sets how fast the logits can grow: "none" acts like a √HS times larger learning rate
// on the attention logits, "inv" like a √HS times smaller one.
//
// The sweep trains short runs of ./train's model (through run_training, the same code) for every
//   scale ∈ --scales  ×  learning rate ∈ --lrs  ×  heads ∈ --heads (fixed width, so HS = n_embd / heads)
// and tabulates the final validation loss with the attention statistics ./train logs to metrics.csv
// (attention_stats.h), averaged over layers, at the last evaluation.
//   make scale                              build/bin/scale (defaults below), table in build/scale/table.md
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <fcntl.h>
#include <sstream>
#include <stdexcept>

#include "base/program_flags.h"
#include "io/atomic_file.h"
#include "lab/attention_stats.h"
#include "train/trainer.h"
#include "base/runtime.h"
#include "base/threads.h"

// The cells of metrics.csv's last row that has a value in `column`, by column name.
static std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream s(line);
  for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

struct RunStats {
  double val_loss = NAN;
  // Means over layers, at the last evaluation; init_var is the mean logit variance at step 0.
  double init_var = NAN, var = NAN, max_abs = NAN, entropy_norm = NAN, max_weight = NAN, saturated = NAN;
  double grad_q = NAN, grad_k = NAN;
  std::string error;
};

// Reads the attention statistics of the first and the last evaluation from OUT/metrics.csv.
static void read_stats(const std::string& path, int n_layer, RunStats& r) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) throw std::runtime_error(path + ": cannot read");
  std::vector<std::vector<std::string>> evaluated;  // rows with statistics
  std::vector<std::string> header;
  char buf[1 << 14];
  while (std::fgets(buf, sizeof buf, f)) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    std::vector<std::string> cells = split_csv_line(line);
    if (header.empty()) header = cells;
    else if (cells.size() == header.size() && !cells.back().empty()) evaluated.push_back(cells);
  }
  std::fclose(f);
  if (evaluated.empty()) throw std::runtime_error(path + ": no evaluation rows");
  auto mean = [&](const std::vector<std::string>& row, const std::string& name) {
    double sum = 0;
    for (int l = 0; l < n_layer; l++) {
      const std::string column = "L" + std::to_string(l) + "_" + name;
      size_t k = 0;
      while (k < header.size() && header[k] != column) k++;
      if (k == header.size()) throw std::runtime_error(path + ": no column " + column);
      sum += std::stod(row[k]);
    }
    return sum / n_layer;
  };
  const std::vector<std::string>& last = evaluated.back();
  r.init_var = mean(evaluated.front(), "logit_var");
  r.var = mean(last, "logit_var"), r.max_abs = mean(last, "logit_max"), r.entropy_norm = mean(last, "entropy_norm");
  r.max_weight = mean(last, "max_weight"), r.saturated = mean(last, "saturated");
  r.grad_q = mean(last, "grad_q"), r.grad_k = mean(last, "grad_k");
}

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("scale", "The 1/√d_k sweep: attention scale × learning rate × head size.");
  // clang-format off
  options.add_options()
    ("out", "output directory (one sub-directory per run, table.md, scale.csv)",
     cxxopts::value<std::string>()->default_value("build/scale"))
    ("scales", "attention scales, comma-separated", cxxopts::value<std::string>()->default_value("sqrt,none,inv"))
    ("lrs", "peak learning rates, comma-separated", cxxopts::value<std::string>()->default_value("3e-4,1e-3,3e-3"))
    ("heads", "heads per layer, comma-separated (head size = n_embd / heads)",
     cxxopts::value<std::string>()->default_value("2,8"));
  // clang-format on
  // The settings it shares with ./train come through ./train's table (flags, help, ranges); the defaults are the
  // sweep's recipe: AdamW (the scale acts through it), 2 layers × 64 wide, block 64, 600 steps, one thread.
  const std::vector<Setting<TrainConfig>> shared = select_settings(
      train_settings(), {"data", "n_layer", "n_embd", "block_size", "batch", "steps", "eval_every", "eval_iters", "seed",
                         "threads"});
  TrainConfig recipe;
  recipe.optimizer = "adamw";
  recipe.adamw.weight_decay = 0.1f;  // docs/lab.md's sweep ran with 0.1 (the tiny preset's default is 0.05)
  recipe.model.n_layer = 2, recipe.model.n_embd = 64, recipe.model.block_size = 64;
  recipe.batch = 12, recipe.steps = 600, recipe.eval_every = 200, recipe.eval_iters = 10;
  recipe.ckpt_every = 0, recipe.log_every = 100000, recipe.seed = 1337, recipe.threads = 1;
  add_flags(options, shared, recipe);
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& f = *parsed;
    apply_flags(f, shared, recipe);
    check_ranges(shared, recipe);
    const std::string out = f["out"].as<std::string>();
    std::system(("mkdir -p '" + out + "'").c_str());
    const int n_layer = recipe.model.n_layer, n_embd = recipe.model.n_embd;
    std::string table =
        "| scale | heads × HS | lr | val loss | logit var (init → end) | max \\|S\\| | H / ln\\|K\\| | max weight | "
        "rows > 0.99 | \\|∇W_Q\\| | \\|∇W_K\\| |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::string csv = "scale,heads,head_size,lr,val_loss,init_logit_var,logit_var,logit_max,entropy_norm,max_weight,"
                      "saturated,grad_q,grad_k,error\n";
    const auto start = std::chrono::steady_clock::now();
    for (const std::string& heads : comma_list(f["heads"].as<std::string>()))
      for (const std::string& lr : comma_list(f["lrs"].as<std::string>()))
        for (const std::string& scale : comma_list(f["scales"].as<std::string>())) {
          TrainConfig c = recipe;
          c.model.n_head = std::stoi(heads), c.model.attn_scale = scale;
          c.adamw.lr = std::stof(lr), c.adamw.min_lr = c.adamw.lr / 10, c.adamw.warmup_steps = c.steps / 10;
          const int hs = n_embd / c.model.n_head;
          const std::string name = scale + "_h" + heads + "_lr" + lr;
          c.out = out + "/" + name;
          std::system(("mkdir -p '" + c.out + "'").c_str());
          // The run's own progress lines go to its train.log, so this program prints only the table.
          std::fflush(stdout);
          const int saved_stdout = dup(1);
          const int log = open((c.out + "/train.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
          if (log >= 0) dup2(log, 1), close(log);
          RunStats r;
          try {
            TrainHooks hooks;  // the attention statistics in metrics.csv, as ./train logs them
            hooks.columns = {attention_stats_header, attention_stats_empty_cells, measure_attention_cells};
            r.val_loss = run_training(c, nullptr, hooks).val_loss;
            read_stats(c.out + "/metrics.csv", n_layer, r);
          } catch (const std::exception& e) {
            r.error = e.what();
          }
          std::fflush(stdout);
          dup2(saved_stdout, 1), close(saved_stdout);
          char line[512];
          if (!r.error.empty()) {
            std::snprintf(line, sizeof line, "| %s | %s × %d | %s | diverged | | | | | | | |\n", scale.c_str(),
                          heads.c_str(), hs, lr.c_str());
          } else {
            std::snprintf(line, sizeof line,
                          "| %s | %s × %d | %s | %.3f | %.3g → %.3g | %.2f | %.3f | %.3f | %.3f | %.3g | %.3g |\n",
                          scale.c_str(), heads.c_str(), hs, lr.c_str(), r.val_loss, r.init_var, r.var, r.max_abs,
                          r.entropy_norm, r.max_weight, r.saturated, r.grad_q, r.grad_k);
          }
          table += line;
          std::printf("%s", line);
          std::fflush(stdout);
          std::snprintf(line, sizeof line, "%s,%s,%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,\"%s\"\n",
                        scale.c_str(), heads.c_str(), hs, lr.c_str(), r.val_loss, r.init_var, r.var, r.max_abs,
                        r.entropy_norm, r.max_weight, r.saturated, r.grad_q, r.grad_k, r.error.c_str());
          csv += line;
        }
    const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60;
    std::printf("\n%s\n%.1f minutes; statistics are means over the %d layers at the last evaluation (step %d)\n",
                table.c_str(), minutes, n_layer, recipe.steps);
    write_file_atomically(out + "/table.md", {{table.data(), table.size()}});
    write_file_atomically(out + "/scale.csv", {{csv.data(), csv.size()}});
    std::printf("wrote %s/table.md and %s/scale.csv (per-run metrics.csv and train.log in %s/<run>/)\n", out.c_str(),
                out.c_str(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scale: error: %s\n", e.what());
    return 1;
  }
}
