// What the lab and the tests ask of the GPT beyond training (model.h): head gates for the pruning lab, the weights
// each layer mixed with in the last forward, and a parameter tensor by its name. ./train's default run calls none
// of it; the forward and the backward are in model.cpp.
#include <stdexcept>
#include <string>

#include "model/mixer_lab.h"
#include "model/model.h"

float* GPT::parameter(const std::string& name) {
  for (const TensorSpec& t : table_)
    if (t.name == name) return params_memory_.data() + t.offset;
  throw std::runtime_error("the model has no tensor '" + name + "'");
}

// A layer whose mixer has no head gates (mixer.h: has_head_gates) ignores its ξ; they stay 1, and so that no caller
// believes it removed such a head, setting one to anything else is refused, naming the head and the kind.
static void check_gate(const GPT& model, size_t index, float value) {
  const int layer = (int)(index / model.config.n_head);
  const Mixer& mixer = model.mixer(layer);
  if (value == 1.0f || mixer.has_head_gates()) return;
  throw std::runtime_error("head L" + std::to_string(layer) + "H" + std::to_string(index % model.config.n_head) +
                           " cannot be gated or removed: layer " + std::to_string(layer) + "'s mixer (" +
                           mixer.kind() + ") has no head gates");
}

void GPT::enable_head_gates() {
  head_gates_.assign((size_t)config.n_layer * config.n_head, 1.0f);
  head_gate_grads_.assign(head_gates_.size(), 0.0f);
  capacity_B_ = capacity_T_ = B_ = T_ = 0;  // the next forward lays out the arena again, sized for the gates
}

void GPT::set_head_gates(const std::vector<float>& gates) {
  const size_t n = (size_t)config.n_layer * config.n_head;
  if (gates.size() != n)
    throw std::runtime_error("expected " + std::to_string(n) + " head gates (n_layer × n_head), got " +
                             std::to_string(gates.size()));
  for (size_t i = 0; i < n; i++) check_gate(*this, i, gates[i]);
  if (!gated()) enable_head_gates();
  head_gates_ = gates;
}

void GPT::set_head_gate(int index, float value) {
  if (!gated()) enable_head_gates();
  if (index < 0 || (size_t)index >= head_gates_.size())
    throw std::runtime_error("head gate " + std::to_string(index) + " does not exist (the model has " +
                             std::to_string(head_gates_.size()) + ")");
  check_gate(*this, index, value);
  head_gates_[index] = value;
}

const float* GPT::mixing_weights(int layer) const {
  if (B_ == 0) throw std::runtime_error("mixing_weights: no forward pass yet");
  const size_t per_layer = (size_t)B_ * config.n_head * T_ * T_;
  if (probs_memory_.size() < per_layer * config.n_layer) probs_memory_.resize(per_layer * config.n_layer);
  float* P = probs_memory_.data() + per_layer * layer;
  if (!probs_ready_[layer]) {
    mixers_[layer]->lab().implied_weights(P, mixer_pass(layer));
    probs_ready_[layer] = 1;
  }
  return P;
}

void GPT::set_mixer_hook(std::function<void(int layer, float* out, const MixerPass& pass)> hook) {
  mixer_hook_ = std::move(hook);
  B_ = 0;  // what the last forward left (its logits, weights and residuals) was computed without this hook
}
