// What a run reports while it trains: the progress line (progress.h), metrics.csv (metrics_file.h: one row per
// step, the losses filled in at evaluations, the extra columns of TrainHooks), and the clocks they read. The process
// that writes for the run (reducer.h) prints and writes; the others keep the row and the clocks alone.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "train/loop.h"
#include "train/metrics_file.h"
#include "train/progress.h"
#include "train/train_config.h"
#include "train/trainer.h"

class Telemetry {
 public:
  // Starts the run's clock: loading the corpus and the model count too.
  Telemetry(const EvaluationColumns& columns, bool writes);

  // Before the first step: the progress line, and metrics.csv, afresh or kept up to `first_step` when resuming
  // (--overwrite starts it afresh, also for a run resumed into another run's folder, train.cpp). `report_honest`:
  // print the honest next-character loss beside the training loss.
  void open(const TrainConfig& config, int n_layer, int tokens_per_step, int first_step, bool one_process,
            bool report_honest);
  const EvaluationColumns& columns() const { return columns_; }
  MetricsRow& row() { return row_; }  // the current step's row of metrics.csv, which an evaluation fills in
  double seconds() const;  // since the run started (a resumed run continues its metrics.csv's clock)

  // An evaluation before step `step` filled in the row: its line; the run's last (`last`) writes the row too, as no
  // step follows it.
  void evaluated(int step, bool last);
  void step_started();  // the step's clock starts, as its batch is drawn
  // Step `step` ended (`first`: this invocation's first): its row (muon_lr NaN under AdamW) and its progress line.
  void stepped(int step, bool first, const StepResult& result, double muon_lr);
  void stopped(bool interrupted, int step, const std::string& checkpoint_file);  // "interrupted: saved step …"
  void sync();  // the rows so far reach the disk (before a checkpoint that holds their step)

 private:
  using Clock = std::chrono::steady_clock;
  MetricsRow empty_row(int step) const;  // a metrics.csv row for `step` with every cell empty

  const EvaluationColumns columns_;
  const bool writes_;
  bool report_honest_ = false;
  std::string no_extra_cells_;  // the extra columns of a row without an evaluation
  MetricsRow row_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<MetricsFile> metrics_;
  Clock::time_point started_ = Clock::now();  // this invocation's
  Clock::time_point step_started_;            // the current step's
  double earlier_seconds_ = 0;                // the resumed run's wall_s before this invocation
};
