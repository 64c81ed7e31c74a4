#include "train/trainer.h"

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "lab/attention_stats.h"
#include "io/checkpoint.h"
#include "data/dataset.h"
#include "train/evaluate.h"
#include "model/model.h"
#include "data/objective.h"
#include "base/rng.h"
#include "base/threads.h"

using nlohmann::json;

// ---- settings ------------------------------------------------------------------------------------------------

std::string to_json(const TrainConfig& c) {
  const AdamWConfig& a = c.adamw;
  json j = {{"data", c.data}, {"out", c.out}, {"n_layer", c.model.n_layer}, {"n_head", c.model.n_head},
            {"n_embd", c.model.n_embd}, {"block_size", c.model.block_size}, {"attn_only", c.model.attn_only},
            {"attn_scale", c.model.attn_scale}, {"attention", c.model.attention}, {"objective", c.objective}, {"mask", c.mask},
            {"mlm_rate", c.mlm_rate}, {"allow_leak", c.allow_leak}, {"batch", c.batch},
            {"steps", c.steps}, {"lr", a.lr}, {"min_lr", a.min_lr}, {"warmup_steps", a.warmup_steps},
            {"beta1", a.beta1}, {"beta2", a.beta2}, {"eps", a.eps}, {"weight_decay", a.weight_decay},
            {"grad_clip", a.grad_clip}, {"eval_every", c.eval_every}, {"eval_iters", c.eval_iters},
            {"ckpt_every", c.ckpt_every}, {"log_every", c.log_every}, {"seed", c.seed}, {"threads", c.threads}};
  return j.dump();
}

namespace {
// Reads one setting, refusing values its C++ type cannot hold: nlohmann converts 4e19 to int by a plain cast,
// which is undefined behaviour, and a corrupt checkpoint must not reach that.
struct SettingsReader {
  const json& j;
  template <typename T>
  void read(const char* key, T& out) const {
    const json& v = j.at(key);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
      out = v.get<T>();
    } else {
      if (!v.is_number()) throw std::runtime_error(std::string("'") + key + "' is not a number");
      bool fits;
      if constexpr (std::is_integral_v<T>) {  // compared as integers: doubles round near 2^63
        if (v.is_number_unsigned()) fits = v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
        else if (v.is_number_integer())
          fits = std::is_signed_v<T> ? v.get<int64_t>() >= int64_t(std::numeric_limits<T>::lowest()) &&
                                           v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max())
                                     : v.get<int64_t>() >= 0;
        else fits = false;  // 2.5 or 4e19 for a count
      } else {
        const double x = v.get<double>();
        fits = std::isfinite(x) && std::fabs(x) <= double(std::numeric_limits<T>::max());
      }
      if (!fits) throw std::runtime_error(std::string("'") + key + "' = " + v.dump() + " is out of range");
      out = v.get<T>();
    }
  }
};
}  // namespace

TrainConfig train_config_from_json(const std::string& text, const std::string& source) {
  TrainConfig c;
  try {
    const json j = json::parse(text);
    const SettingsReader r{j};
    AdamWConfig& a = c.adamw;
    r.read("data", c.data), r.read("out", c.out), r.read("mask", c.mask), r.read("objective", c.objective);
    r.read("mlm_rate", c.mlm_rate), r.read("allow_leak", c.allow_leak);
    r.read("n_layer", c.model.n_layer), r.read("n_head", c.model.n_head), r.read("n_embd", c.model.n_embd);
    r.read("block_size", c.model.block_size);
    r.read("attn_only", c.model.attn_only), r.read("attn_scale", c.model.attn_scale);
    if (j.contains("attention")) r.read("attention", c.model.attention);  // absent before linear attention
    r.read("batch", c.batch), r.read("steps", c.steps);
    r.read("lr", a.lr), r.read("min_lr", a.min_lr), r.read("warmup_steps", a.warmup_steps);
    r.read("beta1", a.beta1), r.read("beta2", a.beta2), r.read("eps", a.eps);
    r.read("weight_decay", a.weight_decay), r.read("grad_clip", a.grad_clip);
    r.read("eval_every", c.eval_every), r.read("eval_iters", c.eval_iters), r.read("ckpt_every", c.ckpt_every);
    r.read("log_every", c.log_every), r.read("seed", c.seed), r.read("threads", c.threads);
  } catch (const std::exception& e) {
    throw std::runtime_error(source + ": bad training settings in the checkpoint: " + e.what());
  }
  return c;
}

TrainConfig preset(const std::string& name) {
  TrainConfig c;  // the defaults are the tiny preset
  if (name == "tiny") return c;
  if (name == "small") {
    c.model.n_layer = 6, c.model.n_head = 6, c.model.n_embd = 384, c.model.block_size = 256;
    c.batch = 64, c.steps = 5000;
    return c;
  }
  throw std::runtime_error("--preset: unknown preset '" + name + "' (expected tiny or small)");
}

void validate(const TrainConfig& c) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw std::runtime_error(message);
  };
  const AdamWConfig& a = c.adamw;
  require(c.batch > 0, "--batch must be positive");
  require(c.steps >= 0, "--steps must be ≥ 0");
  require(a.lr > 0 && std::isfinite(a.lr), "--lr must be a positive number");
  require(a.min_lr >= 0 && a.min_lr <= a.lr, "--min-lr must be between 0 and --lr");
  require(a.warmup_steps >= 0, "--warmup must be ≥ 0");
  require(a.beta1 >= 0 && a.beta1 < 1, "--beta1 must be in [0, 1)");
  require(a.beta2 >= 0 && a.beta2 < 1, "--beta2 must be in [0, 1)");
  require(a.eps > 0, "--eps must be positive");
  require(a.weight_decay >= 0, "--weight-decay must be ≥ 0");
  require(a.grad_clip >= 0, "--grad-clip must be ≥ 0 (0 turns clipping off)");
  require(c.eval_every >= 0 && c.ckpt_every >= 0 && c.log_every > 0,
          "--eval-every and --ckpt-every must be ≥ 0, --log-every positive");
  require(c.eval_iters > 0, "--eval-iters must be positive");
  require(c.threads >= 0, "--threads must be ≥ 0 (0 = all cores)");
  require(c.mlm_rate > 0 && c.mlm_rate <= 1, "--mlm-rate must be in (0, 1]");
  parse_objective(c.objective);
}

std::string checkpoint_path(const std::string& out_dir) { return out_dir + "/ckpt.safetensors"; }

// ---- the output directory ------------------------------------------------------------------------------------

// Creates out_dir (and its parents) and proves it is writable before any training starts, so a bad --out
// fails in the first second instead of at the first checkpoint.
static void prepare_output_dir(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("--out " + dir + ": cannot create " + prefix + ": " + std::strerror(errno));
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("--out " + dir + ": not a directory");
  const std::string ckpt = checkpoint_path(dir);
  if (stat(ckpt.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(ckpt + " exists and is not a regular file, so no checkpoint could be saved there");
  std::string probe = dir + "/.write-test-" + std::to_string(getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) throw std::runtime_error("--out " + dir + ": not writable: " + std::strerror(errno));
  std::fclose(f);
  std::remove(probe.c_str());
}

// metrics.csv: one row per step; train_loss and val_loss are filled on the steps where an evaluation ran.
class MetricsFile {
 public:
  // A resumed run keeps the rows before its first step and drops any the interrupted run wrote after its
  // last checkpoint, so the file reads as one uninterrupted run.
  // extra_header: more columns after step_ms (the attention statistics), each name with a leading comma.
  MetricsFile(const std::string& path, int first_step, const std::string& extra_header = "") {
    std::string kept;
    std::ifstream old(path);
    std::string line;
    if (first_step > 0 && std::getline(old, line))
      while (std::getline(old, line))
        if (std::strtol(line.c_str(), nullptr, 10) < first_step) kept += line + "\n";
    file_ = std::fopen(path.c_str(), "w");
    if (!file_) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
    std::fprintf(file_, "step,train_loss,val_loss,honest_bits,batch_loss,lr,grad_norm,step_ms%s\n%s",
                 extra_header.c_str(), kept.c_str());
  }
  ~MetricsFile() { std::fclose(file_); }
  // NaN leaves a cell empty.
  // extra: the cells of the extra columns, each with a leading comma.
  void row(int step, double train, double val, double honest, double loss, double lr, double norm, double ms,
           const std::string& extra = "") {
    std::fprintf(file_, "%d", step);
    for (double v : {train, val, honest, loss, lr, norm, ms})
      std::isnan(v) ? std::fprintf(file_, ",") : std::fprintf(file_, ",%.6g", v);
    std::fprintf(file_, "%s\n", extra.c_str());
    std::fflush(file_);
  }

 private:
  FILE* file_;
};

// ---- Ctrl-C --------------------------------------------------------------------------------------------------

static volatile std::sig_atomic_t g_stop_requested = 0;

// First SIGINT/SIGTERM: finish the current step, save, exit cleanly. Second: leave at once; the checkpoint on
// disk is whole either way, because every write goes to a temporary file that is renamed into place.
static void on_stop_signal(int) {
  if (g_stop_requested) _exit(130);
  g_stop_requested = 1;
}

// ---- progress ------------------------------------------------------------------------------------------------

static std::string format_duration(double seconds) {
  long s = (long)std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

static bool all_finite(const std::vector<float>& values) {
  bool finite = true;
#pragma omp parallel for reduction(&& : finite)
  for (size_t i = 0; i < values.size(); i++) finite = finite && std::isfinite(values[i]);
  return finite;
}

// ---- the loop ------------------------------------------------------------------------------------------------

TrainResult run_training(const TrainConfig& cfg, Checkpoint* resume) {
  validate(cfg);
  set_threads(cfg.threads > 0 ? cfg.threads : default_threads());
  using clock = std::chrono::steady_clock;
  const Objective objective = parse_objective(cfg.objective);

  Checkpoint ckpt;
  Corpus corpus;
  ResumeState state;
  if (resume) {
    ckpt = std::move(*resume);
    if (!ckpt.resumable) throw std::runtime_error("the checkpoint holds weights only (no optimizer state)");
    corpus = load_corpus(cfg.data, ckpt.tokenizer);
    state = std::move(ckpt.resume);
  } else {
    corpus = load_corpus(cfg.data);
    if (objective == Objective::MLM) corpus.tokenizer.add_special(kMaskToken);
    ModelConfig model_config = cfg.model;
    model_config.vocab_size = corpus.tokenizer.size();
    validate(model_config);
    check_fits_in_memory(model_config, cfg.batch);  // before a single parameter is allocated
    const std::string mask = cfg.mask.empty() ? default_mask(objective) : cfg.mask;
    ckpt.model = std::make_unique<GPT>(model_config, parse_layer_masks(mask, model_config.n_layer));
    ckpt.model->init_weights(cfg.seed);
    state.batch_rng = Rng(cfg.seed ^ 0x5eed5eedull).state();
  }
  GPT& model = *ckpt.model;
  const int B = cfg.batch, T = model.config.block_size;
  bool leaks = false;
  try {
    check_no_leak(objective, model.masks, T);
  } catch (const std::runtime_error&) {
    if (!cfg.allow_leak) throw;
    leaks = true;
  }
  const int mask_token = corpus.tokenizer.special_id(kMaskToken);
  BatchMaker batches(objective, cfg.mlm_rate, mask_token, corpus.tokenizer.num_chars());
  // The training loss of MLM, prefix-LM or a leaking mask is not next-character loss; the honest next-character
  // number (left context only, the same for every kind of model) is printed beside it in those cases, and logged
  // to metrics.csv always, so that runs of any objective compare on one curve.
  const bool report_honest = objective != Objective::CLM || leaks;
  if (cfg.stop_at != -1 && (cfg.stop_at <= state.step || cfg.stop_at > cfg.steps))
    throw std::runtime_error("--stop-at " + std::to_string(cfg.stop_at) + " must be after the current step (" +
                             std::to_string(state.step) + ") and at most --steps (" + std::to_string(cfg.steps) + ")");
  check_corpus_fits(corpus, T);
  check_fits_in_memory(model.config, B);
  prepare_output_dir(cfg.out);
  state.train_config = to_json(cfg);
  const std::string ckpt_file = checkpoint_path(cfg.out);

  Rng batch_rng;
  batch_rng.set_state(state.batch_rng);
  bool saved_any = false;  // this invocation has written ckpt_file
  const int first_step_of_run = state.step;
  const std::string resumed_rng = state.batch_rng;
  // Where the last good weights are, for the divergence message. Resuming with --out elsewhere means ckpt_file
  // may not exist or may belong to another run: it is named only if it holds the step this invocation began at.
  auto last_good = [&]() -> std::string {
    if (saved_any) return "; " + ckpt_file + " holds the last good checkpoint (step " + std::to_string(state.step) + ")";
    if (!resume) return "";
    try {
      Checkpoint on_disk = load_checkpoint(ckpt_file);
      if (on_disk.resumable && on_disk.resume.step == first_step_of_run && on_disk.resume.batch_rng == resumed_rng)
        return "; " + ckpt_file + " holds the last good checkpoint (step " + std::to_string(first_step_of_run) + ")";
    } catch (...) {
    }
    return "; the checkpoint this run resumed from (step " + std::to_string(first_step_of_run) + ") is unchanged";
  };
  // A diverged step stops the run before anything is saved, naming the step and where the good weights are.
  auto diverged = [&](int step, const std::string& what) {
    return std::runtime_error("training diverged at step " + std::to_string(step) + " (" + what +
                              "); nothing was saved" + last_good() + ". Try a lower --lr (or check --attn-scale).");
  };
  auto save = [&](int step) {
    saved_any = true;
    state.step = step;
    model.set_prefix_length(0);  // a prefix-LM's N is redrawn per batch; store the neutral prefix:0
    state.batch_rng = batch_rng.state();
    save_checkpoint(ckpt_file, model, corpus.tokenizer, &state, objective);
  };
  // The same evaluation batches every time (a fixed seed), so successive evaluations compare like with like,
  // and the training batches never depend on how often we evaluate.
  auto evaluate = [&](double& train_loss, double& val_loss) {
    Rng eval_rng(cfg.seed + 1);
    train_loss = estimate_loss(model, batches, corpus.train, B, T, cfg.eval_iters, eval_rng);
    val_loss = estimate_loss(model, batches, corpus.val, B, T, cfg.eval_iters, eval_rng);
  };

  std::printf("model: %s, %zu parameters, mask %s, objective %s\n", describe(model.config).c_str(),
              model.num_params(), masks_to_string(model.masks).c_str(), cfg.objective.c_str());
  if (leaks)
    std::printf("warning: --allow-leak: this mask lets positions see their answers; watch the honest loss\n");
  std::printf("data: %s: %zu training and %zu validation characters\n", cfg.data.c_str(), corpus.train.size(),
              corpus.val.size());
  std::printf("training %d steps of %d×%d tokens%s on %d thread%s (idle threads wait: %s)\n", cfg.steps, B, T,
              state.step ? (" from step " + std::to_string(state.step)).c_str() : "", omp_get_max_threads(),
              omp_get_max_threads() == 1 ? "" : "s", wait_policy().c_str());
  std::fflush(stdout);

  g_stop_requested = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // Past a file-size limit, let write() fail with EFBIG (reported, temporary file removed) instead of dying.
  std::signal(SIGXFSZ, SIG_IGN);
  const bool live = isatty(fileno(stdout));
  // The 1/√d_k statistics (attention_stats.h): 8 columns per layer after step_ms, filled at evaluations and
  // measured on one fixed validation batch.
  MetricsFile metrics(cfg.out + "/metrics.csv", state.step, attention_stats_header(model.config.n_layer));
  std::vector<int> x((size_t)B * T), y((size_t)B * T);
  std::vector<int> stats_x((size_t)B * T), stats_y((size_t)B * T);
  Rng stats_rng(cfg.seed + 3);
  const int stats_prefix = batches.next(corpus.val, B, T, stats_rng, stats_x.data(), stats_y.data());
  const double nan = std::nan("");
  const std::string no_attention_cells = attention_stats_empty_cells(model.config.n_layer);
  TrainResult result;
  const int first_step = state.step;  // state.step moves on at every save; this is where this invocation began
  result.step = first_step;
  double recent_ms = 0;  // moving average of the step time, for tokens/s and the ETA
  const auto start = clock::now();

  for (int step = state.step; step <= cfg.steps; step++) {
    double train_loss = nan, val_loss = nan, honest_bits = nan;
    std::string attention_cells = no_attention_cells;
    const bool last = step == cfg.steps;
    if (last || step == first_step || (cfg.eval_every && step % cfg.eval_every == 0)) {
      evaluate(train_loss, val_loss);
      result.val_loss = val_loss;
      if (live) std::printf("\r\033[K");
      std::printf("step %d: train loss %.4f, val loss %.4f", step, train_loss, val_loss);
      honest_bits = next_char_score(model, corpus.val, cfg.eval_iters * B, cfg.seed + 2, mask_token).bits;
      result.honest_bits = honest_bits;
      if (report_honest)
        std::printf(", honest next-char %.4f bits/char (%.4f nats)", honest_bits, honest_bits * std::log(2.0));
      std::printf("\n");
      std::fflush(stdout);
      if (stats_prefix >= 0) model.set_prefix_length(stats_prefix);
      attention_cells = attention_stats_cells(measure_attention(model, stats_x.data(), stats_y.data(), B, T));
    }
    if (last) {
      metrics.row(step, train_loss, val_loss, honest_bits, nan, nan, nan, nan, attention_cells);
      break;
    }

    const auto t0 = clock::now();
    const int prefix = batches.next(corpus.train, B, T, batch_rng, x.data(), y.data());
    if (prefix >= 0) model.set_prefix_length(prefix);
    const float loss = model.forward(x.data(), y.data(), B, T);
    model.zero_grad();
    model.backward();
    const double norm = clip_global_norm(model.grads_memory, cfg.adamw.grad_clip);
    if (!std::isfinite(loss) || !std::isfinite(norm))
      throw diverged(step, "loss " + std::to_string(loss) + ", gradient norm " + std::to_string(norm) +
                               "; the weights were not updated");
    const float lr = learning_rate(cfg.adamw, step, cfg.steps);
    state.optimizer.update(model, cfg.adamw, lr);
    if (!all_finite(model.params_memory))  // an absurd step can overflow the weights even from finite gradients
      throw diverged(step, "the update made some weights infinite or NaN");
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    recent_ms = step == first_step ? ms : 0.9 * recent_ms + 0.1 * ms;
    metrics.row(step, train_loss, val_loss, honest_bits, loss, lr, norm, ms, attention_cells);
    result.step = step + 1;

    const double tokens_per_s = B * T / (recent_ms / 1000.0);
    const std::string eta = format_duration((cfg.steps - step - 1) * recent_ms / 1000.0);
    if (live || (step + 1) % cfg.log_every == 0) {
      std::printf("%sstep %d/%d | loss %.4f | lr %.2e | %.0f tok/s | %.1f ms/step | ETA %s%s", live ? "\r\033[K" : "",
                  step + 1, cfg.steps, loss, lr, tokens_per_s, recent_ms, eta.c_str(), live ? "" : "\n");
      std::fflush(stdout);
    }
    if (g_stop_requested || step + 1 == cfg.stop_at) {
      save(step + 1);
      std::printf("%s%s: saved step %d to %s\n", live ? "\n" : "", g_stop_requested ? "interrupted" : "stopped",
                  step + 1, ckpt_file.c_str());
      result.interrupted = true;
      return result;
    }
    if (cfg.ckpt_every && (step + 1) % cfg.ckpt_every == 0 && step + 1 < cfg.steps) save(step + 1);
  }
  save(cfg.steps);
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  std::printf("done: %d steps in %s; checkpoint %s\n", cfg.steps, format_duration(seconds).c_str(), ckpt_file.c_str());
  return result;
}
