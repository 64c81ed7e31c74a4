#include "train/telemetry.h"

Telemetry::Telemetry(const EvaluationColumns& columns, bool writes) : columns_(columns), writes_(writes) {}

void Telemetry::open(const TrainConfig& cfg, int n_layer, int tokens_per_step, int first_step, bool one_process,
                     bool report_honest) {
  report_honest_ = report_honest;
  progress_ = std::make_unique<Progress>(cfg.steps, tokens_per_step, cfg.log_every, one_process);
  // The extra columns (TrainHooks), after step_ms, filled in at evaluations.
  if (writes_) {
    metrics_ = std::make_unique<MetricsFile>(cfg.out + "/metrics.csv", cfg.overwrite ? 0 : first_step,
                                             columns_.header ? columns_.header(n_layer) : "");
    earlier_seconds_ = metrics_->resumed_wall_s();
  }
  no_extra_cells_ = columns_.empty ? columns_.empty(n_layer) : "";
  row_ = empty_row(first_step);
}

double Telemetry::seconds() const {
  return earlier_seconds_ + std::chrono::duration<double>(Clock::now() - started_).count();
}

void Telemetry::evaluated(int step, bool last) {
  if (writes_) progress_->evaluation(step, row_.train_loss, row_.val_loss, report_honest_ ? row_.honest_bits : -1);
  if (!last) return;  // the last row has no step after its evaluation: it is written now
  row_.wall_s = seconds();
  if (metrics_) metrics_->row(row_);
}

void Telemetry::step_started() { step_started_ = Clock::now(); }

void Telemetry::stepped(int step, bool first, const StepResult& r, double muon_lr) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - step_started_).count();
  row_.batch_loss = r.loss;
  row_.lr = r.lr.adamw;
  row_.grad_norm = r.grad_norm;
  row_.step_ms = ms;
  row_.wall_s = seconds();
  row_.muon_lr = muon_lr;
  if (metrics_) metrics_->row(row_);
  row_ = empty_row(step + 1);
  if (writes_) progress_->step(step, first, r.loss, r.lr.adamw, muon_lr, ms);
}

void Telemetry::stopped(bool interrupted, int step, const std::string& checkpoint_file) {
  if (writes_) progress_->stopped(interrupted, step, checkpoint_file);
}

void Telemetry::sync() {
  if (metrics_) metrics_->sync();
}

MetricsRow Telemetry::empty_row(int step) const {
  MetricsRow row;
  row.step = step;
  row.extra = no_extra_cells_;
  return row;
}
