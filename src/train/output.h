// The output folder of a run (--out): created and proven writable before training starts, then, as RunFolder, the
// run's own: locked, its checkpoint saved there, the best one kept aside. What may be written into it (one run per
// folder, nothing replaced by accident) is io/run_folder.h; metrics.csv is train/metrics_file.h.
#pragma once
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "io/checkpoint.h"
#include "io/run_folder.h"
#include "train/divergence_guard.h"
#include "train/train_config.h"

// Creates out_dir (and its parents) and proves it is writable before any training starts, so a bad --out fails in
// the first second instead of at the first checkpoint. Throws naming --out.
void prepare_output_dir(const std::string& dir);

// The run's folder, as the run uses it: locked for the whole run, its checkpoint (OUT/ckpt.safetensors) written only
// with weights the divergence guard lets through (divergence_guard.h), and the best checkpoint kept aside, as
// OUT/best.safetensors, while a later one is much worse. Every process of a data-parallel run keeps the guard, so
// all decide alike whether to save; only the one that writes (`writes`) touches the folder.
class RunFolder {
 public:
  // Prepares --out and locks it for the run; a fresh run refuses to replace an earlier run's files (unless
  // --overwrite); the temporaries of a run killed mid-write are removed. `start_step` and `start_rng`: the step and
  // the batch sampler's state this invocation begins from; `vocab_size`: the guard's ln V.
  RunFolder(const TrainConfig& config, bool resumed, bool writes, int vocab_size, int start_step,
            const std::string& start_rng);

  const std::string& checkpoint_file() const { return ckpt_file_; }
  const std::string& best_aside() const { return best_aside_; }  // "" while the checkpoint holds the best
  int best_step() const { return guard_.best_saved_step(); }

  // The guard: every step's training loss, and the validation loss of the weights this invocation began with.
  void observe(double batch_loss) { guard_.observe(batch_loss); }
  void start(double loss) { guard_.start(loss, start_step_); }
  // OUT/best.safetensors left by an earlier invocation of this run (or of a replaced one): continued or removed.
  // `loss` measures the weights in `model`'s memory on the guard's fixed batch.
  void take_over_best_aside(GPT& model, const std::function<double()>& loss);

  // A save of weights whose validation loss is `loss`, at `step`: refuse() says why it may not happen ("" when it
  // may); before_save() puts the best aside when these weights are worse; write() writes the checkpoint (the process
  // that writes); saved() records it, drops the copy aside when these are the best, and notes when they are much
  // worse.
  std::string refuse(double loss) const { return guard_.refuse(loss); }
  void before_save(double loss, int step);
  void write(const GPT& model, const Tokenizer& tokenizer, const ResumeState& state, Objective objective);
  void saved(double loss, int step);
  // At the end of a run that ended near its best: the copy aside is not needed.
  void finish();

  // Where the last good weights are, for the divergence message ("; OUT/ckpt.safetensors holds …").
  std::string last_good() const;

 private:
  bool holds_start() const;  // ckpt_file_ holds the weights this invocation began with
  void drop_best_aside();

  const std::string out_;       // --out
  const bool overwrite_;        // --overwrite
  const bool resumed_;
  const bool writes_;           // this process writes the folder
  const std::string ckpt_file_;
  const int start_step_;        // where this invocation began
  const std::string start_rng_; // the batch sampler's state at that step
  std::unique_ptr<RunFolderLock> lock_;  // held from the start to the end of the run
  DivergenceGuard guard_;       // a save only of weights whose loss is sane
  bool saved_any_ = false;      // this invocation has written ckpt_file_
  int saved_step_ = 0;          // the step of the last checkpoint this invocation saved
  bool ckpt_is_best_ = false;   // ckpt_file_ holds the best weights saved (or started from), so far
  std::string best_aside_;      // OUT/best.safetensors while it holds the best and ckpt_file_ does not
  bool degraded_ = false;       // the last checkpoint saved is much worse than best_aside_ (divergence_guard.h)
};
