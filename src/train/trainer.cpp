#include "train/trainer.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "base/rng.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "data/dataset.h"
#include "data/objective.h"
#include "data/utf8.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "train/loop.h"
#include "train/plan.h"
#include "train/divergence_guard.h"
#include "train/evaluate.h"
#include "io/run_folder.h"
#include "train/metrics_file.h"
#include "train/output.h"
#include "train/progress.h"
#include "train/replicas.h"
#include "train/stop_signal.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string best_path(const std::string& out) { return out + "/best.safetensors"; }

// ---- the run: what one invocation of run_training works on -----------------------------------------------------
// The production shell around the loop (train/loop.h): it starts or resumes the model, draws the batches, and
// after every step checks it, logs it and takes the requests to stop. The state its methods share is named here.
class TrainingRun : public LoopShell {
 public:
  TrainingRun(const TrainConfig& config, const TrainPlan& plan, Checkpoint* resume, const TrainHooks& hooks);
  TrainResult run();

  // The loop's calls (train/loop.h).
  void evaluate(int step) override;  // fills the row's losses, scores and extra cells; writes the last row
  BatchView batch(int step) override;
  bool stepped(int step, const StepResult& result) override;  // throws if it diverged
  void save(int step) override;

 private:
  void start_model(Checkpoint* resume);  // a new model from the corpus, or the resumed checkpoint's
  void print_header() const;
  MetricsRow empty_row(int step) const;  // a metrics.csv row for `step` with every cell empty
  double seconds() const {  // since the run started (a resumed run continues its metrics.csv's clock)
    return earlier_seconds_ + std::chrono::duration<double>(Clock::now() - started_).count();
  }
  double guard_loss();  // the weights' loss on the divergence guard's fixed validation batch
  bool holds_start() const;  // ckpt_file_ holds the weights this invocation began with
  void drop_best_aside();
  void take_over_best_aside();  // OUT/best.safetensors of an earlier invocation of this run (or of a replaced one)
  std::runtime_error diverged(int step, const std::string& what) const;
  std::string last_good() const;

  const TrainConfig& cfg_;
  const TrainPlan& plan_;     // the settings' named choices, parsed (plan.h): objective, optimizer, masks, split
  const EvaluationColumns columns_;
  const Reducer& reducer_;
  const bool resumed_;
  // This process computes rows [rows_.begin, rows_.end) of every batch (all of them with one process). Every
  // process still draws the whole batch, so all see the same windows.
  const Rows rows_;
  Checkpoint ckpt_;           // the model, its tokenizer and objective
  Corpus corpus_;
  ResumeState state_;         // step, optimizer, batch sampler: what a checkpoint stores to continue exactly
  ThreadSplit split_ = ThreadSplit::Ops;  // how the threads share a step (replicas.h)
  std::unique_ptr<Replicas> replicas_;    // the model, and with batch-split its replicas, one per thread
  std::unique_ptr<Learner> learner_;      // what the loop's step trains: the replicas and the optimizer's state
  bool leaks_ = false;        // the mask lets a position see its answer (allowed by --allow-leak)
  bool report_honest_ = false;  // print the honest next-character loss beside the training loss (run())
  int mask_token_ = -1;
  std::unique_ptr<BatchMaker> batches_;
  Rng batch_rng_;
  std::string ckpt_file_;
  bool saved_any_ = false;    // this invocation has written ckpt_file_
  int first_step_ = 0;        // where this invocation began (state_.step moves on at every save)
  std::string resumed_rng_;   // the batch sampler's state at that step
  std::vector<int> x_, y_;    // the step's batch
  std::vector<int> stats_x_, stats_y_;  // one fixed validation batch for the extra columns (TrainHooks)
  int stats_prefix_ = -1;
  std::string no_extra_cells_;  // the extra columns of a row without an evaluation
  MetricsRow row_;              // the current step's row of metrics.csv
  TrainResult result_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<RunFolderLock> lock_;  // held from the constructor to the end of the run
  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<DivergenceGuard> guard_;  // a save only of weights whose loss is sane (divergence_guard.h)
  bool ckpt_is_best_ = false;  // ckpt_file_ holds the best weights saved (or started from), so far
  std::string best_aside_;     // OUT/best.safetensors while it holds the best and ckpt_file_ does not
  bool degraded_ = false;      // the last checkpoint saved is much worse than best_aside_ (divergence_guard.h)
  Clock::time_point started_ = Clock::now();  // this invocation: loading the corpus and the model count too
  Clock::time_point step_started_;            // the current step's, from drawing its batch
  double earlier_seconds_ = 0;                // the resumed run's wall_s before this invocation
};

// The hooks' reducer, or one process when none is given.
const Reducer& reducer_of(const TrainHooks& hooks) { return hooks.reducer ? *hooks.reducer : one_process(); }

TrainingRun::TrainingRun(const TrainConfig& cfg, const TrainPlan& plan, Checkpoint* resume, const TrainHooks& hooks)
    : cfg_(cfg), plan_(plan), columns_(hooks.columns), reducer_(reducer_of(hooks)), resumed_(resume != nullptr),
      rows_(reducer_.rows(cfg.batch)) {
  start_model(resume);
  GPT& model = *ckpt_.model;
  const int B = cfg.batch, T = model.config.block_size;
  try {
    check_no_leak(plan_.objective, model.masks(), T);
  } catch (const std::runtime_error&) {
    if (!cfg.allow_leak) throw;
    leaks_ = true;
  }
  mask_token_ = corpus_.tokenizer.special_id(kMaskToken);
  batches_ = std::make_unique<BatchMaker>(plan_.objective, cfg.mlm_rate, mask_token_, corpus_.tokenizer.num_chars());
  if (cfg.stop_at != -1 && (cfg.stop_at <= state_.step || cfg.stop_at > cfg.steps))
    throw std::runtime_error("--stop-at " + std::to_string(cfg.stop_at) + " must be after the current step (" +
                             std::to_string(state_.step) + ") and at most --steps (" + std::to_string(cfg.steps) + ")");
  check_corpus_fits(corpus_, T);
  // The split first: batch-split's replicas (their gradients and activations) count in the estimate.
  const int threads = omp_get_max_threads();
  split_ = choose_split(plan_.threads_split, threads, rows_.count(), model.gated());
  check_fits_in_memory(model.config, model.mixers(), rows_.count(), split_ == ThreadSplit::Batch ? threads : 1);
  if (reducer_.writes()) {  // one process of a data-parallel run touches the folder
    prepare_output_dir(cfg.out);
    lock_ = std::make_unique<RunFolderLock>(cfg.out);  // one run per folder (run_folder.h), held for the whole run
    if (!resume)
      refuse_to_replace_run(cfg.out, {checkpoint_path(cfg.out), cfg.out + "/metrics.csv", best_path(cfg.out)},
                            cfg.overwrite);
    for (const std::string& stale :
         remove_stale_temporaries(cfg.out, {"ckpt.safetensors", "metrics.csv", "best.safetensors"}))
      std::printf("removed %s, left by a run that was killed while writing it\n", escape_for_message(stale).c_str());
  }
  state_.train_config = checkpoint_json(cfg);  // the model's settings are in the checkpoint's metadata
  ckpt_file_ = checkpoint_path(cfg.out);
  batch_rng_.set_state(state_.batch_rng);
  first_step_ = state_.step;
  resumed_rng_ = state_.batch_rng;
  guard_ = std::make_unique<DivergenceGuard>(corpus_.tokenizer.size());
  reducer_.check_agreement(cfg, corpus_, state_.step, state_.batch_rng, ckpt_.model->params_memory());
  replicas_ = std::make_unique<Replicas>(model, split_ == ThreadSplit::Batch ? threads : 1);
  learner_.reset(new Learner{*replicas_, plan_.optimizer->kind, state_.optimizer, reducer_});
  x_.resize((size_t)B * T), y_.resize((size_t)B * T);
  stats_x_.resize((size_t)B * T), stats_y_.resize((size_t)B * T);
  guard_->start(guard_loss(), first_step_);
  if (reducer_.writes()) take_over_best_aside();
}

void TrainingRun::start_model(Checkpoint* resume) {
  if (resume) {
    ckpt_ = std::move(*resume);
    if (!ckpt_.resumable) throw std::runtime_error("the checkpoint holds weights only (no optimizer state)");
    corpus_ = load_corpus(cfg_.data, ckpt_.tokenizer);
    state_ = std::move(ckpt_.resume);
    return;
  }
  corpus_ = load_corpus(cfg_.data);
  if (plan_.objective == Objective::MLM) corpus_.tokenizer.add_special(kMaskToken);
  ModelConfig model_config = cfg_.model;
  model_config.vocab_size = corpus_.tokenizer.size();
  // Validated, and its memory checked before a single parameter is allocated, with the mixers the model then keeps.
  std::vector<std::unique_ptr<Mixer>> mixers = validated_mixers(model_config);
  check_fits_in_memory(model_config, mixers, rows_.count());
  ckpt_.model = std::make_unique<GPT>(model_config, plan_.masks, std::move(mixers));
  ckpt_.model->init_weights(cfg_.seed);
  // AdamW's moments start at zero; set them now so that even --steps 0 saves a complete (resumable) checkpoint.
  state_.optimizer.m.assign(ckpt_.model->num_params(), 0.0f);
  state_.optimizer.v.assign(ckpt_.model->num_params(), 0.0f);
  state_.batch_rng = Rng(cfg_.seed ^ 0x5eed5eedull).state();
}

void TrainingRun::print_header() const {
  const GPT& model = *ckpt_.model;
  std::printf("model: %s, %zu parameters, mask %s, objective %s\n", describe(model.config).c_str(),
              model.num_params(), masks_to_string(model.masks()).c_str(), to_string(plan_.objective).c_str());
  if (leaks_) std::printf("warning: --allow-leak: this mask lets positions see their answers; watch the honest loss\n");
  std::printf("data: %s: %zu training and %zu validation characters\n", escape_for_message(cfg_.data).c_str(), corpus_.train.size(),
              corpus_.val.size());
  const int processes = reducer_.processes();
  const int threads = omp_get_max_threads();
  const std::string split = threads == 1 ? ""
                            : split_ == ThreadSplit::Batch ? ", each its own slice of the batch (--threads-split batch)"
                                                           : ", sharing every op (--threads-split ops)";
  std::printf("training %d steps of %d×%d tokens with %s%s on %d thread%s%s%s (idle threads wait: %s)\nblas: %s\n",
              cfg_.steps,
              cfg_.batch, model.config.block_size, plan_.optimizer->title,
              state_.step ? (" from step " + std::to_string(state_.step)).c_str() : "", threads,
              threads == 1 ? "" : "s",
              processes == 1 ? "" : (" in each of " + std::to_string(processes) + " processes").c_str(), split.c_str(),
              wait_policy().c_str(), blas_kernel().c_str());
  std::fflush(stdout);
}

// The same evaluation batches every time (a fixed seed), so successive evaluations compare like with like, and
// the training batches never depend on how often we evaluate. Also measures the next-character score and the
// extra columns (TrainHooks: the lab's attention statistics under ./train) on one fixed validation batch.
void TrainingRun::evaluate(int step) {
  GPT& model = *ckpt_.model;
  const int B = cfg_.batch, T = model.config.block_size;
  MetricsRow& row = row_;
  Rng eval_rng(cfg_.seed + 1);
  row.train_loss = estimate_loss(*replicas_, *batches_, corpus_.train, B, T, cfg_.eval_iters, eval_rng, reducer_);
  row.val_loss = estimate_loss(*replicas_, *batches_, corpus_.val, B, T, cfg_.eval_iters, eval_rng, reducer_);
  // nanoGPT's estimator, when asked for: the validation loss over --eval-windows random windows, whole batches of
  // them (its own seed, so the other numbers are unchanged).
  if (cfg_.eval_windows > 0) {
    Rng windows_rng(cfg_.seed + 5);
    row.val_windows = estimate_loss(*replicas_, *batches_, corpus_.val, B, T, (int)(((long)cfg_.eval_windows + B - 1) / B),
                                    windows_rng, reducer_);
  }
  row.honest_bits =
      next_char_score(*replicas_, corpus_.val, cfg_.eval_iters * B, cfg_.seed + 2, mask_token_, reducer_).bits;
  if (reducer_.writes() && columns_.measure) {  // only the process that writes metrics.csv measures them
    if (stats_prefix_ >= 0) model.set_prefix_length(stats_prefix_);
    row.extra = columns_.measure(model, stats_x_.data(), stats_y_.data(), B, T);
  }
  result_.val_loss = row.val_loss, result_.honest_bits = row.honest_bits;
  if (reducer_.writes()) progress_->evaluation(step, row.train_loss, row.val_loss, report_honest_ ? row.honest_bits : -1);
  if (step == cfg_.steps) {  // the last row has no step after its evaluation
    row.wall_s = seconds();
    if (metrics_) metrics_->row(row);
  }
}

MetricsRow TrainingRun::empty_row(int step) const {
  MetricsRow row;
  row.step = step, row.extra = no_extra_cells_;
  return row;
}

BatchView TrainingRun::batch(int) {
  step_started_ = Clock::now();
  const int B = cfg_.batch, T = ckpt_.model->config.block_size;
  const int prefix = batches_->next(corpus_.train, B, T, batch_rng_, x_.data(), y_.data());
  if (prefix >= 0) replicas_->set_prefix_length(prefix);
  const size_t first = (size_t)rows_.begin * T;  // this process's rows of the batch
  return {x_.data() + first, y_.data() + first, rows_.count(), T};
}

bool TrainingRun::stepped(int step, const StepResult& r) {
  GPT& model = *ckpt_.model;
  if (!r.updated)
    throw diverged(step, "loss " + std::to_string(r.loss) + ", gradient norm " + std::to_string(r.grad_norm) +
                             "; the weights were not updated");
  // An absurd step can overflow the weights even from finite gradients.
  if (!all_finite(model.params_memory().data(), model.params_memory().size()))
    throw diverged(step, "the update made some weights infinite or NaN");
  guard_->observe(r.loss);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - step_started_).count();
  const double muon_lr = plan_.optimizer->kind == OptimizerKind::Muon ? r.lr.muon : std::nan("");  // empty under AdamW
  row_.batch_loss = r.loss, row_.lr = r.lr.adamw, row_.grad_norm = r.grad_norm, row_.step_ms = ms;
  row_.wall_s = seconds(), row_.muon_lr = muon_lr;
  if (metrics_) metrics_->row(row_);
  row_ = empty_row(step + 1);
  result_.step = step + 1;
  const bool out = reducer_.writes();  // false on every process of a data-parallel run but one
  if (out) progress_->step(step, step == first_step_, r.loss, r.lr.adamw, muon_lr, ms);
  // Every kCheckEvery steps the processes compare their parameters (one process: nothing to compare).
  if ((step + 1) % kCheckEvery == 0) reducer_.check_same(model.params_memory(), step + 1);
  // A stop request reaches the processes at different moments: all stop when one has it.
  const bool stop = reducer_.any(stop_requested());
  if (!stop && step + 1 != cfg_.stop_at) return true;
  save(step + 1);
  if (out) progress_->stopped(stop, step + 1, ckpt_file_);
  if (out && !best_aside_.empty())  // kept for the resume, which continues it (take_over_best_aside)
    std::printf("the best checkpoint (step %d) is kept in %s\n", guard_->best_saved_step(),
                escape_for_message(best_aside_).c_str());
  result_.interrupted = true;
  return false;
}

// The weights' loss on one fixed validation batch (its own seed: the training batches are unchanged).
double TrainingRun::guard_loss() {
  Rng guard_rng(cfg_.seed + 4);
  return estimate_loss(*replicas_, *batches_, corpus_.val, cfg_.batch, ckpt_.model->config.block_size, 1, guard_rng);
}

void TrainingRun::save(int step) {
  const double loss = guard_loss();
  const std::string refused = guard_->refuse(loss);
  if (!refused.empty()) throw diverged(step, refused);
  // Worse than the best, which the file to be replaced holds: the best goes aside first (divergence_guard.h).
  const bool best = loss < guard_->best_saved();
  if (reducer_.writes() && !best && best_aside_.empty() &&
      (ckpt_is_best_ || (!saved_any_ && guard_->best_saved_step() == first_step_ && resumed_ && holds_start())))
    best_aside_ = keep_best_aside(ckpt_file_);
  saved_any_ = true;
  state_.step = step;
  replicas_->set_prefix_length(0);  // a prefix-LM's N is redrawn per batch; store the neutral prefix:0
  state_.batch_rng = batch_rng_.state();
  reducer_.check_same(ckpt_.model->params_memory(), step);  // what is saved is every process's model
  if (reducer_.writes()) {
    if (metrics_) metrics_->sync();  // the rows up to this step reach the disk no later than the checkpoint holding it
    save_checkpoint(ckpt_file_, *ckpt_.model, corpus_.tokenizer, &state_, plan_.objective);
    remember_checkpoint(ckpt_file_, step);  // for the message of a second Ctrl-C (stop_signal.h)
  }
  ckpt_is_best_ = guard_->saved(loss, step);
  if (ckpt_is_best_) drop_best_aside();  // the checkpoint is the best again
  const bool noted = degraded_;
  degraded_ = !best_aside_.empty() && guard_->much_worse(loss);
  if (degraded_ && !noted) {
    std::printf("note: the weights of step %d have a validation loss of %.4g nats, much worse than the best %.4g "
                "(step %d; the limit is %.4g): the best checkpoint is kept in %s\n", step, loss, guard_->best_saved(),
                guard_->best_saved_step(), guard_->much_worse_limit(), escape_for_message(best_aside_).c_str());
  }
}

// OUT/best.safetensors belongs to the run in OUT. A fresh run, or one that replaces the folder's run (--overwrite),
// removes it: an older run's best must never pass for this one's. A resumed run continues it: an earlier
// invocation kept it aside (and stopped, was stopped or was refused) because its checkpoint had become worse. The
// guard measures its weights on the same fixed batch, so that only better weights replace it and the resumed
// checkpoint is never put aside over it. One that holds a later step than the resumed checkpoint belongs to the
// future this resume replaces, and is removed; one of another model is not this run's, and is refused.
void TrainingRun::take_over_best_aside() {
  const std::string best = best_path(cfg_.out);
  struct stat st;
  if (::lstat(best.c_str(), &st) != 0) return;  // (anything but a regular file was refused up front)
  auto remove_it = [&](const std::string& why) {
    if (std::remove(best.c_str()) != 0)
      throw std::runtime_error("--out " + cfg_.out + ": cannot remove " + best + ": " + std::strerror(errno));
    std::printf("removed %s: %s\n", escape_for_message(best).c_str(), why.c_str());
  };
  if (!resumed_ || cfg_.overwrite) return remove_it("it was the best checkpoint of the run this one replaces");
  Checkpoint kept;
  try {
    kept = load_checkpoint(best);
  } catch (const std::exception& e) {
    throw std::runtime_error("--out " + cfg_.out + ": " + best + " cannot be this run's best checkpoint (" +
                             escape_for_message(e.what()) + "); remove it or move it elsewhere");
  }
  Span<float> params = ckpt_.model->params_memory();
  if (!kept.resumable || kept.model->num_params() != params.size() ||
      describe(kept.model->config) != describe(ckpt_.model->config))
    throw std::runtime_error("--out " + cfg_.out + ": " + best + " is not a checkpoint of this run's model (" +
                             describe(kept.model->config) + "); remove it or move it elsewhere");
  const int step = kept.resume.step;
  if (step > first_step_)
    return remove_it("it holds step " + std::to_string(step) + ", after the step " + std::to_string(first_step_) +
                     " this run resumes from");
  // Its loss on the guard's batch, measured with its weights in the model's memory (the replicas share it).
  const std::vector<float> own(params.begin(), params.end());
  const Span<const float> its = kept.model->params_memory();
  std::copy(its.begin(), its.end(), params.begin());
  const double loss = guard_loss();
  std::copy(own.begin(), own.end(), params.begin());
  const double start = guard_->best_saved();
  if (!guard_->saved(loss, step)) return remove_it("the checkpoint resumed from is as good");
  best_aside_ = best;
  degraded_ = guard_->much_worse(start);
}

void TrainingRun::drop_best_aside() {
  if (!best_aside_.empty()) std::remove(best_aside_.c_str());
  best_aside_.clear();
  degraded_ = false;
}

// Where the last good weights are, for the divergence message. Resuming with --out elsewhere means ckpt_file_ may
// not exist or may belong to another run: it is named only if it holds the step this invocation began at.
std::string TrainingRun::last_good() const {
  const std::string best = best_aside_.empty() ? "" : "; " + best_aside_ + " holds the best checkpoint (step " +
                                                          std::to_string(guard_->best_saved_step()) + ")";
  if (saved_any_)
    return best + "; " + ckpt_file_ + " holds the " + (best.empty() ? "last good checkpoint" : "last one saved") +
           " (step " + std::to_string(state_.step) + ")";
  if (!resumed_) return best;
  if (holds_start())
    return best + "; " + ckpt_file_ + " holds the " + (best.empty() ? "last good checkpoint" : "one resumed from") +
           " (step " + std::to_string(first_step_) + ")";
  return best + "; the checkpoint this run resumed from (step " + std::to_string(first_step_) + ") is unchanged";
}

bool TrainingRun::holds_start() const {
  try {
    Checkpoint on_disk = load_checkpoint(ckpt_file_);
    return on_disk.resumable && on_disk.resume.step == first_step_ && on_disk.resume.batch_rng == resumed_rng_;
  } catch (...) {
    return false;
  }
}

// A diverged step stops the run before anything is saved, naming the step and where the good weights are.
std::runtime_error TrainingRun::diverged(int step, const std::string& what) const {
  return std::runtime_error("training diverged at step " + std::to_string(step) + " (" + what + "); nothing was saved" +
                            last_good() + ". Try a lower " + plan_.optimizer->lr_flags + " (or check --attn-scale).");
}

// ---- the run -----------------------------------------------------------------------------------------------------
TrainResult TrainingRun::run() {
  GPT& model = *ckpt_.model;
  const int B = cfg_.batch, T = model.config.block_size;
  // The training loss of MLM, prefix-LM or a leaking mask is not next-character loss; the honest next-character
  // number (left context only, the same for every kind of model) is printed beside it in those cases, and logged
  // to metrics.csv always, so that runs of any objective compare on one curve.
  report_honest_ = plan_.objective != Objective::CLM || leaks_;
  const bool out = reducer_.writes();  // false on every process of a data-parallel run but one
  if (out) print_header();
  install_stop_handlers();
  progress_ = std::make_unique<Progress>(cfg_.steps, B * T, cfg_.log_every, reducer_.processes() == 1);
  // The extra columns (TrainHooks), after step_ms, filled at evaluations. --overwrite starts the file afresh, also
  // for a run resumed into another run's folder (train.cpp).
  const int L = model.config.n_layer;
  if (out) {
    metrics_ = std::make_unique<MetricsFile>(cfg_.out + "/metrics.csv", cfg_.overwrite ? 0 : state_.step,
                                             columns_.header ? columns_.header(L) : "");
    earlier_seconds_ = metrics_->resumed_wall_s();
  }
  Rng stats_rng(cfg_.seed + 3);
  stats_prefix_ = batches_->next(corpus_.val, B, T, stats_rng, stats_x_.data(), stats_y_.data());
  no_extra_cells_ = columns_.empty ? columns_.empty(L) : "";
  row_ = empty_row(first_step_);
  result_.step = first_step_;
  const auto start = Clock::now();  // for the closing line: this invocation's own time

  if (!train_loop(*learner_, cfg_, first_step_, *this)) return result_;  // stopped early, saved
  if (!degraded_) drop_best_aside();  // the run ended near its best: the copy aside is not needed

  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (out) std::printf("done: %d steps in %s; checkpoint %s%s\n", cfg_.steps, format_duration(seconds).c_str(),
                       escape_for_message(ckpt_file_).c_str(),
                       best_aside_.empty() ? "" : ("; the best (step " + std::to_string(guard_->best_saved_step()) +
                                                   ") is kept in " + escape_for_message(best_aside_)).c_str());
  return result_;
}

}  // namespace

TrainResult run_training(const TrainConfig& config, Checkpoint* resume, const TrainHooks& hooks) {
  const TrainPlan plan = plan_training(config);  // the settings checked, and their named choices parsed, once
  set_threads(config.threads > 0 ? config.threads : reducer_of(hooks).default_threads());  // cores ÷ processes here
  return TrainingRun(config, plan, resume, hooks).run();
}
