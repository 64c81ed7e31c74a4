// The run's settings parsed once. TrainConfig (train_config.h) keeps every setting as its table, its flag and the
// checkpoint spell it: the named choices as text ("mlm", "muon", "causal,window:16", "auto"). The plan holds those
// choices parsed, made once from the config when a run starts, and is what the code reads: the run
// (train/trainer.cpp), and the experiments and the benchmark, which build the step's Learner (train/loop.h) with
// the plan's optimizer.
#pragma once
#include <vector>

#include "data/objective.h"
#include "ops/mask.h"
#include "optim/optimizer.h"
#include "train/replicas.h"
#include "train/train_config.h"

struct TrainPlan {
  Objective objective = Objective::CLM;           // --objective: what the model is shown and asked (objective.h)
  const OptimizerRow* optimizer = nullptr;        // --optimizer: its kind, and its title and flags for messages
  std::vector<AttentionMask> masks;               // --mask or --layer-masks (else the objective's own), one per layer:
                                                  // a new model's (a resumed run keeps its checkpoint's)
  SplitChoice threads_split = SplitChoice::Auto;  // --threads-split: choose_split decides from it per run (replicas.h)
};

// validate(config) (train_config.h: the table's ranges and the checks across settings), then each named choice
// parsed, once. Throws naming the flag of the first choice that is none of its names ("--optimizer: unknown
// optimizer 'sgd' (expected adamw or muon)").
TrainPlan plan_training(const TrainConfig& config);
