// Writes the checkpoint fuzzer's seed corpus: real checkpoints from save_checkpoint, small enough (a few KB) for
// the fuzzer to mutate quickly, covering weights-only and resumable files, every objective, per-layer masks,
// special tokens and a Chinese vocabulary.   Usage: make_seeds <output directory>
#include <cstdio>
#include <exception>
#include <string>

#include "io/checkpoint.h"
#include "train/trainer.h"
#include "data/utf8.h"

static void write_seed(const std::string& dir, const std::string& name, const std::string& corpus_utf8,
                       int n_layer, int n_head, int n_embd, int block, const std::string& mask, Objective objective,
                       bool resumable) {
  Tokenizer tokenizer = Tokenizer::from_text(utf8_decode(corpus_utf8, name));
  if (objective == Objective::MLM) tokenizer.add_special(kMaskToken);
  ModelConfig config;
  config.n_layer = n_layer, config.n_head = n_head, config.n_embd = n_embd, config.block_size = block;
  config.vocab_size = tokenizer.size();
  GPT model(config, parse_layer_masks(mask, n_layer));
  model.init_weights(7);
  TrainConfig settings = preset("tiny");
  settings.model = config;
  settings.objective = to_string(objective);
  settings.mask = mask;
  ResumeState state;
  state.step = 3;
  state.batch_rng = "123456789";
  state.train_config = to_json(settings);
  state.optimizer.m.assign(model.num_params(), 0.25f);
  state.optimizer.v.assign(model.num_params(), 0.5f);
  state.optimizer.t = 3;
  save_checkpoint(dir + "/" + name + ".safetensors", model, tokenizer, resumable ? &state : nullptr, objective);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <output directory>\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    write_seed(dir, "clm_weights", "ab", 1, 1, 1, 1, "causal", Objective::CLM, false);
    write_seed(dir, "clm_resumable", "the cat.\n", 1, 1, 2, 3, "causal", Objective::CLM, true);
    write_seed(dir, "mlm_chinese", "猫坐在垫子上。", 1, 2, 2, 2, "bidirectional", Objective::MLM, false);
    write_seed(dir, "prefix_layers", "ab🙂", 2, 1, 1, 2, "prefix:0,window:2", Objective::PrefixLM, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
