#include "train/output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "base/read_file.h"
#include "data/utf8.h"
#include "io/checkpoint.h"
#include "train/stop_signal.h"

void prepare_output_dir(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("--out " + dir + ": cannot create " + prefix + ": " + std::strerror(errno));
    if (slash == std::string::npos) break;
  }
  struct stat st;
  const std::string dangling = dangling_link(dir);
  if (!dangling.empty()) throw std::runtime_error("--out " + dir + ": " + dangling);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("--out " + dir + ": not a directory");
  // The files the run will replace must be regular files, checked without following a link (lstat): a link
  // planted at OUT/ckpt.safetensors is refused now, not at the first save after all the training.
  for (const std::string& file : {checkpoint_path(dir), dir + "/metrics.csv", dir + "/best.safetensors"})
    if (lstat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw std::runtime_error("--out " + dir + ": " + file + " exists and is " + file_kind(st.st_mode) +
                               ", not a regular file, so the run could not write it; it is left alone (remove it, "
                               "or choose another --out)");
  // The probe is a name no one can have planted: mkstemp creates it exclusively (O_EXCL, never through a link)
  // under a random name, so a link or a FIFO at a predictable name is never opened.
  std::string probe = dir + "/.write-test-XXXXXX";
  const int fd = mkstemp(&probe[0]);
  if (fd < 0) throw std::runtime_error("--out " + dir + ": not writable: " + std::strerror(errno));
  close(fd);
  unlink(probe.c_str());
}

static std::string best_path(const std::string& out) { return out + "/best.safetensors"; }

RunFolder::RunFolder(const TrainConfig& cfg, bool resumed, bool writes, int vocab_size, int start_step,
                     const std::string& start_rng)
    : out_(cfg.out), overwrite_(cfg.overwrite), resumed_(resumed), writes_(writes),
      ckpt_file_(checkpoint_path(cfg.out)), start_step_(start_step), start_rng_(start_rng), guard_(vocab_size) {
  if (!writes_) return;  // one process of a data-parallel run touches the folder
  prepare_output_dir(out_);
  lock_ = std::make_unique<RunFolderLock>(out_);  // one run per folder (run_folder.h), held for the whole run
  if (!resumed_)
    refuse_to_replace_run(out_, {ckpt_file_, out_ + "/metrics.csv", best_path(out_)}, overwrite_);
  for (const std::string& stale :
       remove_stale_temporaries(out_, {"ckpt.safetensors", "metrics.csv", "best.safetensors"}))
    std::printf("removed %s, left by a run that was killed while writing it\n", escape_for_message(stale).c_str());
}

// OUT/best.safetensors belongs to the run in OUT. A fresh run, or one that replaces the folder's run (--overwrite),
// removes it: an older run's best must never pass for this one's. A resumed run continues it: an earlier
// invocation kept it aside (and stopped, was stopped or was refused) because its checkpoint had become worse. The
// guard measures its weights on the same fixed batch, so that only better weights replace it and the resumed
// checkpoint is never put aside over it. One that holds a later step than the resumed checkpoint belongs to the
// future this resume replaces, and is removed; one of another model is not this run's, and is refused.
void RunFolder::take_over_best_aside(GPT& model, const std::function<double()>& loss_now) {
  if (!writes_) return;
  const std::string best = best_path(out_);
  struct stat st;
  if (::lstat(best.c_str(), &st) != 0) return;  // (anything but a regular file was refused up front)
  auto remove_it = [&](const std::string& why) {
    if (std::remove(best.c_str()) != 0)
      throw std::runtime_error("--out " + out_ + ": cannot remove " + best + ": " + std::strerror(errno));
    std::printf("removed %s: %s\n", escape_for_message(best).c_str(), why.c_str());
  };
  if (!resumed_ || overwrite_) return remove_it("it was the best checkpoint of the run this one replaces");
  Checkpoint kept;
  try {
    kept = load_checkpoint(best);
  } catch (const std::exception& e) {
    throw std::runtime_error("--out " + out_ + ": " + best + " cannot be this run's best checkpoint (" +
                             escape_for_message(e.what()) + "); remove it or move it elsewhere");
  }
  Span<float> params = model.params_memory();
  if (!kept.resumable || kept.model->num_params() != params.size() ||
      describe(kept.model->config) != describe(model.config))
    throw std::runtime_error("--out " + out_ + ": " + best + " is not a checkpoint of this run's model (" +
                             describe(kept.model->config) + "); remove it or move it elsewhere");
  const int step = kept.resume.step;
  if (step > start_step_)
    return remove_it("it holds step " + std::to_string(step) + ", after the step " + std::to_string(start_step_) +
                     " this run resumes from");
  // Its loss on the guard's batch, measured with its weights in the model's memory (the replicas share it).
  const std::vector<float> own(params.begin(), params.end());
  const Span<const float> its = kept.model->params_memory();
  std::copy(its.begin(), its.end(), params.begin());
  const double loss = loss_now();
  std::copy(own.begin(), own.end(), params.begin());
  const double start = guard_.best_saved();
  if (!guard_.saved(loss, step)) return remove_it("the checkpoint resumed from is as good");
  best_aside_ = best;
  degraded_ = guard_.much_worse(start);
}

void RunFolder::before_save(double loss, int step) {
  // Worse than the best, which the file to be replaced holds: the best goes aside first (divergence_guard.h).
  const bool best = loss < guard_.best_saved();
  if (writes_ && !best && best_aside_.empty() &&
      (ckpt_is_best_ || (!saved_any_ && guard_.best_saved_step() == start_step_ && resumed_ && holds_start())))
    best_aside_ = keep_best_aside(ckpt_file_);
  saved_any_ = true;
  saved_step_ = step;
}

void RunFolder::write(const GPT& model, const Tokenizer& tokenizer, const ResumeState& state, Objective objective) {
  save_checkpoint(ckpt_file_, model, tokenizer, &state, objective);
  remember_checkpoint(ckpt_file_, state.step);  // for the message of a second Ctrl-C (stop_signal.h)
}

void RunFolder::saved(double loss, int step) {
  ckpt_is_best_ = guard_.saved(loss, step);
  if (ckpt_is_best_) drop_best_aside();  // the checkpoint is the best again
  const bool noted = degraded_;
  degraded_ = !best_aside_.empty() && guard_.much_worse(loss);
  if (degraded_ && !noted) {
    std::printf("note: the weights of step %d have a validation loss of %.4g nats, much worse than the best %.4g "
                "(step %d; the limit is %.4g): the best checkpoint is kept in %s\n", step, loss, guard_.best_saved(),
                guard_.best_saved_step(), guard_.much_worse_limit(), escape_for_message(best_aside_).c_str());
  }
}

void RunFolder::finish() {
  if (!degraded_) drop_best_aside();
}

void RunFolder::drop_best_aside() {
  if (!best_aside_.empty()) std::remove(best_aside_.c_str());
  best_aside_.clear();
  degraded_ = false;
}

// Resuming with --out elsewhere means ckpt_file_ may not exist or may belong to another run: it is named only if it
// holds the step this invocation began at.
std::string RunFolder::last_good() const {
  const std::string best = best_aside_.empty() ? "" : "; " + best_aside_ + " holds the best checkpoint (step " +
                                                          std::to_string(guard_.best_saved_step()) + ")";
  if (saved_any_)
    return best + "; " + ckpt_file_ + " holds the " + (best.empty() ? "last good checkpoint" : "last one saved") +
           " (step " + std::to_string(saved_step_) + ")";
  if (!resumed_) return best;
  if (holds_start())
    return best + "; " + ckpt_file_ + " holds the " + (best.empty() ? "last good checkpoint" : "one resumed from") +
           " (step " + std::to_string(start_step_) + ")";
  return best + "; the checkpoint this run resumed from (step " + std::to_string(start_step_) + ") is unchanged";
}

bool RunFolder::holds_start() const {
  try {
    Checkpoint on_disk = load_checkpoint(ckpt_file_);
    return on_disk.resumable && on_disk.resume.step == start_step_ && on_disk.resume.batch_rng == start_rng_;
  } catch (...) {
    return false;
  }
}
