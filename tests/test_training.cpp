// Tests for src/train/trainer.* at the library level (one thread): exact resume (AdamW and Muon), seeding,
// checkpoints and metrics.csv, and the divergence guard.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "base/layer_list.h"
#include "io/checkpoint.h"
#include "mixer_kinds.h"
#include "model/mixers/registry.h"
#include "model/mixers/registry_probe.h"
#include "program_util.h"
#include "base/threads.h"
#include "base/rng.h"
#include "data/dataset.h"
#include "data/objective.h"
#include "train/evaluate.h"
#include "train/trainer.h"

using progutil::csv_column;
using progutil::read_csv;
using progutil::read_file;
using progutil::step_rows;
using progutil::TempDir;

namespace {

// A tiny run on a small generated corpus; `out` under the test's directory.
TrainConfig tiny_config(const TempDir& dir, const std::string& out, int steps) {
  const std::string corpus = dir / "corpus.txt";
  if (!progutil::file_exists(corpus)) progutil::write_file(corpus, progutil::generated_text(6000));
  TrainConfig c;
  c.data = corpus;
  c.out = dir / out;
  c.model.n_layer = 1, c.model.n_head = 2, c.model.n_embd = 16, c.model.block_size = 16;
  c.batch = 4;
  c.steps = steps;
  c.adamw.warmup_steps = 5;
  c.adamw.lr = 1e-2f;  // large enough that the weights move visibly in a few steps
  c.optimizer = "adamw";  // the tests' runs use AdamW unless they ask for Muon (./train's default)
  c.eval_every = 0;
  c.eval_iters = 1;
  c.ckpt_every = 0;
  c.log_every = 1000;
  c.threads = 1;
  c.seed = 1337;
  return c;
}

// The batch_loss cells of metrics.csv, indexed by step (rows without one are skipped).
std::vector<std::string> batch_losses(const std::string& out_dir) {
  std::vector<std::string> losses;
  for (const auto& [step, cell] : csv_column(read_csv(out_dir + "/metrics.csv"), "batch_loss")) {
    if (cell.empty()) continue;
    EXPECT_EQ(step, (int)losses.size()) << "steps out of order in " << out_dir;
    losses.push_back(cell);
  }
  return losses;
}

bool same_floats(Span<const float> a, Span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Stopped at step 10 and resumed, a run of `optimizer` gives every loss, weight and optimizer value of the run
// that went straight through. `attention`: the mixers, one layer per name.
void expect_resume_continues_exactly(const std::string& optimizer, const std::string& attention = "softmax") {
  set_threads(1);
  TempDir dir;
  const int N = 20;
  TrainConfig straight = tiny_config(dir, "straight", N);
  straight.optimizer = optimizer;
  straight.model.mixer = attention;
  straight.model.n_layer = 1 + (int)std::count(attention.begin(), attention.end(), ',');
  TrainResult r1 = run_training(straight);
  EXPECT_EQ(r1.step, N);
  EXPECT_FALSE(r1.interrupted);

  TrainConfig first_half = tiny_config(dir, "resumed", N);
  first_half.optimizer = optimizer;
  first_half.model = straight.model;
  first_half.stop_at = 10;
  TrainResult r2 = run_training(first_half);
  EXPECT_TRUE(r2.interrupted);
  EXPECT_EQ(r2.step, 10);
  const std::string resumed_file = checkpoint_path(first_half.out);
  Checkpoint ckpt = load_checkpoint(resumed_file);
  ASSERT_TRUE(ckpt.resumable);
  EXPECT_EQ(ckpt.resume.step, 10);
  EXPECT_EQ(ckpt.resume.optimizer.t, 10);
  EXPECT_EQ(step_rows(first_half.out + "/metrics.csv").size(), 10u);
  TrainConfig from_checkpoint = train_config_from_json(ckpt.resume.train_config, resumed_file, nullptr, &ckpt.model->config);
  EXPECT_EQ(from_checkpoint.steps, N);
  EXPECT_EQ(from_checkpoint.out, first_half.out);
  EXPECT_EQ(from_checkpoint.optimizer, optimizer);
  const std::vector<float> half_way_params = ckpt.model->params_memory().to_vector();
  TrainResult r3 = run_training(from_checkpoint, &ckpt);
  EXPECT_EQ(r3.step, N);

  const std::vector<std::string> a = batch_losses(straight.out), b = batch_losses(first_half.out);
  ASSERT_EQ(a.size(), (size_t)N);
  ASSERT_EQ(b.size(), (size_t)N);
  for (int s = 0; s < N; s++) EXPECT_EQ(a[s], b[s]) << "batch_loss at step " << s;
  // The loss moved: the comparison is not between two constant columns.
  EXPECT_NE(a.front(), a.back());

  Checkpoint end_a = load_checkpoint(checkpoint_path(straight.out));
  Checkpoint end_b = load_checkpoint(resumed_file);
  EXPECT_EQ(end_a.resume.step, N);
  EXPECT_EQ(end_b.resume.step, N);
  EXPECT_TRUE(same_floats(end_a.model->params_memory(), end_b.model->params_memory())) << "final weights differ";
  EXPECT_TRUE(same_floats(end_a.resume.optimizer.m, end_b.resume.optimizer.m));
  EXPECT_TRUE(same_floats(end_a.resume.optimizer.v, end_b.resume.optimizer.v));
  EXPECT_EQ(end_a.resume.batch_rng, end_b.resume.batch_rng);
  // And the second half did change the weights (so equal end states are not equal start states).
  EXPECT_FALSE(same_floats(end_b.model->params_memory(), half_way_params));
}

}  // namespace

TEST(Training, ResumeContinuesExactly) { expect_resume_continues_exactly("adamw"); }

// Muon's momentum lives in AdamW's m (optim/muon.h), so its checkpoint resumes as exactly.
TEST(Training, ResumeContinuesExactlyUnderMuon) { expect_resume_continues_exactly("muon"); }

// Every kind's tensors live in the weights and the optimizer's m and v like any other's: a run of each kind alone,
// and a hybrid under Muon (which takes the kind's linear maps), resume as exactly.
TEST(Training, ResumeContinuesExactlyWithEveryKind) {
  for (const std::string& kind : testutil::registered_kinds()) {
    SCOPED_TRACE(kind);
    expect_resume_continues_exactly("adamw", kind);
    expect_resume_continues_exactly("muon", "softmax," + kind);
  }
}

// The two optimizers are different runs: the same start, different weights after a few steps.
TEST(Training, MuonChangesTheRun) {
  set_threads(1);
  TempDir dir;
  TrainConfig adamw = tiny_config(dir, "adamw", 4), muon = tiny_config(dir, "muon", 4);
  muon.optimizer = "muon";
  run_training(adamw);
  run_training(muon);
  Checkpoint a = load_checkpoint(checkpoint_path(adamw.out)), m = load_checkpoint(checkpoint_path(muon.out));
  EXPECT_FALSE(same_floats(a.model->params_memory(), m.model->params_memory()));
  EXPECT_EQ(batch_losses(adamw.out).front(), batch_losses(muon.out).front()) << "the first batch is before any update";
}

TEST(Training, SeedDeterminesTheRun) {
  set_threads(1);
  TempDir dir;
  TrainConfig a = tiny_config(dir, "a", 8), b = tiny_config(dir, "b", 8), c = tiny_config(dir, "c", 8);
  c.seed = 4242;
  run_training(a);
  run_training(b);
  run_training(c);
  for (const char* column : {"train_loss", "val_loss", "batch_loss", "lr", "grad_norm"}) {
    SCOPED_TRACE(column);
    const auto ca = csv_column(read_csv(a.out + "/metrics.csv"), column);
    const auto cb = csv_column(read_csv(b.out + "/metrics.csv"), column);
    EXPECT_EQ(ca, cb);
  }
  const auto la = batch_losses(a.out), lc = batch_losses(c.out);
  ASSERT_EQ(la.size(), lc.size());
  int differing = 0;
  for (size_t i = 0; i < la.size(); i++) differing += la[i] != lc[i];
  EXPECT_GE(differing, (int)la.size() - 1) << "a different seed should give different batches and weights";
  EXPECT_TRUE(same_floats(load_checkpoint(checkpoint_path(a.out)).model->params_memory(),
                          load_checkpoint(checkpoint_path(b.out)).model->params_memory()));
  EXPECT_FALSE(same_floats(load_checkpoint(checkpoint_path(a.out)).model->params_memory(),
                           load_checkpoint(checkpoint_path(c.out)).model->params_memory()));
}

// wall_s: seconds since the run started, never decreasing, and a resumed run continues the clock of the rows it
// keeps; muon_lr: Muon's η, muon_lr · lr/--lr on every training row (empty with AdamW).
TEST(Training, MetricsHaveWallClockAndMuonRate) {
  set_threads(1);
  TempDir dir;
  TrainConfig c = tiny_config(dir, "clock", 10);
  c.optimizer = "muon";
  c.stop_at = 6;
  run_training(c);
  const double first_half_end = std::stod(csv_column(read_csv(c.out + "/metrics.csv"), "wall_s").back().second);
  Checkpoint ckpt = load_checkpoint(checkpoint_path(c.out));
  TrainConfig resumed = c;
  resumed.stop_at = -1;
  run_training(resumed, &ckpt);
  const auto wall = csv_column(read_csv(c.out + "/metrics.csv"), "wall_s");
  const auto lr = csv_column(read_csv(c.out + "/metrics.csv"), "lr");
  const auto muon = csv_column(read_csv(c.out + "/metrics.csv"), "muon_lr");
  ASSERT_EQ(wall.size(), 11u);
  double previous = 0;
  for (size_t i = 0; i < wall.size(); i++) {
    ASSERT_FALSE(wall[i].second.empty()) << "wall_s at step " << wall[i].first;
    const double t = std::stod(wall[i].second);
    EXPECT_GE(t, previous) << "the clock went back at step " << wall[i].first;
    previous = t;
    if (i < 10) {
      ASSERT_FALSE(muon[i].second.empty()) << "muon_lr at step " << i;
      EXPECT_NEAR(std::stod(muon[i].second), c.muon.lr * std::stod(lr[i].second) / c.adamw.lr, 2e-5 * c.muon.lr);  // 6 digits each
    }
  }
  EXPECT_GE(std::stod(wall[6].second), first_half_end) << "the resumed run restarted the clock";
  EXPECT_TRUE(muon.back().second.empty()) << "the final evaluation row has no step";

  TrainConfig adamw = tiny_config(dir, "adamw_clock", 3);
  run_training(adamw);
  for (const auto& [step, cell] : csv_column(read_csv(adamw.out + "/metrics.csv"), "muon_lr"))
    EXPECT_TRUE(cell.empty()) << "an AdamW run has no Muon rate (step " << step << ")";
}

// --eval-windows N: at each evaluation, the validation loss over N random windows (whole batches of them), in
// val_windows; the final row's value is that estimate for the saved weights. Without the flag the column is empty.
TEST(Training, EvalWindowsLogsNanoGPTsEstimator) {
  set_threads(1);
  TempDir dir;
  TrainConfig c = tiny_config(dir, "windows", 6);
  c.eval_every = 3;
  c.eval_windows = 10;  // batch 4: three batches, 12 windows
  run_training(c);
  const auto windows = csv_column(read_csv(c.out + "/metrics.csv"), "val_windows");
  ASSERT_EQ(windows.size(), 7u);
  for (const auto& [step, cell] : windows) EXPECT_EQ(cell.empty(), step % 3 != 0) << "step " << step;
  Checkpoint ckpt = load_checkpoint(checkpoint_path(c.out));
  const Corpus corpus = load_corpus(c.data, ckpt.tokenizer);
  BatchMaker batches(Objective::CLM);
  Rng rng(c.seed + 5);
  const double expected = estimate_loss(*ckpt.model, batches, corpus.val, c.batch, c.model.block_size, 3, rng);
  EXPECT_NEAR(std::stod(windows.back().second), expected, 1e-5 * expected);

  TrainConfig off = tiny_config(dir, "no_windows", 2);
  run_training(off);
  for (const auto& [step, cell] : csv_column(read_csv(off.out + "/metrics.csv"), "val_windows"))
    EXPECT_TRUE(cell.empty()) << "step " << step;
}

TEST(Training, MetricsAndFinalCheckpoint) {
  set_threads(1);
  TempDir dir;
  TrainConfig c = tiny_config(dir, "nested/out", 12);  // the output directory is created with its parents
  c.eval_every = 5;
  c.ckpt_every = 0;
  run_training(c);
  const auto rows = read_csv(c.out + "/metrics.csv");
  ASSERT_EQ(rows.size(), 1u + 12 + 1) << "header, one row per step, the final evaluation";
  const std::vector<std::string>& header = rows[0];
  EXPECT_EQ(header.at(0), "step");
  for (const char* name : {"train_loss", "val_loss", "batch_loss", "lr", "grad_norm", "step_ms"})
    EXPECT_NE(std::find(header.begin(), header.end(), name), header.end()) << "metrics.csv lacks " << name;
  auto cell = [&](int step, const std::string& name) {
    const size_t column = std::find(header.begin(), header.end(), name) - header.begin();
    return rows.at(1 + step).at(column);
  };
  for (int s = 0; s <= 12; s++) {
    ASSERT_EQ(rows[1 + s].size(), header.size()) << "row " << s;
    EXPECT_EQ(rows[1 + s][0], std::to_string(s));
    const bool evaluated = s % 5 == 0 || s == 12;
    EXPECT_EQ(!cell(s, "train_loss").empty(), evaluated) << "train_loss at step " << s;
    EXPECT_EQ(!cell(s, "val_loss").empty(), evaluated) << "val_loss at step " << s;
    EXPECT_EQ(cell(s, "batch_loss").empty(), s == 12) << "batch_loss at step " << s;  // the last row: evaluation
    EXPECT_EQ(cell(s, "lr").empty(), s == 12) << "lr at step " << s;
    if (s < 12) {
      // Each training row's numbers are sane: a loss near ln(vocabulary) for a barely trained model, a positive
      // learning rate that follows the warm-up (linear, 5 steps, to 1e-2) and a finite gradient norm.
      const double loss = std::stod(cell(s, "batch_loss"));
      EXPECT_GT(loss, 0.5);
      EXPECT_LT(loss, 6.0);
      const double lr = std::stod(cell(s, "lr"));
      if (s < 5) {
        EXPECT_NEAR(lr, 1e-2 * (s + 1) / 6, 1e-6) << "warm-up lr at step " << s;
      }
      EXPECT_GT(std::stod(cell(s, "grad_norm")), 0.0);
    }
  }
  Checkpoint ckpt = load_checkpoint(checkpoint_path(c.out));
  EXPECT_TRUE(ckpt.resumable);
  EXPECT_EQ(ckpt.resume.step, 12);
  EXPECT_EQ(ckpt.metadata.at("step"), "12");
  EXPECT_EQ(ckpt.resume.optimizer.t, 12);
  // No temporaries or probe files left in the output directory.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(c.out)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt.safetensors", "metrics.csv", "train.lock"}));
}

// Known issue (reported, not fixed here): save() in run_training sets state.step, which the loop also uses as
// "the first step of this invocation", so every periodic checkpoint triggers an extra evaluation on the next
// step (and resets the step-time average). With eval_every = 0 ("only at the start and the end") and
// ckpt_every = 4, train_loss/val_loss appear at steps 4 and 8 too. Enable once fixed.
TEST(Training, PeriodicCheckpointsDoNotAddEvaluations) {
  set_threads(1);
  TempDir dir;
  TrainConfig c = tiny_config(dir, "out", 12);
  c.eval_every = 0;
  c.ckpt_every = 4;
  run_training(c);
  const auto rows = read_csv(c.out + "/metrics.csv");
  ASSERT_EQ(rows.size(), 1u + 12 + 1);
  for (int s = 0; s <= 12; s++) {
    const bool evaluated = s == 0 || s == 12;
    EXPECT_EQ(!rows[1 + s].at(1).empty(), evaluated) << "train_loss at step " << s;  // column 1: train_loss
  }
}

namespace {

// Settings that make the tiny model diverge after some healthy steps: a learning rate of 1e9 reached through a
// linear warm-up of `warmup` steps, no clipping. (An lr of 1e6 is not enough for a NaN: the loss grows to ~1e12 but
// stays finite; then only the divergence guard of a save stops it.)
TrainConfig diverging_config(const TempDir& dir, const std::string& out, int ckpt_every, int warmup) {
  TrainConfig c = tiny_config(dir, out, 400);
  c.adamw.lr = 1e9f;
  c.adamw.min_lr = 0;
  c.adamw.warmup_steps = warmup;
  c.adamw.grad_clip = 0;
  c.adamw.weight_decay = 0;
  c.ckpt_every = ckpt_every;
  return c;
}

// Runs `c`, expecting the divergence error; returns the step it names (−1 if none).
int diverged_step(const TrainConfig& c) {
  try {
    run_training(c);
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("diverged"), std::string::npos) << message;
    const size_t at = message.find("at step ");
    EXPECT_NE(at, std::string::npos) << message;
    if (at == std::string::npos) return -1;
    return std::stoi(message.substr(at + 8));
  }
  ADD_FAILURE() << "training with lr " << c.adamw.lr << " did not diverge";
  return -1;
}

struct Divergence {
  int warmup = 0;
  int step = -1;  // the step the guard names
};

// The shortest warm-up (from a few) after which the run diverges at step ≥ 4, so that periodic checkpoints come
// before it; the exact step depends on float details, so it is measured rather than assumed. The probe runs
// write no periodic checkpoint, into `out`.
Divergence find_divergence(const TempDir& dir, const std::string& out) {
  Divergence found;
  for (int warmup : {9, 19, 39, 79}) {
    found.warmup = warmup;
    found.step = diverged_step(diverging_config(dir, out, 0, warmup));
    if (found.step >= 4 || found.step < 0) break;
  }
  return found;
}

}  // namespace

// A learning rate that climbs by 0.1 a step (a warm-up of a billion steps towards 1e8), with a checkpoint after every
// step: the first steps are healthy and saved, then the loss explodes and the divergence guard
// (train/divergence_guard.h) refuses the first save of exploded weights, or a step turns NaN first.
TrainConfig climbing_config(const TempDir& dir, const std::string& out) {
  TrainConfig c = diverging_config(dir, out, 1, 1000000000);
  c.adamw.lr = 1e8f;
  return c;
}

TEST(Training, DivergenceStopsAndKeepsTheLastGoodCheckpoint) {
  set_threads(1);
  TempDir dir;
  // 1. Diverge: the step named is the first save refused (or the NaN step), after a few good ones.
  TrainConfig run = climbing_config(dir, "run");
  const int d = diverged_step(run);
  ASSERT_GE(d, 3) << "needs a few good steps before the divergence for this test to mean anything";
  ASSERT_LT(d, run.steps);
  // metrics.csv holds exactly the steps that completed: 0 … d−1.
  const std::vector<int> rows = step_rows(run.out + "/metrics.csv");
  ASSERT_EQ(rows.size(), (size_t)d);
  EXPECT_EQ(rows.back(), d - 1);
  // The checkpoint on disk is the last one saved, of step d − 1 (a refused save) or d (a NaN step d), finite and
  // loadable, and its weights' loss is sane (the guard's promise).
  const std::string file = checkpoint_path(run.out);
  const std::string after_divergence = read_file(file);
  Checkpoint ckpt = load_checkpoint(file);  // also proves every weight is finite
  const int last_good = ckpt.resume.step;
  EXPECT_GE(last_good, d - 1);
  EXPECT_LE(last_good, d);

  // 2. The same run stopped cleanly at that step writes exactly the same file: the divergence did not touch it.
  //    (Same out directory, because the settings, and so the bytes, include it.)
  const std::string moved = dir / "diverged.safetensors";
  std::filesystem::rename(file, moved);
  TrainConfig clean = climbing_config(dir, "run");
  clean.stop_at = last_good;
  clean.overwrite = true;  // the folder holds the diverged run's metrics.csv (overwrite is not saved in the file)
  TrainResult stopped = run_training(clean);
  EXPECT_EQ(stopped.step, last_good);
  EXPECT_TRUE(read_file(file) == after_divergence) << "the checkpoint left after the divergence is not the clean "
                                                       "state at step "
                                                    << last_good;

  // 3. Resuming that checkpoint diverges again and leaves the file byte-identical. (The guard's history starts
  //    afresh in a resumed run, so the step it names may differ.)
  Checkpoint resume = load_checkpoint(file);
  TrainConfig resumed = train_config_from_json(resume.resume.train_config, file, nullptr, &resume.model->config);
  resumed.ckpt_every = 0;
  try {
    run_training(resumed, &resume);
    ADD_FAILURE() << "the resumed run did not diverge";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("diverged at step "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  EXPECT_TRUE(read_file(file) == after_divergence);
}

TEST(Training, ResumeReplacesRowsWrittenAfterTheLastCheckpoint) {
  // A run that died after its last checkpoint wrote metrics rows for steps that the checkpoint does not hold.
  // Resuming must drop those rows and write its own, so metrics.csv reads as one run: every step once.
  set_threads(1);
  TempDir dir;
  TrainConfig run = climbing_config(dir, "run");
  const int d = diverged_step(run);
  ASSERT_GE(d, 3);
  const std::string metrics = run.out + "/metrics.csv";
  ASSERT_EQ(step_rows(metrics).size(), (size_t)d);
  const auto old_losses = csv_column(read_csv(metrics), "batch_loss");

  Checkpoint ckpt = load_checkpoint(checkpoint_path(run.out));
  const int resumed_from = ckpt.resume.step;
  if (resumed_from == d) GTEST_SKIP() << "step " << d << " turned NaN right after a save: no row after the checkpoint";
  ASSERT_LT(resumed_from, d);  // the row of step d − 1 was written after the checkpoint of step d − 1
  // Continue with a sane learning rate (the library allows it; ./train would refuse the changed setting).
  TrainConfig calmer = train_config_from_json(ckpt.resume.train_config, checkpoint_path(run.out), nullptr, &ckpt.model->config);
  calmer.adamw.lr = 1e-3f;
  calmer.adamw.min_lr = 0;
  calmer.adamw.warmup_steps = 0;
  calmer.steps = d + 3;
  run_training(calmer, &ckpt);

  std::vector<int> expected;
  for (int s = 0; s < d + 3; s++) expected.push_back(s);
  EXPECT_EQ(step_rows(metrics), expected);
  // Rows before the checkpoint are the old run's, untouched.
  const auto new_losses = csv_column(read_csv(metrics), "batch_loss");
  for (int s = 0; s < resumed_from; s++) EXPECT_EQ(new_losses[s], old_losses[s]) << "step " << s;
}

TEST(Training, NoPeriodicCheckpointMeansNoneBeforeTheEnd) {
  set_threads(1);
  TempDir dir;
  const Divergence probe = find_divergence(dir, "run");
  EXPECT_GT(probe.step, 0);
  EXPECT_FALSE(progutil::file_exists(checkpoint_path(dir / "run")));
  EXPECT_EQ(step_rows(dir / "run/metrics.csv").size(), (size_t)probe.step);
}

TEST(Training, RejectsBadSettingsBeforeTouchingTheOutput) {
  set_threads(1);
  TempDir dir;
  TrainConfig good = tiny_config(dir, "out", 3);
  run_training(good);
  const std::string before = read_file(checkpoint_path(good.out));
  const std::string metrics_before = read_file(good.out + "/metrics.csv");
  auto expect_rejected = [&](TrainConfig c, const std::string& word) {
    SCOPED_TRACE(word);
    try {
      run_training(c);
      ADD_FAILURE() << "accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
    EXPECT_TRUE(read_file(checkpoint_path(good.out)) == before);
    EXPECT_EQ(read_file(good.out + "/metrics.csv"), metrics_before);
  };
  TrainConfig c = good;
  c.batch = 0;
  expect_rejected(c, "--batch");
  c = good, c.adamw.lr = -1;
  expect_rejected(c, "--lr");
  c = good, c.model.n_embd = 30, c.model.n_head = 4;
  expect_rejected(c, "divisible");
  c = good, c.mask = "sideways";
  expect_rejected(c, "sideways");
  c = good, c.model.block_size = 100000;
  expect_rejected(c, "block_size");
  c = good, c.data = dir / "missing.txt";
  expect_rejected(c, "missing.txt");
  // A weights-only checkpoint cannot be resumed.
  Checkpoint weights = load_checkpoint(checkpoint_path(good.out));
  weights.resumable = false;
  try {
    run_training(good, &weights);
    ADD_FAILURE() << "resumed from a weights-only checkpoint";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("weights only"), std::string::npos) << e.what();
  }
}

// Reducer::gradients runs once per step, after the gradients are complete and before the optimizer uses them: a
// reducer that zeroes them leaves every weight where it started (no weight decay, so AdamW's step is 0).
TEST(Training, ReducerSeesEveryStepsGradientBeforeTheUpdate) {
  set_threads(1);
  TempDir dir;
  TrainConfig c = tiny_config(dir, "hooked", 5);
  c.adamw.weight_decay = 0;
  struct Zeroing : Reducer {
    mutable int calls = 0;
    mutable double first_norm = 0;
    float gradients(GPT& model, float loss, int) const override {
      if (calls++ == 0) first_norm = global_norm(model.grads_memory());
      std::fill(model.grads_memory().begin(), model.grads_memory().end(), 0.0f);
      return loss;
    }
  } zeroing;
  TrainHooks hooks;
  hooks.reducer = &zeroing;
  run_training(c, nullptr, hooks);
  const int calls = zeroing.calls;
  const double first_norm = zeroing.first_norm;
  EXPECT_EQ(calls, 5);
  EXPECT_GT(first_norm, 0.0) << "the hook ran before the gradients were computed";
  GPT fresh(load_checkpoint(checkpoint_path(c.out)).model->config);
  fresh.init_weights(c.seed);
  EXPECT_TRUE(same_floats(load_checkpoint(checkpoint_path(c.out)).model->params_memory(), fresh.params_memory()))
      << "the weights moved although every gradient reaching the optimizer was zero";
}

// Each mixer is made once per layer per model (model/mixers/registry.h, mixers_made): a run with ./train's default
// model (4 layers, block 64, batch 12, Muon) on one thread makes 4 before its first step and none after, the same
// with every kind in it (a layer each, padded with softmax to 4, or more layers if there are more kinds); on two threads split by batch, the replica makes its own; loading the checkpoint makes
// 4, and resuming from it none more. Before, a run made each 4 times: validate, the memory estimate before the
// model, the GPT's constructor, the memory estimate with the split.
TEST(Training, EachMixerIsMadeOncePerLayerPerModel) {
  TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  progutil::write_file(corpus, progutil::generated_text(6000));
  TrainConfig c;  // ./train's defaults, for 2 steps
  c.data = corpus, c.steps = 2, c.eval_iters = 1, c.threads = 1;
  std::vector<std::string> one_each = testutil::registered_kinds();
  c.model.n_layer = std::max(c.model.n_layer, (int)one_each.size());
  const size_t L = c.model.n_layer;
  one_each.resize(L, "softmax");  // padded to the model's layers
  for (const std::string& mixer : {std::string("softmax"), join_layer_list(one_each)}) {
    SCOPED_TRACE(mixer);
    c.model.mixer = mixer;
    c.out = dir / ("run-" + std::to_string(mixer.size()));
    size_t before = mixers_made();
    run_training(c);
    EXPECT_EQ(mixers_made() - before, L);
    before = mixers_made();
    Checkpoint ckpt = load_checkpoint(checkpoint_path(c.out));
    EXPECT_EQ(mixers_made() - before, L);
    TrainConfig more = c;
    more.steps = 3;
    before = mixers_made();
    run_training(more, &ckpt);
    EXPECT_EQ(mixers_made() - before, 0u);
  }
  c.model.mixer = "softmax", c.out = dir / "split", c.threads = 2, c.threads_split = "batch";
  const size_t before = mixers_made();
  run_training(c);
  const size_t models = (size_t)omp_get_max_threads();  // the model and its replicas (fewer cores: fewer)
  EXPECT_EQ(mixers_made() - before, L * models);
}
