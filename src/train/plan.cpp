#include "train/plan.h"

#include <stdexcept>

#include "data/utf8.h"

// The parser's own message, with the flags that set the text in front of it.
static std::runtime_error naming(const std::string& flags, const std::runtime_error& e) {
  return std::runtime_error(flags + ": " + e.what());
}

TrainPlan plan_training(const TrainConfig& c) {
  validate(c);
  TrainPlan plan;
  try {
    plan.objective = parse_objective(c.objective);
  } catch (const std::runtime_error& e) {
    throw naming("--objective", e);
  }
  plan.optimizer = find_optimizer(c.optimizer);
  if (!plan.optimizer)
    throw std::runtime_error("--optimizer: unknown optimizer '" + escape_for_message(c.optimizer) + "' (expected " +
                             optimizer_names() + ")");
  const std::string masks = c.mask.empty() ? default_mask(plan.objective) : c.mask;
  try {
    plan.masks = parse_layer_masks(masks, c.model.n_layer);
  } catch (const std::runtime_error& e) {
    throw naming("--mask or --layer-masks", e);
  }
  plan.threads_split = parse_split(c.threads_split);  // its message names --threads-split
  return plan;
}
