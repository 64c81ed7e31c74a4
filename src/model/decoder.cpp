#include "model/decoder.h"

#include <omp.h>

#include <algorithm>

#include "model/block.h"
#include "ops/embedding.h"

// The block's products for N ≤ 2 rows (block.h): matvec, or matvec2, which reads each weight once for both rows.
struct DecoderProducts {
  static void linear(float* out, const float* inp, const float* w, const float* b, int N, int IC, int OC,
                     const float* residual = nullptr) {
    if (N == 2)
      matvec2(out, out + OC, inp, inp + IC, w, b, IC, OC);
    else
      matvec(out, inp, w, b, IC, OC);
    if (residual)
      for (size_t o = 0; o < (size_t)N * OC; o++) out[o] += residual[o];
  }
};

Decoder::Decoder(GPT& model, int mask_token) : model_(model), mask_token_(mask_token) {
  const ModelConfig& c = model.config;
  use_cache_ = mask_token < 0 && std::none_of(model.masks().begin(), model.masks().end(), [&](const AttentionMask& m) {
                 return m.sees_future(c.block_size);
               });
  shadow_start_ = c.block_size - c.block_size / 2;
  const size_t C = c.n_embd;
  size_t total = 0;
  for (int l = 0; l < c.n_layer; l++) {
    state_at_.push_back(total);
    total += use_cache_ ? model.mixer(l).state_floats(model.masks()[l]) : 0;
    step_scratch_row_ = std::max(step_scratch_row_, model.mixer(l).step_scratch_floats());
  }
  state_.assign(total, 0.0f);
  shadow_.assign(total, 0.0f);
  step_scratch_.assign(2 * step_scratch_row_, 0.0f);
  x_.resize(2 * C), ln_.resize(2 * C), res2_.resize(2 * C), res3_.resize(2 * C);
  fc_.resize(2 * 4 * C), fc_gelu_.resize(2 * 4 * C), logits_.resize(c.vocab_size);
  const int threads = omp_get_max_threads();
  if (use_cache_ && threads > 1) team_ = std::make_unique<DecodeTeam>(threads);
}

void Decoder::reset() { context_.clear(); }

const float* Decoder::push(int token) {
  const int block = model_.config.block_size - (mask_token_ >= 0);  // an MLM model needs a slot for [MASK]
  if ((int)context_.size() == block) {
    // Slide: keep the newest half. Their positions change; the shadow has stepped exactly them at their new ones.
    context_.erase(context_.begin(), context_.end() - block / 2);
    if (use_cache_) state_.swap(shadow_);
  }
  context_.push_back(token);
  const DecodeTeam::Scope products(team_.get());  // every matvec of this token splits over the team, if any
  return use_cache_ ? step_cached(token, (int)context_.size() - 1) : step_full_recompute();
}

const float* Decoder::step_full_recompute() {
  input_ = context_;
  if (mask_token_ >= 0) input_.push_back(mask_token_);
  const int T = (int)input_.size(), V = model_.config.vocab_size;
  model_.forward(input_.data(), nullptr, 1, T);
  std::copy(model_.logits() + (size_t)(T - 1) * V, model_.logits() + (size_t)T * V, logits_.begin());
  return logits_.data();
}

// The forward pass of GPT::forward for one position (B = T = 1), and from position shadow_start_ on a second row:
// the same token at pos − shadow_start_, stepping the shadow's states. The same block_forward (block.h), with each
// row's mixer step and every product a matrix-vector product (for one or two rows, sgemm's repacking of the
// weights costs more than the math). Only row 0's logits are wanted, so the shadow stops at the last layer's mixer.
const float* Decoder::step_cached(int token, int pos) {
  const ModelConfig& c = model_.config;
  const int C = c.n_embd, NH = c.n_head;
  const GPTParams& p = model_.params();
  const int shadow_pos = pos - shadow_start_;
  const int N = shadow_pos >= 0 ? 2 : 1;
  // A one-token "sequence" per row whose position-0 row is wpe row `pos` (row 1: `shadow_pos`).
  const float* position = p.wpe ? p.wpe + (size_t)pos * C : nullptr;  // none: --positions none
  embedding_forward(x_.data(), &token, p.wte, position, 1, 1, C);
  if (N == 2) {
    const float* shadow_position = p.wpe ? p.wpe + (size_t)shadow_pos * C : nullptr;  // shadow_pos < 0 without a shadow
    embedding_forward(x_.data() + C, &token, p.wte, shadow_position, 1, 1, C);
  }
  for (int l = 0; l < c.n_layer; l++) {
    // x_ is the block's input and, after the block, its output (residual3 → x_ for the next layer).
    BlockBuffers buffers;  // LayerNorm 1's and 2's statistics share one place: the decoder has no backward
    buffers.ln = ln_.data();
    buffers.ln1_mean = mean_;
    buffers.ln1_rstd = rstd_;
    buffers.residual2 = res2_.data();
    buffers.ln2_mean = mean_;
    buffers.ln2_rstd = rstd_;
    buffers.fc = fc_.data();
    buffers.fc_gelu = fc_gelu_.data();
    buffers.residual3 = res3_.data();
    const float* gates = model_.gated() ? &model_.head_gates()[(size_t)l * NH] : nullptr;
    const Mixer& mixer = model_.mixer(l);
    const size_t at = state_at_[l];
    block_forward<DecoderProducts>(buffers, x_.data(), p.h[l], c.no_mlp, N, C,
                                   [&](const float* u, const float* x, float* out) {
                                     if (N == 1) {
                                       mixer.step(out, u, x, p.h[l].mixer, model_.masks()[l], gates,
                                                  state_.data() + at, pos, step_scratch_.data());
                                       return;
                                     }
                                     const Mixer::StepRow rows[2] = {
                                         {out, u, x, state_.data() + at, pos},
                                         {out + C, u + C, x + C, shadow_.data() + at, shadow_pos}};
                                     mixer.step2(rows, p.h[l].mixer, model_.masks()[l], gates, step_scratch_.data());
                                   },
                                   l == c.n_layer - 1 ? 1 : N);  // the shadow's last MLP would feed no state
    std::swap(x_, res3_);
  }
  layernorm_forward(ln_.data(), mean_, rstd_, x_.data(), p.ln_f_w, p.ln_f_b, 1, C);
  lm_head_matvec(logits_.data(), ln_.data(), p.wte, C, c.vocab_size);
  return logits_.data();
}
