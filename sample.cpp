// ./sample — generates text from a checkpoint, or scores a text file with it.
//   ./sample --ckpt out/tiny/ckpt.safetensors --prompt "Once upon a time" -n 500
//   ./sample --ckpt out/tiny/ckpt.safetensors --score data/stories.txt
//   ./sample --ckpt out/bert --fill "The c_t sat on the m_t"      (a masked-LM checkpoint)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>

#include "base/program_flags.h"
#include "io/checkpoint.h"
#include "data/dataset.h"
#include "train/evaluate.h"
#include "generate/fill.h"
#include "generate/generate.h"
#include "lab/pruning.h"
#include "base/rng.h"
#include "generate/sampling.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "data/utf8.h"

// The sliding-window score for models that predict the next character (their usual evaluation), then the two
// equal-terms numbers that any checkpoint gets, GPT-style or BERT-style.
// A model whose predictions overflow (finite but huge weights give NaN or infinite logits) has no score: refuse,
// naming the checkpoint, as generation does, instead of printing "nan bits/char".
static void require_finite(double value, const std::string& ckpt_file) {
  if (!std::isfinite(value))
    throw std::runtime_error(ckpt_file + ": the model's predictions are not finite numbers (the loss is " +
                             std::to_string(value) + "): its weights are too large or broken");
}

static void score(Checkpoint& ckpt, const std::string& ckpt_file, const std::string& file) {
  GPT& model = *ckpt.model;
  std::vector<int> tokens = ckpt.tokenizer.encode(read_text_file(file), file);
  const int mask_token = ckpt.objective == Objective::MLM ? ckpt.tokenizer.special_id(kMaskToken) : -1;
  model.set_prefix_length(0);  // a prefix-LM scored left to right is a causal model
  const bool next_token_model = mask_token < 0 && std::none_of(model.masks().begin(), model.masks().end(),
                                    [&](const AttentionMask& m) { return m.sees_future(model.config.block_size); });
  if (tokens.size() < 2) throw std::runtime_error(file + ": need at least 2 characters to score");
  if (next_token_model) {
    TextScore s = score_text(model, tokens);
    require_finite(s.nats_per_token, ckpt_file);
    std::printf("%s: %.4f nats/char, %.4f bits/char over %ld predicted characters\n", escape_for_message(file).c_str(), s.nats_per_token,
                s.bits_per_token, s.predictions);
  }
  const int T = model.config.block_size;
  const int windows = (int)std::min<long>(64, (long)tokens.size() / T - 1);
  if (windows < 1) return;  // too short for the equal-terms numbers, which need a full context
  CharScore next = next_char_score(model, tokens, 2048, 1, mask_token);
  CharScore masked = masked_char_score(model, tokens, windows, 0.15f, 1, mask_token);
  require_finite(next.bits, ckpt_file);
  require_finite(masked.bits, ckpt_file);
  std::printf("next-char, left context only: %.4f bits/char, accuracy %.1f%% (%ld positions)\n", next.bits,
              100 * next.accuracy, next.count);
  std::printf("masked-char, 15%% of positions, %s: %.4f bits/char, accuracy %.1f%% (%ld positions)\n",
              mask_token >= 0 ? "both sides visible" : "left side only", masked.bits, 100 * masked.accuracy,
              masked.count);
}

static void fill(Checkpoint& ckpt, const std::string& text, const std::string& blank) {
  const int mask_token = ckpt.tokenizer.special_id(kMaskToken);
  if (ckpt.objective != Objective::MLM || mask_token < 0)
    throw std::runtime_error("--fill needs a masked-LM checkpoint (trained with --objective mlm)");
  std::u32string blank_chars = utf8_decode(blank, "--blank");
  if (blank_chars.size() != 1) throw std::runtime_error("--blank must be exactly one character");
  std::u32string chars = utf8_decode(text, "--fill");
  std::vector<int> ids;
  for (size_t i = 0; i < chars.size(); i++) {
    const int id = chars[i] == blank_chars[0] ? mask_token : ckpt.tokenizer.id_of(chars[i]);
    if (id < 0)
      throw std::runtime_error("--fill: character " + describe_code_point(chars[i]) + " at position " +
                               std::to_string(i) + " is not in the model's vocabulary");
    ids.push_back(id);
  }
  std::vector<int> filled = fill_blanks(*ckpt.model, ids, mask_token, ckpt.tokenizer.num_chars());
  std::printf("%s\n", ckpt.tokenizer.decode(filled).c_str());
}

static void generate_samples(Checkpoint& ckpt, const std::string& ckpt_file, const std::string& prompt, int n,
                             const SamplingOptions& options, uint64_t seed, int num_samples) {
  const Tokenizer& tok = ckpt.tokenizer;
  std::vector<int> prompt_ids = tok.encode(utf8_decode(prompt, "--prompt"), "--prompt");
  if (prompt_ids.empty()) prompt_ids.push_back(tok.id_of(U'\n') >= 0 ? tok.id_of(U'\n') : 0);  // start somewhere
  const int mask_token = ckpt.objective == Objective::MLM ? tok.special_id(kMaskToken) : -1;
  Rng rng(seed);
  for (int s = 0; s < num_samples; s++) {
    if (s) std::printf("\n---------------\n");
    std::printf("%s", prompt.c_str());
    try {
      generate(*ckpt.model, prompt_ids, n, options, rng, mask_token, [&](int token) {
        std::fputs(tok.decode_one(token).c_str(), stdout);
        std::fflush(stdout);  // stream: each character appears as soon as it is chosen
      });
    } catch (const std::runtime_error& e) {  // e.g. NaN logits from finite but huge weights: name the file
      std::printf("\n");
      throw std::runtime_error(ckpt_file + ": " + e.what());
    }
    std::printf("\n");
  }
}

// ./sample's settings, one row each (base/settings.h); the sampling options are generate/sampling.h's table.
struct SampleConfig {
  std::string ckpt = "out/tiny";
  std::string prompt;
  int n = 500;
  uint64_t seed = 1;
  int num_samples = 1;
  std::string score, fill;  // "" = off
  std::string blank = "_";
  int threads = 0;
  std::string prune;        // "" = every head
};

#define FIELD(member) SETTING_FIELD(SampleConfig, member)
static const std::vector<Setting<SampleConfig>>& sample_settings() {
  using S = Scope;
  // clang-format off
  static const std::vector<Setting<SampleConfig>> table = {
    {nullptr, "ckpt",        "checkpoint file or output directory",                     FIELD(ckpt),        any_value(),  S::Invocation},
    {nullptr, "prompt",      "text to continue (every character must be in the model's vocabulary)",
                                                                                              FIELD(prompt),      any_value(),  S::Invocation},
    {nullptr, "n",           "characters to generate per sample",                       FIELD(n),           at_least(0),  S::Invocation},
    {nullptr, "seed",        "random seed",                                             FIELD(seed),        any_value(),  S::Invocation},
    {nullptr, "num-samples", "independent samples",                                     FIELD(num_samples), at_least(1),  S::Invocation},
    {nullptr, "score",       "print the model's mean next-character loss on this text file instead of sampling",
                                                                                              FIELD(score),       any_value(),  S::Invocation},
    {nullptr, "fill",        "masked-LM models: fill the blanks of this text, most confident first",
                                                                                              FIELD(fill),        any_value(),  S::Invocation},
    {nullptr, "blank",       "the blank character for --fill",                          FIELD(blank),       any_value(),  S::Invocation},
    {nullptr, "threads",     "threads (0 = all cores)",                                 FIELD(threads),     at_least(0),  S::Invocation},
    {nullptr, "prune",       "run without these heads: L0H1,L2H3 or a file of such names (see ./inspect prune)",
                                                                                              FIELD(prune),       any_value(),  S::Invocation},
  };
  // clang-format on
  return table;
}
#undef FIELD

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("sample", "Generate text from a plaingpt checkpoint, or score a text with it.");
  add_flags(options, sample_settings(), SampleConfig{});
  add_flags(options, sampling_settings(), SamplingOptions{});
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& flags = *parsed;
    SampleConfig config;
    SamplingOptions sampling;
    apply_flags(flags, sample_settings(), config);
    apply_flags(flags, sampling_settings(), sampling);
    check_ranges(sample_settings(), config);
    validate(sampling);
    set_threads(config.threads > 0 ? config.threads : default_threads());
    const std::string ckpt_file = resolve_checkpoint(config.ckpt);
    Checkpoint ckpt = load_checkpoint(ckpt_file);
    print_checkpoint_notes(ckpt);
    if (!config.prune.empty()) {  // head gates ξ = 0 remove those heads from every forward (head_gate.h)
      const ModelConfig& c = ckpt.model->config;
      ckpt.model->enable_head_gates();
      ckpt.model->set_head_gates(parse_prune_spec(config.prune, c.n_layer, c.n_head));
    }
    if (flags.count("score")) {
      score(ckpt, ckpt_file, config.score);
      return 0;
    }
    if (flags.count("fill")) {
      fill(ckpt, config.fill, config.blank);
      return 0;
    }
    generate_samples(ckpt, ckpt_file, config.prompt, config.n, sampling, config.seed, config.num_samples);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sample: error: %s\n", escape_for_message(e.what(), /*keep_newlines=*/true).c_str());
    return 1;
  }
}
