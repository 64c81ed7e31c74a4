// ./train — trains a character-level GPT on a UTF-8 text file and writes checkpoints.
//   ./train --preset tiny --data data/stories.txt --out out/tiny
//   ./train --resume out/tiny --steps 4000        (continue a run, with its own settings, to step 4000)
#include <sys/stat.h>

#include <cstdio>
#include <cxxopts.hpp>
#include <set>

#include "io/checkpoint.h"
#include "train/trainer.h"
#include "base/threads.h"

// The flags that set a field of TrainConfig, each with its default taken from the chosen preset.
static void add_flags(cxxopts::Options& options) {
  // clang-format off
  options.add_options()
    ("data", "UTF-8 text file to train on", cxxopts::value<std::string>()->default_value("data/stories.txt"))
    ("out", "output directory for ckpt.safetensors and metrics.csv", cxxopts::value<std::string>()->default_value("out"))
    ("preset", "tiny (4 layers, 128 wide, block 64, batch 12) or small (6 layers, 384 wide, block 256, batch 64)",
     cxxopts::value<std::string>()->default_value("tiny"))
    ("resume", "continue from a checkpoint file or an output directory", cxxopts::value<std::string>())
    ("n-layer", "transformer blocks", cxxopts::value<int>())
    ("n-head", "attention heads per block", cxxopts::value<int>())
    ("n-embd", "embedding width (divisible by --n-head)", cxxopts::value<int>())
    ("block", "context length (block_size)", cxxopts::value<int>())
    ("attn-only", "blocks without MLPs (attention-only transformer)")
    ("attn-scale", "multiply q·k by: sqrt (1/√d_k), inv (1/d_k), none (1) or a number", cxxopts::value<std::string>())
    ("attention", "attention of every layer: softmax or linear (O(T), docs/linear_attention.md)",
     cxxopts::value<std::string>())
    ("layer-attention", "one attention per layer, comma-separated, e.g. linear,softmax,linear,linear",
     cxxopts::value<std::string>())
    ("objective", "clm (GPT: next character), mlm (BERT: masked characters) or prefix-lm", cxxopts::value<std::string>())
    ("mask", "attention mask of every layer: causal, bidirectional, prefix:N or window:W (default: the objective's own)",
     cxxopts::value<std::string>())
    ("layer-masks", "one mask per layer, comma-separated, e.g. causal,causal,window:16,bidirectional",
     cxxopts::value<std::string>())
    ("mlm-rate", "mlm: fraction of positions chosen per sequence", cxxopts::value<float>())
    ("allow-leak", "train even when the mask lets a position see the character it must predict")
    ("batch", "sequences per step", cxxopts::value<int>())
    ("steps", "total optimizer steps", cxxopts::value<int>())
    ("lr", "peak learning rate", cxxopts::value<float>())
    ("min-lr", "learning rate at the end of the cosine decay", cxxopts::value<float>())
    ("warmup", "linear warm-up steps", cxxopts::value<int>())
    ("beta1", "AdamW β1", cxxopts::value<float>())
    ("beta2", "AdamW β2", cxxopts::value<float>())
    ("eps", "AdamW ε", cxxopts::value<float>())
    ("weight-decay", "AdamW decoupled weight decay (2-D weights only)", cxxopts::value<float>())
    ("grad-clip", "clip the global gradient norm to this (0 = off)", cxxopts::value<float>())
    ("eval-every", "evaluate train and val loss every N steps (0 = start and end only)", cxxopts::value<int>())
    ("eval-iters", "batches per split per evaluation", cxxopts::value<int>())
    ("ckpt-every", "write a checkpoint every N steps (0 = at the end only)", cxxopts::value<int>())
    ("log-every", "progress line every N steps when the output is not a terminal", cxxopts::value<int>())
    ("seed", "random seed for the initial weights and the batches", cxxopts::value<uint64_t>())
    ("threads", "threads for OpenMP and OpenBLAS (0 = all cores)", cxxopts::value<int>())
    ("stop-at", "checkpoint and stop after this step (continue later with --resume)", cxxopts::value<int>())
    ("h,help", "show this help");
  // clang-format on
}

// Copies every flag the user gave into `c`.
static void apply_flags(const cxxopts::ParseResult& r, TrainConfig& c) {
  auto set = [&](const char* flag, auto& field) {
    if (r.count(flag)) field = r[flag].as<std::remove_reference_t<decltype(field)>>();
  };
  set("data", c.data), set("out", c.out), set("mask", c.mask), set("layer-masks", c.mask);
  set("objective", c.objective), set("mlm-rate", c.mlm_rate), set("allow-leak", c.allow_leak);
  if (r.count("mask") && r.count("layer-masks")) throw std::runtime_error("give --mask or --layer-masks, not both");
  set("n-layer", c.model.n_layer), set("n-head", c.model.n_head), set("n-embd", c.model.n_embd);
  set("block", c.model.block_size), set("attn-only", c.model.attn_only), set("attn-scale", c.model.attn_scale);
  set("attention", c.model.attention), set("layer-attention", c.model.attention);
  if (r.count("attention") && r.count("layer-attention"))
    throw std::runtime_error("give --attention or --layer-attention, not both");
  if (r.count("attention") && c.model.attention.find(',') != std::string::npos)
    throw std::runtime_error("--attention takes one kind for every layer (softmax or linear); use --layer-attention "
                             "for a list");
  set("block", c.model.block_size), set("batch", c.batch), set("steps", c.steps);
  set("lr", c.adamw.lr), set("min-lr", c.adamw.min_lr), set("warmup", c.adamw.warmup_steps);
  set("beta1", c.adamw.beta1), set("beta2", c.adamw.beta2), set("eps", c.adamw.eps);
  set("weight-decay", c.adamw.weight_decay), set("grad-clip", c.adamw.grad_clip);
  set("eval-every", c.eval_every), set("eval-iters", c.eval_iters), set("ckpt-every", c.ckpt_every);
  set("log-every", c.log_every), set("seed", c.seed), set("threads", c.threads);
  set("stop-at", c.stop_at);
}

static bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

static std::string directory_of(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
}

int main(int argc, char** argv) {
  prefer_passive_waiting(argv);  // see threads.h: restarts once with OMP_WAIT_POLICY=passive unless it is set
  cxxopts::Options options("train", "Train a character-level GPT on a UTF-8 text file.");
  add_flags(options);
  try {
    cxxopts::ParseResult flags = options.parse(argc, argv);
    if (flags.count("help")) {
      std::printf("%s\n", options.help().c_str());
      return 0;
    }
    if (!flags.unmatched().empty()) throw std::runtime_error("unexpected argument '" + flags.unmatched()[0] + "'");
    if (!flags.count("resume")) {
      TrainConfig config = preset(flags["preset"].as<std::string>());
      apply_flags(flags, config);
      run_training(config);
      return 0;
    }

    // Resuming continues the checkpoint's own run: its model, optimizer and schedule. Only the flags that do not
    // change what is being computed may differ; --steps may extend the run.
    std::string from = flags["resume"].as<std::string>();
    std::string file = is_directory(from) ? checkpoint_path(from) : from;
    Checkpoint ckpt = load_checkpoint(file);
    if (!ckpt.resumable) throw std::runtime_error(file + ": holds weights only (no optimizer state); cannot resume");
    TrainConfig config = train_config_from_json(ckpt.resume.train_config, file);
    const std::set<std::string> may_change = {"data", "out", "steps", "threads", "eval-every", "eval-iters",
                                              "ckpt-every", "log-every", "resume", "stop-at"};
    for (const auto& kv : flags.arguments())
      if (!may_change.count(kv.key()))
        throw std::runtime_error("--" + kv.key() + " cannot be changed when resuming (the run continues with the " +
                                 "settings stored in " + file + ")");
    if (!flags.count("out")) config.out = directory_of(file);
    apply_flags(flags, config);
    if (config.steps < ckpt.resume.step)
      throw std::runtime_error("--steps (" + std::to_string(config.steps) + ") is below the checkpoint's step (" +
                               std::to_string(ckpt.resume.step) + ")");
    run_training(config, &ckpt);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 1;
  }
}
