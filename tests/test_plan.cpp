// The run's plan (train/plan.h): the settings' named choices (objective, optimizer, masks, thread split) parsed
// once, from the text TrainConfig keeps, a bad one refused naming its flag, and the code that trains reading the
// plan instead of parsing the text again.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
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

// The code of the programs and the library (src/, experiments/, bench/ and the programs at the top), as
// (path, line number, line) with each line's // comment cut off.
struct CodeLine {
  std::string path;
  int number;
  std::string text;
};
std::vector<CodeLine> code_lines() {
  namespace fs = std::filesystem;
  const fs::path root = progutil::source_root();
  std::vector<fs::path> files = {root / "train.cpp", root / "sample.cpp", root / "inspect.cpp"};
  for (const char* dir : {"src", "experiments", "bench"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      if (e.path().extension() == ".cpp" || e.path().extension() == ".h") files.push_back(e.path());
  std::vector<CodeLine> lines;
  for (const fs::path& f : files) {
    std::ifstream in(f);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      number++;
      lines.push_back({fs::relative(f, root).string(), number, line.substr(0, line.find("//"))});
    }
  }
  return lines;
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

// Parsed once: the parsers of the named choices are called by the plan alone (and by the checkpoint reader, on the
// objective and the masks a file's metadata holds); no Learner is given a literal optimizer beside a config that
// names one (the experiments and the benchmark take it from their config's plan); no code compares a choice's text.
TEST(TrainPlan, TheNamedChoicesAreParsedOnlyByThePlan) {
  const std::regex parser(R"(\b(parse_objective|find_optimizer|parse_split|parse_layer_masks)\s*\()");
  const std::regex literal_kind(R"(\bLearner\b.*OptimizerKind::)");
  const std::regex compared(R"(\.(objective|optimizer|threads_split|mask)\s*[!=]=\s*")");
  const std::set<std::string> may_parse = {
      "src/train/plan.cpp",      // the plan
      "src/io/checkpoint.cpp",   // a checkpoint's own objective and masks, from its metadata
      "src/data/objective.h",    // the parsers themselves
      "src/data/objective.cpp",
      "src/optim/optimizer.h",
      "src/optim/optimizer.cpp",
      "src/train/replicas.h",
      "src/train/replicas.cpp",
      "src/ops/mask.h",
      "src/ops/mask.cpp",
  };
  const std::vector<CodeLine> lines = code_lines();
  ASSERT_GT(lines.size(), 10000u) << "the scan should read the whole tree";
  int parses = 0;
  for (const CodeLine& l : lines) {
    const std::string where = l.path + ":" + std::to_string(l.number) + ": " + l.text;
    if (std::regex_search(l.text, parser)) {
      parses++;
      EXPECT_TRUE(may_parse.count(l.path)) << "a named choice parsed outside the plan (train/plan.h): " << where;
    }
    EXPECT_FALSE(std::regex_search(l.text, literal_kind)) << "a Learner given a literal optimizer: " << where;
    EXPECT_FALSE(std::regex_search(l.text, compared)) << "a named choice's text compared: " << where;
  }
  EXPECT_GE(parses, 4) << "the scan should find the plan's own calls";
}
