// The settings of a training run (TrainConfig) and their table: one row per setting gives its checkpoint key,
// its flag, its help line, its range and whether --resume may change it (base/settings.h explains the table).
// To add a setting: a field with its default here, a row in run_settings() (train_config.cpp), the code that uses
// it, and its test. The flags, --help, the checkpoint's JSON, --resume and the range checks follow from the row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/settings.h"
#include "optim/adamw.h"
#include "model/config.h"
#include "optim/muon.h"
#include "train/snapshots.h"

// The defaults are ./train's: the tiny preset, which changes nothing (presets() in train_config.cpp). A checkpoint
// written before a setting existed gets the default too, or what the row's `absent` says such files meant (AdamW
// for the optimizer).
struct TrainConfig {
  std::string data = "data/stories.txt";
  std::string out = "out";
  ModelConfig model;         // vocab_size comes from the corpus
  std::string objective = "clm";  // clm | mlm | prefix-lm  (objective.h)
  std::string mask;          // "" = the objective's own: causal, bidirectional, prefix:0; or "m0,m1,…" per layer
  float mlm_rate = 0.15f;    // MLM: fraction of positions chosen per sequence
  bool allow_leak = false;   // train even when the mask lets a position see its answer (a demonstration)
  int batch = 12;
  int steps = 1000;          // total optimizer steps of the run (the cosine schedule ends here)
  AdamWConfig adamw;
  std::string optimizer = "muon";  // adamw | muon (optim/muon.h: Muon for the blocks' linear weights, AdamW for the rest)
  MuonConfig muon;
  int eval_every = 200;      // 0 = only at the start and the end
  int eval_iters = 20;       // batches per split per evaluation
  int eval_windows = 0;      // > 0: each evaluation also scores this many random validation windows (nanoGPT's
                             // estimator; rounded up to whole batches), metrics.csv's val_windows
  int ckpt_every = 500;      // 0 = only at the end
  SnapshotSettings snapshots;  // the weights alone every N steps in OUT/snapshots/ (train/snapshots.h; off: N = 0)
  int log_every = 50;        // progress lines when stdout is not a terminal
  uint64_t seed = 1337;
  int threads = 0;           // 0 = all cores
  std::string threads_split = "auto";  // batch | ops | auto: how the threads share a step (train/replicas.h)
  int stop_at = -1;          // this invocation only (not saved): checkpoint and stop after this step, as if
                             // interrupted; resume later to continue. −1 = run to `steps`
  bool overwrite = false;    // this invocation only: a fresh run (or one resumed into another run's folder) may
                             // replace the checkpoint and metrics.csv in `out`; otherwise refused (io/run_folder.h)
};

// Whether a run of `config` stores the setting `key` (base/settings.h): its model's rule (model/config.h), since the
// run's table holds the model's rows.
inline bool setting_stored(const char* key, const TrainConfig& config) { return setting_stored(key, config.model); }

// Every setting of ./train, in --help order: run_settings()'s rows (train_config.cpp) with the model's
// (model_settings(), model/config.cpp) after --out.
const std::vector<Setting<TrainConfig>>& train_settings();

// Every setting as JSON (--print-settings).
std::string to_json(const TrainConfig& config);
// The settings a resumable checkpoint stores as its "train_config": all but the model's, which its metadata holds.
std::string checkpoint_json(const TrainConfig& config);
// Reads settings back from JSON: a checkpoint's "train_config", with `model` the model's settings from its metadata,
// or to_json's output (model null: the model's settings are in the JSON). `source` names the file in messages. A
// key the JSON lacks (a setting added after the checkpoint was written) keeps its default and is appended to
// `missing` when given. Older checkpoints also kept the model's settings in train_config: they must agree.
TrainConfig train_config_from_json(const std::string& json, const std::string& source,
                                   std::vector<std::string>* missing = nullptr, const ModelConfig* model = nullptr);
// A named starting point for ./train --preset: the defaults (which are the tiny preset) with some settings changed.
struct Preset {
  const char* name;
  const char* summary;            // one line for --help and docs/usage.md
  void (*apply)(TrainConfig& c);  // the settings it changes from the defaults
};
// Every preset, in --help order (train_config.cpp says why each recipe is what it is).
const std::vector<Preset>& presets();
// The defaults with the named preset applied; throws, listing the names, on an unknown one.
TrainConfig preset(const std::string& name);
// Throws, naming the flag, on a setting that cannot work (zero batch, negative steps, lr ≤ 0, …): the table's
// ranges, then the checks that involve two settings. The named choices (objective, optimizer, masks, thread split)
// are parsed once, and refused, by plan_training (train/plan.h), which calls this first.
void validate(const TrainConfig& config);
