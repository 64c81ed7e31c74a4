// Batch-split threads (src/train/replicas.h): the same bits on every run for a given thread count, evaluation, and
// whole training runs batch- vs op-split. That the gradient and loss of a batch split between replicas are the
// whole batch's, for every mixer kind, is the conformance suite's (test_every_kind.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/threads.h"
#include "io/checkpoint.h"
#include "ops/cross_entropy.h"
#include "program_util.h"
#include "test_util.h"
#include "train/evaluate.h"
#include "train/loop.h"
#include "train/replicas.h"
#include "train/trainer.h"

namespace {

ModelConfig small_model(const std::string& attention) {
  ModelConfig c;
  c.n_layer = 1 + (int)std::count(attention.begin(), attention.end(), ',');
  c.n_head = 2, c.n_embd = 16, c.block_size = 9, c.vocab_size = 11;
  c.mixer = attention;
  return c;
}

// A given thread count gives the same bits every time: the slices are fixed and the combine adds in replica order.
TEST(Replicas, SameBitsEveryRun) {
  const ModelConfig config = small_model("softmax");
  const int B = 6, T = config.block_size;
  std::vector<int> x, y;
  testutil::uneven_batch(B, T, config.vocab_size, 9, x, y);
  set_threads(2);
  std::vector<float> first;
  for (int run = 0; run < 4; run++) {
    GPT model(config);
    model.init_weights(5);
    Replicas replicas(model, 2);
    forward_backward(replicas, x.data(), y.data(), B, T);
    if (run == 0) first = model.grads_memory().to_vector();
    else EXPECT_EQ(0, std::memcmp(first.data(), model.grads_memory().data(), first.size() * sizeof(float))) << run;
  }
  set_threads(1);
}

// Evaluation split between replicas gives the one model's loss.
TEST(Replicas, EvaluationMatchesOneModel) {
  const ModelConfig config = small_model("softmax");
  const int B = 5, T = config.block_size;
  std::vector<int> x, y;
  testutil::uneven_batch(B, T, config.vocab_size, 11, x, y);
  set_threads(1);
  GPT model(config);
  model.init_weights(4);
  const float one = model.forward(x.data(), y.data(), B, T);
  set_threads(2);
  Replicas replicas(model, 2);
  const LossSum split = replicas.forward(x.data(), y.data(), B, T);
  EXPECT_NEAR(split.mean(), one, 1e-6);
  EXPECT_EQ(split.count, model.last_targets() + replicas[1].last_targets());
  set_threads(1);
}

TEST(Replicas, ChoiceOfSplit) {
  // (setting, threads, sequences, gated)
  EXPECT_EQ(choose_split(SplitChoice::Auto, 2, 12, false), ThreadSplit::Batch);  // the tiny preset
  EXPECT_EQ(choose_split(SplitChoice::Auto, 2, 1, false), ThreadSplit::Ops);     // one sequence cannot be split in 2
  EXPECT_EQ(choose_split(SplitChoice::Auto, 2, 12, true), ThreadSplit::Ops);     // replicas have no head gates
  EXPECT_EQ(choose_split(SplitChoice::Auto, 1, 12, false), ThreadSplit::Ops);
  EXPECT_EQ(choose_split(SplitChoice::Auto, 2, 64, false), ThreadSplit::Batch);  // the small preset
  EXPECT_EQ(choose_split(SplitChoice::Auto, 3, 2, false), ThreadSplit::Ops);       // 3 threads, 2 sequences
  EXPECT_EQ(choose_split(SplitChoice::Ops, 2, 12, false), ThreadSplit::Ops);
  EXPECT_EQ(choose_split(SplitChoice::Batch, 2, 64, false), ThreadSplit::Batch);  // asked for: always, when it can
  EXPECT_THROW(choose_split(SplitChoice::Batch, 4, 3, false), std::runtime_error);
  // The boundary: exactly one sequence per thread is enough, for auto and when asked for.
  EXPECT_EQ(choose_split(SplitChoice::Auto, 4, 4, false), ThreadSplit::Batch);
  EXPECT_EQ(choose_split(SplitChoice::Batch, 4, 4, false), ThreadSplit::Batch);
  EXPECT_EQ(choose_split(SplitChoice::Auto, 2, 2, false), ThreadSplit::Batch);
  EXPECT_EQ(choose_split(SplitChoice::Auto, 4, 3, false), ThreadSplit::Ops);
  // The flag's text: each name, and any other text refused naming the flag.
  EXPECT_EQ(parse_split("auto"), SplitChoice::Auto);
  EXPECT_EQ(parse_split("ops"), SplitChoice::Ops);
  EXPECT_EQ(parse_split("batch"), SplitChoice::Batch);
  try {
    parse_split("rows");
    ADD_FAILURE() << "parsed --threads-split rows";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--threads-split: unknown value 'rows'"), std::string::npos) << e.what();
  }
}

// Whole runs: batch-split and op-split on two threads train the same model (equal within float summation order),
// and two batch-split runs are the same bits.
TEST(Replicas, TrainingBatchSplitMatchesOpSplit) {
  progutil::TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  progutil::write_file(corpus, progutil::generated_text(6000));
  auto config = [&](const std::string& out, const std::string& split) {
    TrainConfig c;
    c.data = corpus, c.out = dir / out;
    c.model.n_layer = 2, c.model.n_head = 2, c.model.n_embd = 16, c.model.block_size = 16;
    c.batch = 5, c.steps = 8, c.eval_every = 4, c.eval_iters = 2, c.ckpt_every = 0, c.log_every = 1000;
    c.threads = 2, c.threads_split = split;
    return c;
  };
  run_training(config("ops", "ops"));
  run_training(config("batch", "batch"));
  run_training(config("batch2", "batch"));
  auto losses = [&](const std::string& out) {
    std::vector<double> v;
    for (const auto& [step, cell] : progutil::csv_column(progutil::read_csv(dir / out + "/metrics.csv"), "batch_loss"))
      if (!cell.empty()) v.push_back(std::stod(cell));
    for (const auto& [step, cell] : progutil::csv_column(progutil::read_csv(dir / out + "/metrics.csv"), "val_loss"))
      if (!cell.empty()) v.push_back(std::stod(cell));
    return v;
  };
  const std::vector<double> ops = losses("ops"), split = losses("batch");
  ASSERT_EQ(ops.size(), 8u + 3u);
  ASSERT_EQ(split.size(), ops.size());
  for (size_t i = 0; i < ops.size(); i++) EXPECT_NEAR(split[i], ops[i], 2e-4 * std::fabs(ops[i])) << "loss " << i;
  const Checkpoint a = load_checkpoint(checkpoint_path(dir / "batch")), b = load_checkpoint(checkpoint_path(dir / "batch2"));
  EXPECT_EQ(0, std::memcmp(a.model->params_memory().data(), b.model->params_memory().data(),
                           a.model->num_params() * sizeof(float)))
      << "two batch-split runs on 2 threads differ";
  set_threads(1);
}

}  // namespace
