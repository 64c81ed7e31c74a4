#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
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
#include "train/batches.h"
#include "train/divergence_guard.h"
#include "train/evaluate.h"
#include "train/loop.h"
#include "train/output.h"
#include "train/plan.h"
#include "train/progress.h"
#include "train/replicas.h"
#include "train/snapshots.h"
#include "train/stop_signal.h"
#include "train/telemetry.h"

namespace {

using Clock = std::chrono::steady_clock;

// ---- the run: what one invocation of run_training works on -----------------------------------------------------
// The production shell around the loop (train/loop.h): it starts or resumes the model, draws the batches, and
// after every step checks it, logs it and takes the requests to stop. Its parts, one job each: the run folder
// (output.h: the lock, the checkpoint, the divergence guard, the best kept aside), the batches (batches.h: the
// corpus, the objective's batches, their sampler) and the telemetry (telemetry.h: metrics.csv, the progress line,
// their clocks); the state the methods share beyond them is named here.
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
  double guard_loss();  // the weights' loss on the divergence guard's fixed validation batch
  std::runtime_error diverged(int step, const std::string& what) const;
  void start_snapshots(bool resumed);  // OUT/snapshots/ made ready for this invocation (train/snapshots.h)
  void take_snapshot(int step);        // the weights alone, when --snapshot-every says so

  const TrainConfig& cfg_;
  const TrainPlan& plan_;     // the settings' named choices, parsed (plan.h): objective, optimizer, masks, split
  const Reducer& reducer_;
  // This process computes rows [rows_.begin, rows_.end) of every batch (all of them with one process). Every
  // process still draws the whole batch, so all see the same windows.
  const Rows rows_;
  Telemetry telemetry_;       // metrics.csv, the progress line and their clocks (this invocation's starts here)
  RunBatches batches_;        // the corpus, the training batches and their sampler, the fixed validation batch
  std::unique_ptr<RunFolder> folder_;  // --out, locked; the checkpoint, the guard, the best kept aside
  Checkpoint ckpt_;           // the model, its tokenizer and objective
  ResumeState state_;         // step, optimizer, batch sampler: what a checkpoint stores to continue exactly
  int first_step_ = 0;        // where this invocation began (state_.step moves on at every save)
  ThreadSplit split_ = ThreadSplit::Ops;  // how the threads share a step (replicas.h)
  std::unique_ptr<Replicas> replicas_;    // the model, and with batch-split its replicas, one per thread
  std::unique_ptr<Learner> learner_;      // what the loop's step trains: the replicas and the optimizer's state
  bool leaks_ = false;        // the mask lets a position see its answer (allowed by --allow-leak)
  TrainResult result_;
};

// The hooks' reducer, or one process when none is given.
const Reducer& reducer_of(const TrainHooks& hooks) { return hooks.reducer ? *hooks.reducer : one_process(); }

TrainingRun::TrainingRun(const TrainConfig& cfg, const TrainPlan& plan, Checkpoint* resume, const TrainHooks& hooks)
    : cfg_(cfg), plan_(plan), reducer_(reducer_of(hooks)), rows_(reducer_.rows(cfg.batch)),
      telemetry_(hooks.columns, reducer_.writes()) {
  start_model(resume);
  GPT& model = *ckpt_.model;
  const int B = cfg.batch, T = model.config.block_size;
  try {
    check_no_leak(plan_.objective, model.masks(), T);
  } catch (const std::runtime_error&) {
    if (!cfg.allow_leak) throw;
    leaks_ = true;
  }
  batches_.start(plan_.objective, cfg.mlm_rate, B, T, rows_);
  if (cfg.stop_at != -1 && (cfg.stop_at <= state_.step || cfg.stop_at > cfg.steps))
    throw std::runtime_error("--stop-at " + std::to_string(cfg.stop_at) + " must be after the current step (" +
                             std::to_string(state_.step) + ") and at most --steps (" + std::to_string(cfg.steps) + ")");
  check_corpus_fits(batches_.corpus, T);
  // The split first: batch-split's replicas (their gradients and activations) count in the estimate.
  const int threads = omp_get_max_threads();
  split_ = choose_split(plan_.threads_split, threads, rows_.count(), model.gated());
  check_fits_in_memory(model.config, model.mixers(), rows_.count(), split_ == ThreadSplit::Batch ? threads : 1);
  folder_ = std::make_unique<RunFolder>(cfg, resume != nullptr, reducer_.writes(), batches_.corpus.tokenizer.size(),
                                        state_.step, state_.batch_rng);
  state_.train_config = checkpoint_json(cfg);  // the model's settings are in the checkpoint's metadata
  batches_.set_sampler_state(state_.batch_rng);
  first_step_ = state_.step;
  reducer_.check_agreement(cfg, batches_.corpus, state_.step, state_.batch_rng, ckpt_.model->params_memory());
  replicas_ = std::make_unique<Replicas>(model, split_ == ThreadSplit::Batch ? threads : 1);
  learner_.reset(new Learner{*replicas_, plan_.optimizer->kind, state_.optimizer, reducer_});
  batches_.allocate();
  folder_->start(guard_loss());
  folder_->take_over_best_aside(model, [this] { return guard_loss(); });
  start_snapshots(resume != nullptr);
}

// OUT/snapshots/ (train/snapshots.h): an earlier run's removed, or a resumed run's after its step; then the weights
// this invocation starts from, when a snapshot is due at that step and not there yet.
void TrainingRun::start_snapshots(bool resumed) {
  if (!reducer_.writes()) return;
  const int removed = prepare_snapshots(cfg_.out, resumed, state_.step);
  if (removed > 0)
    std::printf("removed %d snapshot%s in %s/ that %s\n", removed, removed == 1 ? "" : "s",
                escape_for_message(snapshot_folder(cfg_.out)).c_str(),
                resumed ? "came after the step this run resumes from" : "belonged to the run this one replaces");
  if (snapshot_due(cfg_.snapshots, state_.step)) take_snapshot(state_.step);
}

void TrainingRun::take_snapshot(int step) {
  write_snapshot(cfg_.out, step, cfg_.snapshots, *ckpt_.model, batches_.corpus.tokenizer, plan_.objective);
}

void TrainingRun::start_model(Checkpoint* resume) {
  Corpus& corpus = batches_.corpus;
  if (resume) {
    ckpt_ = std::move(*resume);
    if (!ckpt_.resumable) throw std::runtime_error("the checkpoint holds weights only (no optimizer state)");
    corpus = load_corpus(cfg_.data, ckpt_.tokenizer);
    state_ = std::move(ckpt_.resume);
    return;
  }
  corpus = load_corpus(cfg_.data);
  if (plan_.objective == Objective::MLM) corpus.tokenizer.add_special(kMaskToken);
  ModelConfig model_config = cfg_.model;
  model_config.vocab_size = corpus.tokenizer.size();
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
  std::printf("data: %s: %zu training and %zu validation characters\n", escape_for_message(cfg_.data).c_str(),
              batches_.corpus.train.size(), batches_.corpus.val.size());
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
  const Corpus& corpus = batches_.corpus;
  BatchMaker& maker = batches_.maker();
  MetricsRow& row = telemetry_.row();
  Rng eval_rng(cfg_.seed + 1);
  row.train_loss = estimate_loss(*replicas_, maker, corpus.train, B, T, cfg_.eval_iters, eval_rng, reducer_);
  row.val_loss = estimate_loss(*replicas_, maker, corpus.val, B, T, cfg_.eval_iters, eval_rng, reducer_);
  // nanoGPT's estimator, when asked for: the validation loss over --eval-windows random windows, whole batches of
  // them (its own seed, so the other numbers are unchanged).
  if (cfg_.eval_windows > 0) {
    Rng windows_rng(cfg_.seed + 5);
    row.val_windows = estimate_loss(*replicas_, maker, corpus.val, B, T, (int)(((long)cfg_.eval_windows + B - 1) / B),
                                    windows_rng, reducer_);
  }
  row.honest_bits =
      next_char_score(*replicas_, corpus.val, cfg_.eval_iters * B, cfg_.seed + 2, batches_.mask_token(), reducer_).bits;
  const EvaluationColumns& columns = telemetry_.columns();
  if (reducer_.writes() && columns.measure) {  // only the process that writes metrics.csv measures them
    const BatchView fixed = batches_.fixed();
    if (batches_.fixed_prefix() >= 0) model.set_prefix_length(batches_.fixed_prefix());
    row.extra = columns.measure(model, fixed.x, fixed.y, fixed.B, fixed.T);
  }
  result_.val_loss = row.val_loss, result_.honest_bits = row.honest_bits;
  telemetry_.evaluated(step, step == cfg_.steps);
}

BatchView TrainingRun::batch(int) {
  telemetry_.step_started();
  return batches_.next(*replicas_);
}

bool TrainingRun::stepped(int step, const StepResult& r) {
  GPT& model = *ckpt_.model;
  if (!r.updated)
    throw diverged(step, "loss " + std::to_string(r.loss) + ", gradient norm " + std::to_string(r.grad_norm) +
                             "; the weights were not updated");
  // An absurd step can overflow the weights even from finite gradients.
  if (!all_finite(model.params_memory().data(), model.params_memory().size()))
    throw diverged(step, "the update made some weights infinite or NaN");
  folder_->observe(r.loss);
  const double muon_lr = plan_.optimizer->kind == OptimizerKind::Muon ? r.lr.muon : std::nan("");  // empty under AdamW
  telemetry_.stepped(step, step == first_step_, r, muon_lr);
  result_.step = step + 1;
  if (reducer_.writes() && snapshot_due(cfg_.snapshots, step + 1)) take_snapshot(step + 1);
  // Every kCheckEvery steps the processes compare their parameters (one process: nothing to compare).
  if ((step + 1) % kCheckEvery == 0) reducer_.check_same(model.params_memory(), step + 1);
  // A stop request reaches the processes at different moments: all stop when one has it.
  const bool stop = reducer_.any(stop_requested());
  if (!stop && step + 1 != cfg_.stop_at) return true;
  save(step + 1);
  telemetry_.stopped(stop, step + 1, folder_->checkpoint_file());
  const std::string& best_aside = folder_->best_aside();
  if (reducer_.writes() && !best_aside.empty())  // kept for the resume, which continues it (take_over_best_aside)
    std::printf("the best checkpoint (step %d) is kept in %s\n", folder_->best_step(),
                escape_for_message(best_aside).c_str());
  result_.interrupted = true;
  return false;
}

// The weights' loss on one fixed validation batch (its own seed: the training batches are unchanged).
double TrainingRun::guard_loss() {
  Rng guard_rng(cfg_.seed + 4);
  return estimate_loss(*replicas_, batches_.maker(), batches_.corpus.val, cfg_.batch, ckpt_.model->config.block_size,
                       1, guard_rng);
}

void TrainingRun::save(int step) {
  const double loss = guard_loss();
  const std::string refused = folder_->refuse(loss);
  if (!refused.empty()) throw diverged(step, refused);
  folder_->before_save(loss, step);  // the best goes aside first when these weights are worse
  state_.step = step;
  replicas_->set_prefix_length(0);  // a prefix-LM's N is redrawn per batch; store the neutral prefix:0
  state_.batch_rng = batches_.sampler_state();
  reducer_.check_same(ckpt_.model->params_memory(), step);  // what is saved is every process's model
  if (reducer_.writes()) {
    telemetry_.sync();  // the rows up to this step reach the disk no later than the checkpoint holding it
    folder_->write(*ckpt_.model, batches_.corpus.tokenizer, state_, plan_.objective);
  }
  folder_->saved(loss, step);
}

// A diverged step stops the run before anything is saved, naming the step and where the good weights are.
std::runtime_error TrainingRun::diverged(int step, const std::string& what) const {
  return std::runtime_error("training diverged at step " + std::to_string(step) + " (" + what + "); nothing was saved" +
                            folder_->last_good() + ". Try a lower " + plan_.optimizer->lr_flags +
                            " (or check --attn-scale).");
}

// ---- the run -----------------------------------------------------------------------------------------------------
TrainResult TrainingRun::run() {
  GPT& model = *ckpt_.model;
  const int B = cfg_.batch, T = model.config.block_size;
  // The training loss of MLM, prefix-LM or a leaking mask is not next-character loss; the honest next-character
  // number (left context only, the same for every kind of model) is printed beside it in those cases, and logged
  // to metrics.csv always, so that runs of any objective compare on one curve.
  const bool report_honest = plan_.objective != Objective::CLM || leaks_;
  const bool out = reducer_.writes();  // false on every process of a data-parallel run but one
  if (out) print_header();
  install_stop_handlers();
  telemetry_.open(cfg_, model.config.n_layer, B * T, first_step_, reducer_.processes() == 1, report_honest);
  batches_.draw_fixed(cfg_.seed + 3);
  result_.step = first_step_;
  const auto start = Clock::now();  // for the closing line: this invocation's own time

  if (!train_loop(*learner_, cfg_, first_step_, *this)) return result_;  // stopped early, saved
  folder_->finish();  // the run ended near its best: the copy aside is not needed, unless the last is much worse

  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string& best_aside = folder_->best_aside();
  if (out) std::printf("done: %d steps in %s; checkpoint %s%s\n", cfg_.steps, format_duration(seconds).c_str(),
                       escape_for_message(folder_->checkpoint_file()).c_str(),
                       best_aside.empty() ? "" : ("; the best (step " + std::to_string(folder_->best_step()) +
                                                  ") is kept in " + escape_for_message(best_aside)).c_str());
  return result_;
}

}  // namespace

TrainResult run_training(const TrainConfig& config, Checkpoint* resume, const TrainHooks& hooks) {
  const TrainPlan plan = plan_training(config);  // the settings checked, and their named choices parsed, once
  set_threads(config.threads > 0 ? config.threads : reducer_of(hooks).default_threads());  // cores ÷ processes here
  return TrainingRun(config, plan, resume, hooks).run();
}
