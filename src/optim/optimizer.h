// The optimizers ./train can use, one row each, by the name --optimizer and the checkpoint's "optimizer" key spell.
// The step that uses them is train_step (train/loop.cpp).
#pragma once
#include <string>
#include <vector>

enum class OptimizerKind { AdamW, Muon };

struct OptimizerRow {
  OptimizerKind kind;
  const char* name;      // as --optimizer spells it
  const char* title;     // as the run's header prints it
  const char* lr_flags;  // the flags that set its learning rates, for the divergence message
};
const std::vector<OptimizerRow>& optimizers();
const OptimizerRow* find_optimizer(const std::string& name);  // null for a name no row has
std::string optimizer_names();                                  // "adamw or muon", for messages
