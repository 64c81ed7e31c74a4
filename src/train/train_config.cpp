#include "train/train_config.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "data/utf8.h"

#define FIELD(member) SETTING_FIELD(TrainConfig, member)

// ---- the table -------------------------------------------------------------------------------------------------
// One row per setting: key in the checkpoint, flag, help, field, range, scope (Run: fixed on --resume; Knob: a
// resumed run may change it; Invocation: not stored). The model's own settings are ModelConfig's table
// (model/config.cpp), placed after --out; the checkpoint stores those once, in its metadata.
static const std::vector<Setting<TrainConfig>>& run_settings() {
  using S = Scope;
  // clang-format off
  static const std::vector<Setting<TrainConfig>> table = {
    {"data",         "data",         "UTF-8 text file to train on",                        FIELD(data),               any_value(),  S::Knob},
    {"out",          "out",          "output directory for ckpt.safetensors and metrics.csv", FIELD(out),             any_value(),  S::Knob},
    {"objective",    "objective",    "clm (GPT: next character), mlm (BERT: masked characters) or prefix-lm",
                                                                                           FIELD(objective),          any_value(),  S::Run},
    {"mask",         "mask",         "attention mask of every layer: causal, bidirectional, prefix:N or window:W "
                                     "(default: the objective's own)",                     FIELD(mask),               any_value(),  S::Run},
    {nullptr,        "layer-masks",  "one mask per layer, comma-separated, e.g. causal,causal,window:16,bidirectional",
                                                                                           FIELD(mask),               any_value(),  S::Run},
    {"mlm_rate",     "mlm-rate",     "mlm: fraction of positions chosen per sequence",     FIELD(mlm_rate),           between(0, 1, true, false), S::Run},
    {"allow_leak",   "allow-leak",   "train even when the mask lets a position see the character it must predict",
                                                                                           FIELD(allow_leak),         any_value(),  S::Run},
    {"batch",        "batch",        "sequences per step",                                 FIELD(batch),              positive(),   S::Run},
    {"steps",        "steps",        "total optimizer steps",                              FIELD(steps),              at_least(0),  S::Knob},
    {"lr",           "lr",           "peak learning rate",                                 FIELD(adamw.lr),           positive(),   S::Run},
    {"min_lr",       "min-lr",       "learning rate at the end of the cosine decay (≤ --lr)", FIELD(adamw.min_lr),    at_least(0),  S::Run},
    {"warmup_steps", "warmup",       "linear warm-up steps",                               FIELD(adamw.warmup_steps), at_least(0),  S::Run},
    {"beta1",        "beta1",        "AdamW β1",                                           FIELD(adamw.beta1),        between(0, 1, false, true), S::Run},
    {"beta2",        "beta2",        "AdamW β2",                                           FIELD(adamw.beta2),        between(0, 1, false, true), S::Run},
    {"eps",          "eps",          "AdamW ε",                                            FIELD(adamw.eps),          positive(),   S::Run},
    {"weight_decay", "weight-decay", "decoupled weight decay of the embeddings and the linear weights (AdamW and Muon)",
                                                                                           FIELD(adamw.weight_decay), at_least(0),  S::Run,
                                                                                           "0.1"},  // the default until the tiny preset took 0.05
    {"grad_clip",    "grad-clip",    "clip the global gradient norm to this (0 = off)",    FIELD(adamw.grad_clip),
                                                                                at_least(0, " (0 turns clipping off)"), S::Run},
    {"optimizer",    "optimizer",    "adamw, or muon: orthogonalised momentum for the blocks' linear weights, AdamW for the rest",
                                                                                           FIELD(optimizer),          any_value(),  S::Run,
                                                                                           "\"adamw\""},  // files from before Muon
    {"muon_lr",      "muon-lr",      "Muon's peak learning rate (on --lr's warm-up and cosine schedule)",
                                                                                           FIELD(muon.lr),            positive(),   S::Run},
    {"muon_momentum", "muon-momentum", "Muon's (Nesterov) momentum",                      FIELD(muon.momentum),      between(0, 1, false, true), S::Run},
    {"eval_every",   "eval-every",   "evaluate train and val loss every N steps (0 = start and end only)",
                                                                                           FIELD(eval_every),         at_least(0),  S::Knob},
    {"eval_iters",   "eval-iters",   "batches per split per evaluation",                   FIELD(eval_iters),         positive(),   S::Knob},
    {"eval_windows", "eval-windows", "also score this many random validation windows at each evaluation, as nanoGPT "
                                     "estimates (metrics.csv's val_windows; 0 = off)",     FIELD(eval_windows),       at_least(0),  S::Knob},
    {"ckpt_every",   "ckpt-every",   "write a checkpoint every N steps (0 = at the end only)", FIELD(ckpt_every),     at_least(0),  S::Knob},
    {"snapshot_every", "snapshot-every", "keep the weights alone every N steps in OUT/snapshots/ for the explorer's "
                                     "timeline (0 = none)",                                FIELD(snapshots.every),    at_least(0),  S::Knob},
    {"snapshot_keep", "snapshot-keep", "at most this many snapshots; reaching it drops every other one (thinned evenly)",
                                                                                           FIELD(snapshots.keep),     at_least(2),  S::Knob},
    {"log_every",    "log-every",    "progress line every N steps when the output is not a terminal",
                                                                                           FIELD(log_every),          positive(),   S::Knob},
    {"seed",         "seed",         "random seed for the initial weights and the batches", FIELD(seed),              any_value(),  S::Run},
    {"threads",      "threads",      "threads for OpenMP and OpenBLAS (0 = all cores)",    FIELD(threads),            at_least(0),  S::Knob},
    {"threads_split", "threads-split", "batch (each thread its own slice of the batch), ops (every op split between "
                                     "the threads) or auto (batch when each thread gets a sequence)",
                                                                                           FIELD(threads_split),      any_value(),  S::Knob},
    {nullptr,        "stop-at",      "checkpoint and stop after this step (continue later with --resume; -1 = no)",
                                                                                           FIELD(stop_at),            at_least(-1), S::Invocation},
    {nullptr,        "overwrite",    "start afresh even though --out holds an earlier run (its checkpoint and metrics.csv are replaced)",
                                                                                           FIELD(overwrite),          any_value(),  S::Invocation},
  };
  // clang-format on
  return table;
}

#undef FIELD

const std::vector<Setting<TrainConfig>>& train_settings() {
  static const std::vector<Setting<TrainConfig>> table = [] {
    const std::vector<Setting<TrainConfig>>& run = run_settings();
    std::vector<Setting<TrainConfig>> all(run.begin(), run.begin() + 2);  // --data, --out
    for (const Setting<TrainConfig>& s : nested_settings(model_settings(), &TrainConfig::model))
      if (s.flag) all.push_back(s);  // vocab_size comes from the corpus, not a flag
    all.insert(all.end(), run.begin() + 2, run.end());
    return all;
  }();
  return table;
}

// ---- checkpoint JSON -------------------------------------------------------------------------------------------

std::string to_json(const TrainConfig& c) { return settings_to_json(train_settings(), c).dump(); }

std::string checkpoint_json(const TrainConfig& c) { return settings_to_json(run_settings(), c).dump(); }

TrainConfig train_config_from_json(const std::string& text, const std::string& source,
                                   std::vector<std::string>* missing, const ModelConfig* model) {
  TrainConfig c;  // a key the checkpoint lacks keeps this default
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    std::vector<std::string> absent = settings_from_json(model ? run_settings() : train_settings(), j, c);
    if (missing) missing->insert(missing->end(), absent.begin(), absent.end());
    if (!model) return c;
    c.model = *model;
    // Files written before the model's settings were stored once kept them here too: they must agree.
    TrainConfig stored = c;
    const std::vector<Setting<TrainConfig>> rows = nested_settings(model_settings(), &TrainConfig::model);
    settings_from_json(rows, j, stored);
    for (const Setting<TrainConfig>& s : rows)
      if (s.key && setting_text(s, stored) != setting_text(s, c))
        throw std::runtime_error(std::string("'") + s.key + "' is " + setting_text(s, stored) +
                                 " here but " + setting_text(s, c) + " in the model's metadata");
  } catch (const std::exception& e) {
    throw std::runtime_error(source + ": bad training settings in the checkpoint: " +
                             escape_for_message(e.what()));
  }
  return c;
}

// ---- presets and checks ----------------------------------------------------------------------------------------

// The recipes are measured, not guessed: docs/performance.md ("How the tiny preset's recipe was chosen", "The
// 10-minute point on Zen 4") has the runs and the alternatives they beat.
// - tiny: batch 12 (on two cores a bigger batch buys no tokens/s and learns less per token), Muon for the blocks'
//   linear weights, weight decay 0.05, 1000 steps: val ≤ 1.72 on Tiny Shakespeare by nanoGPT's estimator and
//   ≤ 0.62 on data/stories.txt (weight decay 0.1 ended there at 0.622, and 0.05 ended lower on each of 3 seeds).
//   The other presets keep the 0.1 they were measured with.
// - frontier: block 128 at the tiny widths, 6000 steps: past ~6000 steps the train/val gap of this model without
//   dropout grows as fast as the train loss falls.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"tiny", "4 layers, 128 wide, block 64, batch 12, Muon (AdamW lr 6e-3 for the rest), weight decay 0.05, 1000 "
               "steps: the defaults, tuned for time to quality",
       [](TrainConfig&) {}},
      {"nanogpt", "the tiny model with nanoGPT's CPU recipe: AdamW, lr 1e-3 to 1e-4, 100 warm-up steps, 2000 steps",
       [](TrainConfig& c) {
         c.optimizer = "adamw";
         c.adamw.lr = 1e-3f, c.adamw.min_lr = 1e-4f, c.adamw.warmup_steps = 100, c.adamw.weight_decay = 0.1f;
         c.steps = 2000, c.eval_every = 250;
       }},
      {"frontier", "the best loss we found for 10 minutes of two cores: the tiny model's widths, block 128, batch 16, "
                   "Muon (AdamW lr 4e-3 for the rest), 6000 steps",
       [](TrainConfig& c) {
         c.model.block_size = 128;
         c.batch = 16, c.steps = 6000, c.eval_every = 500;
         c.adamw.lr = 4e-3f, c.adamw.min_lr = 4e-4f, c.adamw.warmup_steps = 100, c.adamw.weight_decay = 0.1f;
         c.eval_iters = 10;
       }},
      {"small", "nanoGPT's shakespeare_char model: 6 layers, 384 wide, block 256, batch 64, lr 1e-3, 5000 steps",
       [](TrainConfig& c) {
         c.model.n_layer = 6, c.model.n_head = 6, c.model.n_embd = 384, c.model.block_size = 256;
         c.optimizer = "adamw";
         c.batch = 64, c.steps = 5000, c.eval_every = 250;
         c.adamw.lr = 1e-3f, c.adamw.min_lr = 1e-4f, c.adamw.warmup_steps = 100, c.adamw.weight_decay = 0.1f;
       }},
  };
  return table;
}

TrainConfig preset(const std::string& name) {
  std::string names;
  for (const Preset& p : presets()) {
    if (name == p.name) {
      TrainConfig c;
      p.apply(c);
      return c;
    }
    names += std::string(names.empty() ? "" : ", ") + p.name;
  }
  throw std::runtime_error("--preset: unknown preset '" + escape_for_message(name) + "' (expected " + names + ")");
}

// Sequences one evaluation may score per estimate: 10⁷ windows of block 256 is 2.6 billion tokens, hours of work
// on a laptop, and keeps the evaluation's bookkeeping (8 bytes per sequence, 16 per batch) under 100 MB.
static const long double kMaxEvalSequences = 1e7;

// --eval-iters and --eval-windows, as flags or forged in a checkpoint, bounded before anything is allocated or the
// run folder exists (2147483647 windows overflowed an int; 10⁹ allocated 1.3 GB and scored 83 million batches).
static void check_evaluation_counts(const TrainConfig& c) {
  char text[400];
  const long double iters = c.eval_iters, B = c.batch;
  if (iters * B > kMaxEvalSequences) {
    std::snprintf(text, sizeof text,
                  "--eval-iters %d with --batch %d scores %.0Lf sequences for each of the training loss, the "
                  "validation loss and the next-character score at every evaluation (about %.0Lf bytes of "
                  "bookkeeping alone); at most %.0Lf sequences (--eval-iters %.0Lf at --batch %d)",
                  c.eval_iters, c.batch, iters * B, iters * (16 + 8 * B), kMaxEvalSequences,
                  std::floor(kMaxEvalSequences / B), c.batch);
    throw std::runtime_error(text);
  }
  if ((long double)c.eval_windows > kMaxEvalSequences) {
    const long double batches = std::ceil((long double)c.eval_windows / B);
    std::snprintf(text, sizeof text,
                  "--eval-windows %d is %.0Lf batches of --batch %d at every evaluation (about %.0Lf bytes of "
                  "bookkeeping alone); at most %.0Lf windows",
                  c.eval_windows, batches, c.batch, batches * 16, kMaxEvalSequences);
    throw std::runtime_error(text);
  }
}

void validate(const TrainConfig& c) {
  check_ranges(train_settings(), c);
  check_evaluation_counts(c);
  if (c.adamw.min_lr > c.adamw.lr) throw std::runtime_error("--min-lr must be between 0 and --lr");
}
