#include "optim/optimizer.h"

const std::vector<OptimizerRow>& optimizers() {
  static const std::vector<OptimizerRow> rows = {
      {OptimizerKind::AdamW, "adamw", "AdamW", "--lr"},
      {OptimizerKind::Muon, "muon", "Muon", "--lr or --muon-lr"},
  };
  return rows;
}

const OptimizerRow* find_optimizer(const std::string& name) {
  for (const OptimizerRow& r : optimizers())
    if (name == r.name) return &r;
  return nullptr;
}

std::string optimizer_names() {
  std::string names;
  for (const OptimizerRow& r : optimizers()) names += std::string(names.empty() ? "" : " or ") + r.name;
  return names;
}
