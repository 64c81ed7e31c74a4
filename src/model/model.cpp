#include "model/model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "base/arena.h"
#include "base/memory.h"
#include "base/rng.h"
#include "base/threads.h"
#include "model/block.h"
#include "model/mixer_lab.h"
#include "model/mixers/registry.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"

// Lays out every activation buffer in one arena (base/arena.h): with base == nullptr it only counts, so the
// memory estimate and the allocation can never disagree.
static size_t layout_activations(Activations& a, const ModelConfig& c, const std::vector<std::unique_ptr<Mixer>>& mixers,
                                 int B, int T, bool gated, float* base) {
  const size_t BT = (size_t)B * T;
  const size_t C = c.n_embd;
  const size_t V = c.vocab_size;
  const size_t mlp = c.no_mlp ? 0 : BT * 4 * C;  // the MLP's buffers (none without MLPs)
  ArenaCarver arena{base};
  auto take = [&](float*& slot, size_t n) {
    slot = arena.take(n);
  };
  a.layers.resize(c.n_layer);
  take(a.encoded, BT * C);
  size_t mixer_scratch = 0;
  for (int l = 0; l < c.n_layer; l++) {
    LayerActivations& la = a.layers[l];
    take(la.ln1_mean, BT);
    take(la.ln1_rstd, BT);
    take(la.mixer, mixers[l]->saved_floats(B, T, gated));
    take(la.residual2, BT * C);
    take(la.ln2_mean, BT);
    take(la.ln2_rstd, BT);
    take(la.fc, BT * 4 * C);
    take(la.residual3, BT * C);
    mixer_scratch = std::max(mixer_scratch, mixers[l]->scratch_floats(B, T, gated));
  }
  take(a.lnf, BT * C);
  take(a.lnf_mean, BT);
  take(a.lnf_rstd, BT);
  take(a.logits, BT * V);
  take(a.probs, BT * V);
  take(a.losses, BT);
  take(a.ln, BT * C);
  take(a.fc_gelu, mlp);
  take(a.gelu_slope, mlp);
  take(a.d_residual, BT * C);
  take(a.d_ln, BT * C);
  take(a.mixer_scratch, mixer_scratch);
  take(a.d_mlp, mlp);
  take(a.d_logits, BT * V);
  return arena.used;
}

size_t activation_floats(const ModelConfig& config, int B, int T, bool gated) {
  Activations scratch;
  return layout_activations(scratch, config, make_layer_mixers(config), B, T, gated, nullptr);
}

// Activations grow linearly with B, so the estimate is computed for B = 1 and scaled in long double: a batch
// size that would overflow 64 bits must be refused, not wrapped around to a small number. Both counts use the
// config's mixers. With the batch split, each of the R − 1 extra replicas has its own gradient arena and the
// activations of its slice.
static long double training_bytes(const ModelConfig& config, const std::vector<std::unique_ptr<Mixer>>& mixers,
                                  int B, int replicas) {
  Activations scratch;
  const long double params = total_floats(gpt_tensor_table(config, mixers));
  const long double per_sequence =
      layout_activations(scratch, config, mixers, 1, config.block_size, false, nullptr) + 2.0L * config.block_size;
  const long double R = replicas > 1 ? replicas : 1;
  const long double slice = std::ceil((long double)B / R);
  return sizeof(float) * (4 * params + (long double)B * per_sequence + (R - 1) * (params + slice * per_sequence));
}

size_t estimate_training_bytes(const ModelConfig& config, int B, int replicas) {
  const long double bytes = training_bytes(config, make_layer_mixers(config), B, replicas);
  return bytes >= (long double)SIZE_MAX ? SIZE_MAX : (size_t)bytes;
}

static std::string whole(long double bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0Lf", bytes);
  return text;
}

void check_fits_in_memory(const ModelConfig& config, int B, int replicas) {
  check_fits_in_memory(config, make_layer_mixers(config), B, replicas);
}

void check_fits_in_memory(const ModelConfig& config, const std::vector<std::unique_ptr<Mixer>>& mixers, int B,
                          int replicas) {
  const long double need = training_bytes(config, mixers, B, replicas);
  const MemoryLimit have = usable_memory();
  if (have.bytes > 0 && need > have.bytes)
    throw std::runtime_error("this model needs about " + whole(need) + " bytes to train with batch " +
                             std::to_string(B) +
                             (replicas > 1 ? " split between " + std::to_string(replicas) + " threads" : "") +
                             ", more than " + have.what + "; reduce --batch, --block, --n-embd or --n-layer" +
                             (replicas > 1 ? " (or --threads-split ops)" : ""));
}

void check_forward_fits_in_memory(const ModelConfig& config, long B, int T, long double extra_bytes,
                                  const std::string& what) {
  const long double params = total_floats(gpt_tensor_table(config));
  const long double need =
      sizeof(float) * (2 * params + (long double)B * activation_floats(config, 1, T)) + extra_bytes;
  const MemoryLimit have = usable_memory();
  if (have.bytes > 0 && need > have.bytes)
    throw std::runtime_error(what + ": " + std::to_string(B) + " sequences of " + std::to_string(T) +
                             " tokens in one forward need about " + whole(need) + " bytes, more than " + have.what);
}

GPT::GPT(const ModelConfig& cfg, std::vector<AttentionMask> layer_masks, std::vector<std::unique_ptr<Mixer>> mixers)
    : config(cfg), mixers_(mixers.empty() ? validated_mixers(cfg) : std::move(mixers)) {  // made once
  const std::vector<const MixerKind*> kinds = layer_kinds(cfg);  // the names alone: nothing is made
  bool theirs = mixers_.size() == kinds.size();
  for (size_t l = 0; theirs && l < kinds.size(); l++) theirs = std::string(mixers_[l]->kind()) == kinds[l]->name;
  if (!theirs) throw std::logic_error("GPT: the mixers given are not its config's (" + canonical_mixers(cfg) + ")");
  set_masks(layer_masks.empty() ? std::vector<AttentionMask>(config.n_layer) : std::move(layer_masks));
  table_ = gpt_tensor_table(config, mixers_);
  own_params_.assign(total_floats(table_), 0.0f);
  params_memory_ = own_params_;
  bind_arenas();
}

GPT::GPT(ReplicaOf r) : config(r.source.config), mixers_(make_layer_mixers(config)) {
  set_masks(r.source.masks_);
  table_ = r.source.table_;
  params_memory_ = r.source.params_memory_;
  bind_arenas();
}

std::unique_ptr<GPT> GPT::replica_of(GPT& source) { return std::unique_ptr<GPT>(new GPT(ReplicaOf{source})); }

void GPT::bind_arenas() {
  grads_memory_.assign(params_memory_.size(), 0.0f);
  params_ = bind_params(table_, params_memory_.data(), config.n_layer);
  grads_ = bind_params(table_, grads_memory_.data(), config.n_layer);
}

void GPT::set_masks(std::vector<AttentionMask> layer_masks) {
  if ((int)layer_masks.size() != config.n_layer)
    throw std::runtime_error("expected " + std::to_string(config.n_layer) + " layer masks, got " +
                             std::to_string(layer_masks.size()));
  for (int l = 0; l < config.n_layer; l++) {
    try {
      mixers_[l]->check_mask(layer_masks[l]);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("layer " + std::to_string(l) + ": " + e.what());
    }
  }
  masks_ = std::move(layer_masks);
}

void GPT::init_weights(uint64_t seed) {
  Rng rng(seed);
  init_params(table_, params_memory_.data(), config.n_layer, rng);
}

void GPT::zero_grad() {
  std::fill(grads_memory_.begin(), grads_memory_.end(), 0.0f);
  std::fill(head_gate_grads_.begin(), head_gate_grads_.end(), 0.0f);
}

void GPT::reserve_activations(int B, int T) {
  if (B <= capacity_B_ && T <= capacity_T_) {
    Activations fresh;  // same arena, re-carved for this (B, T) so every buffer is contiguous
    layout_activations(fresh, config, mixers_, B, T, gated(), acts_memory_.data());
    acts_ = fresh;
    return;
  }
  capacity_B_ = std::max(B, capacity_B_);
  capacity_T_ = std::max(T, capacity_T_);
  acts_memory_.assign(layout_activations(acts_, config, mixers_, capacity_B_, capacity_T_, gated(), nullptr), 0.0f);
  layout_activations(acts_, config, mixers_, B, T, gated(), acts_memory_.data());
  inputs_.resize((size_t)capacity_B_ * capacity_T_);
  targets_.resize(inputs_.size());
}

// Zeroes one of the step's big buffers, split between the threads like every other op.
static void zero(float* p, size_t n) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; i++) p[i] = 0.0f;
}

float GPT::forward(const int* inputs, const int* targets, int B, int T) {
  const int C = config.n_embd;
  const int V = config.vocab_size;
  if (B <= 0 || T <= 0 || T > config.block_size)
    throw std::runtime_error("forward: need B ≥ 1 and 1 ≤ T ≤ block_size (" + std::to_string(config.block_size) +
                             "), got B=" + std::to_string(B) + " T=" + std::to_string(T));
  for (size_t i = 0; i < (size_t)B * T; i++)
    if (inputs[i] < 0 || inputs[i] >= V || (targets && targets[i] != kNoTarget && (targets[i] < 0 || targets[i] >= V)))
      throw std::runtime_error("forward: token id out of range [0, " + std::to_string(V) + ") at position " +
                               std::to_string(i));
  if (B != B_ || T != T_) reserve_activations(B, T);
  B_ = B;
  T_ = T;
  last_masks_ = masks_;
  probs_ready_.assign(config.n_layer, 0);  // mixing_weights() rebuilds from this forward on request
  const int BT = B * T;
  std::copy(inputs, inputs + BT, inputs_.begin());
  has_targets_ = targets != nullptr;
  if (targets) std::copy(targets, targets + BT, targets_.begin());

  Activations& a = acts_;
  embedding_forward(a.encoded, inputs, params_.wte, params_.wpe, B, T, C);
  const float* residual = a.encoded;
  for (int l = 0; l < config.n_layer; l++) {
    const MixerPass mix = mixer_pass(l);
    block_forward<BatchedProducts>(buffers(l), residual, params_.h[l], config.no_mlp, BT, C,
                                   [&](const float* u, const float* x, float* out) {
                                     mixers_[l]->forward(out, u, x, mix);
                                     if (mixer_hook_) mixer_hook_(l, out, mix);
                                   });
    residual = a.layers[l].residual3;
  }
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual, params_.ln_f_w, params_.ln_f_b, BT, C);
  lm_head_forward(a.logits, a.lnf, params_.wte, BT, C, V);
  if (!targets) return 0.0f;
  LossSum loss = cross_entropy_forward(a.probs, a.losses, a.logits, targets, BT, V);
  loss_count_ = loss.count;
  return (float)loss.mean();
}

void GPT::backward() {
  if (!has_targets_) throw std::runtime_error("backward: the last forward had no targets");
  const int B = B_;
  const int T = T_;
  const int BT = B * T;
  const int C = config.n_embd;
  const int V = config.vocab_size;
  Activations& a = acts_;
  const size_t BTC = (size_t)BT * C;

  // The gradient convention (src/ops/README.md): each op's backward writes the gradient of its input into a scratch
  // buffer, except LayerNorm's, which adds into d_residual: the residual stream's gradient sums over the branches
  // that read the stream. It starts at zero.
  // loss → logits → final LayerNorm
  cross_entropy_backward(a.d_logits, a.probs, targets_.data(), loss_count_, BT, V);
  lm_head_backward(a.d_ln, grads_.wte, a.d_logits, a.lnf, params_.wte, BT, C, V);
  const float* top = config.n_layer ? a.layers.back().residual3 : a.encoded;
  zero(a.d_residual, BTC);
  layernorm_backward(a.d_residual, grads_.ln_f_w, grads_.ln_f_b, a.d_ln, top, params_.ln_f_w, a.lnf_mean, a.lnf_rstd,
                     BT, C);

  // d_residual holds ∂loss/∂(block output); each block's backward turns it into ∂loss/∂(block input).
  for (int l = config.n_layer - 1; l >= 0; l--) {
    const MixerPass mix = mixer_pass(l);
    float* dgates = head_gates_.empty() ? nullptr : &head_gate_grads_[(size_t)l * config.n_head];
    block_backward(a.d_residual, grads_.h[l], buffers(l), l == 0 ? a.encoded : a.layers[l - 1].residual3,
                   params_.h[l], config.no_mlp, BT, C, a.d_ln, a.d_mlp,
                   [&](const float* dout, const float* u, float* du) {
                     mixers_[l]->backward(du, grads_.h[l].mixer, dgates, dout, u, mix);
                   });
  }
  embedding_backward(grads_.wte, grads_.wpe, a.d_residual, inputs_.data(), B, T, C);
}

BlockBuffers GPT::buffers(int l) const {
  const LayerActivations& la = acts_.layers[l];
  BlockBuffers b;
  b.ln = acts_.ln;
  b.ln1_mean = la.ln1_mean;
  b.ln1_rstd = la.ln1_rstd;
  b.mixer = la.mixer;
  b.residual2 = la.residual2;
  b.ln2_mean = la.ln2_mean;
  b.ln2_rstd = la.ln2_rstd;
  b.fc = la.fc;
  b.fc_gelu = acts_.fc_gelu;
  b.gelu_slope = acts_.gelu_slope;
  b.residual3 = la.residual3;
  return b;
}

MixerPass GPT::mixer_pass(int l) const {
  const float* gates = head_gates_.empty() ? nullptr : &head_gates_[(size_t)l * config.n_head];
  return {params_.h[l].mixer, last_masks_[l], gates, B_, T_, acts_.layers[l].mixer, acts_.mixer_scratch};
}

void GPT::set_prefix_length(int N) {
  for (AttentionMask& m : masks_)
    if (m.kind == AttentionMask::Prefix) m.size = N;
}
