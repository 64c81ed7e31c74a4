// The GPT: parameters, gradients and activations in flat arenas, a forward pass that computes the loss and a
// backward pass that accumulates every parameter's gradient, each written out op by op (no autograd).
//
// Shapes used in comments throughout src/:
//   B batch size, T sequence length (≤ block_size), C = n_embd, NH = n_head, HS = C/NH head size,
//   V vocabulary size, L = n_layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/span.h"
#include "model/config.h"
#include "model/mixer.h"
#include "model/params.h"
#include "ops/mask.h"

struct BlockBuffers;

// What the forward pass keeps for the backward pass, per block (all (B, T, ·) unless said).
struct LayerActivations {
  float* ln1_mean;                   // (B,T)                 LayerNorm 1's statistics (its output is recomputed)
  float* ln1_rstd;                   // (B,T)
  float* mixer;                      // what the layer's mixer keeps (Mixer::saved_floats)
  float* residual2;                  // (B,T,C)               x + mixer(ln1(x))
  float* ln2_mean;                   // (B,T)
  float* ln2_rstd;                   // (B,T)
  float* fc;                         // (B,T,4C)              before GELU (GELU's output is recomputed)
  float* residual3;                  // (B,T,C)               the block's output
};

struct Activations {
  float* encoded;  // (B,T,C) token + position embedding
  std::vector<LayerActivations> layers;
  float* lnf;       // (B,T,C)
  float* lnf_mean;  // (B,T)
  float* lnf_rstd;  // (B,T)
  float* logits;    // (B,T,V)
  float* probs;     // (B,T,V)
  float* losses;    // (B,T)
  // Outputs that are cheaper to recompute than to keep for every layer: one buffer each, for the layer at hand.
  // The forward writes them just before the next product reads them; the backward recomputes them from what the
  // layer keeps (LayerNorm from its input and statistics, GELU from fc), saving 2·(B,T,C) + (B,T,4C) per layer.
  float* ln;       // (B,T,C)   LayerNorm 1 or 2's output
  float* fc_gelu;     // (B,T,4C) gelu(fc)
  float* gelu_slope;  // (B,T,4C) d gelu/d fc, found beside it in the backward
  // Gradient scratch for the backward pass, reused by every layer.
  float* d_residual;  // (B,T,C) ∂loss/∂(residual stream), carried from the top block down to the embedding
  float* d_ln;      // (B,T,C)
  float* d_logits;  // (B,T,V)
  float* d_mlp;  // (B,T,4C) ∂loss/∂gelu(fc), then, in place, ∂loss/∂fc
  float* mixer_scratch;  // the largest Mixer::scratch_floats of the layers
};

class GPT {
 public:
  // masks: one per layer (empty = causal everywhere). Parameters start at zero; call init_weights or load them.
  // mixers: validated_mixers(config)'s, when the caller made them already (to check the file or the memory
  // before allocating: model/mixers/registry.h), so a model's mixers are made once; empty: made here.
  explicit GPT(const ModelConfig& config, std::vector<AttentionMask> masks = {},
               std::vector<std::unique_ptr<Mixer>> mixers = {});
  GPT(const GPT&) = delete;  // the views point into this object's arenas
  GPT& operator=(const GPT&) = delete;
  // A replica for batch-split threads (train/replicas.h): `source`'s configuration and masks, and its very
  // parameters (read through the same memory, never copied), with gradients and activations of its own; no head
  // gates. It must not outlive `source`.
  static std::unique_ptr<GPT> replica_of(GPT& source);

  void init_weights(uint64_t seed);

  // inputs, targets: (B, T) token ids; targets may be null (logits only) and may hold kNoTarget.
  // Returns the mean cross-entropy over positions with a target.
  float forward(const int* inputs, const int* targets, int B, int T);
  // Gradients of the last forward's mean loss, accumulated into grads (call zero_grad first).
  void backward();
  void zero_grad();  // every parameter gradient and every head gate gradient

  const float* logits() const { return acts_.logits; }  // (B, T, V) of the last forward
  // The weights with which each position mixed the others in the last forward, (B, NH, T, T), 0 where nothing
  // flows: what the layer's mixer implies (Mixer::implied_weights). Not kept by training: rebuilt on request.
  const float* mixing_weights(int layer) const;
  // Layer l's mixer (mixer.h), made once from config.mixer.
  const Mixer& mixer(int layer) const { return *mixers_[layer]; }
  const std::vector<std::unique_ptr<Mixer>>& mixers() const { return mixers_; }
  // The arguments of layer l's mixer calls in the last forward: its tensors, mask, gates, shape and what it saved
  // (for MixerLab::qkv, MixerLab::state_from_forward and the like).
  MixerPass mixer_pass(int layer) const;
  int last_B() const { return B_; }
  int last_T() const { return T_; }
  int last_targets() const { return loss_count_; }  // positions with a target in the last forward
  // The last forward's activations (read-only): the residual stream after the embedding (encoded) and after each
  // block (layers[l].residual3), and the final LayerNorm's statistics. The explorer's logit lens reads them.
  const Activations& activations() const { return acts_; }
  // The explorer's seam (explore/ablation.h, model_lab.cpp): called in forward() right after layer l's mixer wrote
  // out = x + mixer(u) (B·T rows of C), before anything reads it; it may change out (a head knocked out). Empty
  // (the default): nothing is called. The backward does not know of it: for analysis only, never training.
  void set_mixer_hook(std::function<void(int layer, float* out, const MixerPass& pass)> hook);

  const ModelConfig config;  // fixed for the model's life: every buffer is sized from it

  // ---- the parameters: one arena laid out as table() says, typed views into it, and a gradient arena alike.
  // The values may be changed through these (loading, the optimizer, experiments); the sizes cannot.
  const std::vector<TensorSpec>& table() const { return table_; }
  Span<float> params_memory() { return params_memory_; }
  // The parameter tensor of the table named `name` (the checkpoint's name, "h.0.attn.c_attn.bias"); throws naming
  // it when the model has none.
  float* parameter(const std::string& name);
  Span<const float> params_memory() const { return params_memory_; }
  Span<float> grads_memory() { return grads_memory_; }
  Span<const float> grads_memory() const { return grads_memory_; }
  const GPTParams& params() const { return params_; }
  const GPTParams& grads() const { return grads_; }
  size_t num_params() const { return params_memory_.size(); }

  // ---- the masks, one per layer; they may change between forwards (a prefix-LM draws N for every batch).
  const std::vector<AttentionMask>& masks() const { return masks_; }
  void set_masks(std::vector<AttentionMask> masks);  // throws unless there is one per layer
  void set_prefix_length(int N);                      // N of every prefix mask

  // ---- head gates ξ (L × NH, index layer·NH + head; head_gate.h): off (empty) until enabled. A layer whose mixer
  // has none (Mixer::has_head_gates) ignores its ξ, which stay 1: setting one to another value throws, naming it.
  void enable_head_gates();  // every ξ = 1, their gradients 0; backward() then accumulates ∂L/∂ξ
  void set_head_gates(const std::vector<float>& gates);  // turns them on; throws unless there are L × NH
  void set_head_gate(int index, float value);            // one ξ (gates on); throws on a bad index
  bool gated() const { return !head_gates_.empty(); }
  const std::vector<float>& head_gates() const { return head_gates_; }
  const std::vector<float>& head_gate_grads() const { return head_gate_grads_; }

 private:
  void reserve_activations(int B, int T);
  BlockBuffers buffers(int layer) const;                       // layer l's slices of the activation arena

  std::vector<AttentionMask> masks_;
  std::vector<TensorSpec> table_;
  struct ReplicaOf {
    GPT& source;
  };
  explicit GPT(ReplicaOf replica);
  void bind_arenas();  // params_ and grads_ from params_memory_ and grads_memory_

  std::vector<float> own_params_;  // the parameters; empty in a replica, which reads its source's
  Span<float> params_memory_{nullptr, 0};  // own_params_, or the source's: never resized, params_ points in
  std::vector<float> grads_memory_;  // never reassigned or resized: grads_ points in
  GPTParams params_;
  GPTParams grads_;
  std::vector<float> head_gates_;
  std::vector<float> head_gate_grads_;

  Activations acts_{};
  std::vector<float> acts_memory_;
  int capacity_B_ = 0;  // the activation arena is sized once for the largest (B, T) seen
  int capacity_T_ = 0;
  int B_ = 0;  // the last forward's shape
  int T_ = 0;
  std::vector<AttentionMask> last_masks_;  // and masks, which P depends on
  std::vector<std::unique_ptr<Mixer>> mixers_;  // one per layer: make_layer_mixers(config)
  std::function<void(int, float*, const MixerPass&)> mixer_hook_;  // set_mixer_hook's, usually empty
  mutable std::vector<float> probs_memory_;  // mixing_weights() rebuilds layer l into slice l on first request
  mutable std::vector<char> probs_ready_;    // per layer, since the last forward
  std::vector<int> inputs_;
  std::vector<int> targets_;
  int loss_count_ = 0;
  bool has_targets_ = false;
};

// Floats of activations and gradient scratch that a forward + backward with (B, T) uses (gated: head gates on).
size_t activation_floats(const ModelConfig& config, int B, int T, bool gated = false);
// Parameters, gradients, AdamW m and v, and activations for training with batch size B at full block_size; with
// `replicas` > 1 (--threads-split batch, train/replicas.h) also each other replica's gradient arena and the
// activations of its slice of ⌈B / replicas⌉ rows.
size_t estimate_training_bytes(const ModelConfig& config, int B, int replicas = 1);
// Throws, with the estimate in bytes, if training would need more than the machine's physical memory. `mixers`:
// the config's own (validated_mixers, or a model's mixers()), made once; without them they are made for the count.
void check_fits_in_memory(const ModelConfig& config, const std::vector<std::unique_ptr<Mixer>>& mixers, int B,
                          int replicas = 1);
void check_fits_in_memory(const ModelConfig& config, int B, int replicas = 1);
// The same for a forward alone over B sequences of T tokens (./inspect's --sequences, --batch), plus `extra_bytes`
// of the caller's own (its token batches); `what` names the flag in the message.
void check_forward_fits_in_memory(const ModelConfig& config, long B, int T, long double extra_bytes,
                                  const std::string& what);
