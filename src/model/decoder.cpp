#include "model/decoder.h"

#include <algorithm>

#include "model/block.h"
#include "ops/embedding.h"

Decoder::Decoder(GPT& model, int mask_token) : model_(model), mask_token_(mask_token) {
  const ModelConfig& c = model.config;
  use_cache_ = mask_token < 0 && std::none_of(model.masks().begin(), model.masks().end(), [&](const AttentionMask& m) {
                 return m.sees_future(c.block_size);
               });
  const size_t C = c.n_embd;
  size_t total = 0, scratch = 0;
  for (int l = 0; l < c.n_layer; l++) {
    state_at_.push_back(total);
    total += use_cache_ ? model.mixer(l).state_floats(model.masks()[l]) : 0;
    scratch = std::max(scratch, model.mixer(l).step_scratch_floats());
  }
  state_.assign(total, 0.0f);
  step_scratch_.assign(scratch, 0.0f);
  x_.resize(C), ln_.resize(C), res2_.resize(C), res3_.resize(C);
  fc_.resize(4 * C), fc_gelu_.resize(4 * C), logits_.resize(c.vocab_size);
  if (use_cache_) {
    const size_t rows = c.block_size;
    size_t saved = 0, mixer_scratch = 0;
    for (int l = 0; l < c.n_layer; l++) {
      saved = std::max(saved, model.mixer(l).saved_floats(1, c.block_size, model.gated()));
      mixer_scratch = std::max(mixer_scratch, model.mixer(l).scratch_floats(1, c.block_size, model.gated()));
    }
    for (auto* v : {&batch_x_, &batch_ln_, &batch_res2_, &batch_res3_}) v->resize(rows * C);
    batch_fc_.resize(rows * 4 * C), batch_fc_gelu_.resize(rows * 4 * C), batch_stats_.resize(4 * rows);
    batch_saved_.resize(saved), batch_scratch_.resize(mixer_scratch);
  }
}

void Decoder::reset() { context_.clear(); }

const float* Decoder::push(int token) {
  const int block = model_.config.block_size - (mask_token_ >= 0);  // an MLM model needs a slot for [MASK]
  if ((int)context_.size() == block) {
    // Slide: keep the newest half. Their positions change, so what the layers kept about them is stale.
    context_.erase(context_.begin(), context_.end() - block / 2);
    if (use_cache_) refill_cache();
  }
  context_.push_back(token);
  return use_cache_ ? step_cached(token, (int)context_.size() - 1) : step_full_recompute();
}

// Re-encodes the whole context in one batched forward (B = 1, T = its length) and lets each layer's mixer take its
// state from that forward's activations. Pushing the kept tokens one at a time would give the same state (up to
// float rounding) but through T one-row products instead of one T-row sgemm per layer: after every slide that was
// as many extra single-token steps as the tokens generated since, doubling the work of a long sample.
// The forward is GPT::forward's (embedding, then block_forward layer by layer) but stops as soon as the last
// layer's mixer has its state: the last MLP, the final LayerNorm and the LM head would compute logits for positions
// that already have their next token, about a sixth of the products (tiny model). It runs on the decoder's own
// buffers, one layer's mixer activations at a time, and leaves the model's last forward alone.
void Decoder::refill_cache() {
  const int T = (int)context_.size();
  if (T == 0) return;
  const ModelConfig& c = model_.config;
  const int C = c.n_embd, NH = c.n_head;
  const GPTParams& p = model_.params();
  float* x = batch_x_.data();
  float* out = batch_res3_.data();
  embedding_forward(x, context_.data(), p.wte, p.wpe, 1, T, C);
  float* stats = batch_stats_.data();  // the LayerNorms' means and reciprocal deviations (T each)
  for (int l = 0; l < c.n_layer; l++) {
    const float* gates = model_.gated() ? &model_.head_gates()[(size_t)l * NH] : nullptr;
    const MixerPass pass{p.h[l].mixer, model_.masks()[l], gates, 1, T, batch_saved_.data(), batch_scratch_.data()};
    const BlockBuffers buffers{batch_ln_.data(), stats,           stats + T,         pass.saved,
                               batch_res2_.data(), stats + 2 * T, stats + 3 * T,     batch_fc_.data(),
                               batch_fc_gelu_.data(), out};
    // The last layer without its MLP (as if attention-only): only its mixer's state is read.
    const bool skip_mlp = c.attn_only || l == c.n_layer - 1;
    block_forward<BatchedProducts>(buffers, x, p.h[l], skip_mlp, T, C,
                                   [&](const float* u, const float* in, float* o) {
                                     model_.mixer(l).forward(o, u, in, pass);
                                   });
    model_.mixer(l).state_from_forward(state_.data() + state_at_[l], pass, step_scratch_.data());
    std::swap(x, out);
  }
}

const float* Decoder::step_full_recompute() {
  input_ = context_;
  if (mask_token_ >= 0) input_.push_back(mask_token_);
  const int T = (int)input_.size(), V = model_.config.vocab_size;
  model_.forward(input_.data(), nullptr, 1, T);
  std::copy(model_.logits() + (size_t)(T - 1) * V, model_.logits() + (size_t)T * V, logits_.begin());
  return logits_.data();
}

// The forward pass of GPT::forward for one position (B = T = 1): the same block_forward (block.h), with each mixer's
// one-position step and every product a matrix-vector product (matvec): for one row, sgemm's repacking of the
// weights costs more than the math.
const float* Decoder::step_cached(int token, int pos) {
  const ModelConfig& c = model_.config;
  const int C = c.n_embd, NH = c.n_head;
  const GPTParams& p = model_.params();
  // A one-token "sequence" whose position-0 row is wpe row `pos`.
  embedding_forward(x_.data(), &token, p.wte, p.wpe + (size_t)pos * C, 1, 1, C);
  for (int l = 0; l < c.n_layer; l++) {
    // x_ is the block's input and, after the block, its output (residual3 → x_ for the next layer).
    const BlockBuffers buffers{ln_.data(), &mean_, &rstd_, nullptr,         res2_.data(),
                               &mean_,     &rstd_, fc_.data(), fc_gelu_.data(), res3_.data()};
    const float* gates = model_.gated() ? &model_.head_gates()[(size_t)l * NH] : nullptr;
    block_forward<OneRowProducts>(buffers, x_.data(), p.h[l], c.attn_only, 1, C,
                                  [&](const float* u, const float* x, float* out) {
                                    model_.mixer(l).step(out, u, x, p.h[l].mixer, model_.masks()[l], gates,
                                                         state_.data() + state_at_[l], pos, step_scratch_.data());
                                  });
    std::swap(x_, res3_);
  }
  layernorm_forward(ln_.data(), &mean_, &rstd_, x_.data(), p.ln_f_w, p.ln_f_b, 1, C);
  lm_head_matvec(logits_.data(), ln_.data(), p.wte, C, c.vocab_size);
  return logits_.data();
}
