#include "model/mixers/registry.h"

#include <stdexcept>

#include "base/layer_list.h"

// Each kind's factory lives in its own file.
std::unique_ptr<Mixer> make_softmax_attention(const ModelConfig& config);
std::unique_ptr<Mixer> make_linear_attention(const ModelConfig& config);
std::unique_ptr<Mixer> make_mamba(const ModelConfig& config);

const std::vector<MixerKind>& mixer_kinds() {
  static const std::vector<MixerKind> kinds = {
      {"softmax", "softmax attention, the GPT's: P = softmax(q·k/√d_k) (ops/attention.h)", make_softmax_attention},
      {"linear", "linear attention: φ(q)·φ(k) weights, O(T), a fixed-size state (docs/linear_attention.md)",
       make_linear_attention},
      {"mamba", "Mamba-2: a selective state-space recurrence, O(T), causal only (docs/mamba.md)", make_mamba},
  };
  return kinds;
}

std::string mixer_kind_names() {
  std::string names;
  for (const MixerKind& k : mixer_kinds()) names += std::string(names.empty() ? "" : ", ") + k.name;
  return names;
}

static const MixerKind& find_kind(const std::string& name, const std::string& text) {
  for (const MixerKind& k : mixer_kinds())
    if (name == k.name) return k;
  throw std::runtime_error("attention '" + name + "' in '" + text + "': expected one of " + mixer_kind_names());
}

std::vector<std::unique_ptr<Mixer>> make_layer_mixers(const ModelConfig& config) {
  std::vector<std::unique_ptr<Mixer>> mixers;
  for (const std::string& name : split_layer_list(config.attention, config.n_layer, "attention list"))
    mixers.push_back(find_kind(name, config.attention).make(config));
  return mixers;
}

std::string canonical_mixers(const ModelConfig& config) {
  std::vector<std::string> names;
  for (const std::string& name : split_layer_list(config.attention, config.n_layer, "attention list"))
    names.push_back(find_kind(name, config.attention).name);
  return join_layer_list(names);
}
