// The optimizers ./train can use, one row each, by the name --optimizer and the checkpoint's "optimizer" key spell.
// Optimizer is what the training loop holds: it takes one step with the chosen rule, so the loop never asks which.
#pragma once
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/muon.h"

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

class Optimizer {
 public:
  explicit Optimizer(const std::string& name);  // throws on an unknown name (train/settings.cpp validates first)
  // One step at the schedule's AdamW learning rate `lr` (Muon scales its own from it: optim/muon.h). The state
  // (AdamW's m, v, t; Muon's momentum lives in m) is what a checkpoint stores.
  void step(GPT& model, AdamW& state, const AdamWConfig& adamw, const MuonConfig& muon, float lr);
  const OptimizerRow& row;

 private:
  Muon muon_;  // its scratch
};
