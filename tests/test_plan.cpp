// The run's plan (train/plan.h): the settings' named choices (objective, optimizer, masks, thread split) parsed
// once, from the text TrainConfig keeps, and a bad one refused naming its flag.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "program_util.h"
#include "train/plan.h"

namespace {

// The message plan_training throws for `config`, or "" when it makes a plan.
std::string refusal(const TrainConfig& config) {
  try {
    plan_training(config);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TrainPlan, ParsesEachNamedChoice) {
  // The defaults (the tiny preset): next-character loss, Muon, a causal mask on every layer, the split chosen per run.
  const TrainConfig tiny;
  const TrainPlan defaults = plan_training(tiny);
  EXPECT_EQ(defaults.objective, Objective::CLM);
  ASSERT_NE(defaults.optimizer, nullptr);
  EXPECT_EQ(defaults.optimizer->kind, OptimizerKind::Muon);
  EXPECT_EQ(defaults.masks, parse_layer_masks("causal", tiny.model.n_layer));
  EXPECT_EQ(defaults.threads_split, SplitChoice::Auto);
  // Each choice changed: no mask given takes the objective's own, on every layer.
  TrainConfig c;
  c.model.n_layer = 2;
  c.objective = "mlm";
  c.optimizer = "adamw";
  c.threads_split = "batch";
  const TrainPlan mlm = plan_training(c);
  EXPECT_EQ(mlm.objective, Objective::MLM);
  ASSERT_NE(mlm.optimizer, nullptr);
  EXPECT_EQ(mlm.optimizer->kind, OptimizerKind::AdamW);
  EXPECT_STREQ(mlm.optimizer->title, "AdamW");
  EXPECT_EQ(mlm.masks, (std::vector<AttentionMask>{AttentionMask::parse("bidirectional"),
                                                   AttentionMask::parse("bidirectional")}));
  EXPECT_EQ(mlm.threads_split, SplitChoice::Batch);
  // A mask per layer (--layer-masks), and the other objective and split.
  c.objective = "prefix-lm";
  c.mask = "causal,window:16";
  c.threads_split = "ops";
  const TrainPlan layers = plan_training(c);
  EXPECT_EQ(layers.objective, Objective::PrefixLM);
  EXPECT_EQ(layers.masks, (std::vector<AttentionMask>{AttentionMask::parse("causal"), AttentionMask::parse("window:16")}));
  EXPECT_EQ(layers.threads_split, SplitChoice::Ops);
}

// A name that is none of its choice's is refused, the flag that gave it leading the message; a setting out of its
// range is refused first, by validate(), in the table's words.
TEST(TrainPlan, RefusesAnUnknownNameNamingItsFlag) {
  struct Case {
    void (*set)(TrainConfig& c);
    std::string message;  // what the message starts with
  };
  const std::vector<Case> cases = {
      {[](TrainConfig& c) { c.optimizer = "sgd"; }, "--optimizer: unknown optimizer 'sgd' (expected adamw or muon)"},
      {[](TrainConfig& c) { c.objective = "gpt"; }, "--objective: unknown objective 'gpt' (expected clm, mlm or prefix-lm)"},
      {[](TrainConfig& c) { c.mask = "sideways"; }, "--mask or --layer-masks: unknown mask 'sideways'"},
      {[](TrainConfig& c) { c.mask = "causal,causal,causal"; },
       "--mask or --layer-masks: mask list 'causal,causal,causal' has 3 entries for 4 layers"},
      {[](TrainConfig& c) { c.threads_split = "rows"; }, "--threads-split: unknown value 'rows' (expected batch, ops or auto)"},
      {[](TrainConfig& c) {
         c.optimizer = "sgd";
         c.batch = 0;
       },
       "batch (--batch) must be positive (got 0)"},
  };
  for (const Case& k : cases) {
    TrainConfig c;
    k.set(c);
    const std::string message = refusal(c);
    EXPECT_EQ(message.rfind(k.message, 0), 0u) << "expected a message starting with: " << k.message << "\ngot: " << message;
  }
  EXPECT_EQ(refusal(TrainConfig{}), "");
}
