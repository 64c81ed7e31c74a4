// The mixer kinds a model may use, by the name --attention, --layer-attention and the checkpoint's "attention" key
// spell them. Adding a kind: its file in this folder, and one line in kinds() in registry.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/mixer.h"

struct MixerKind {
  const char* name;
  const char* summary;  // one line for --help and the docs
  std::unique_ptr<Mixer> (*make)(const ModelConfig& config);
};
const std::vector<MixerKind>& mixer_kinds();
std::string mixer_kind_names();  // "softmax, linear, …" for messages

// One mixer per layer from config.attention ("softmax", or "softmax,linear,…" one per layer). Throws naming the
// unknown kind and the accepted ones, or the count when the list does not match n_layer.
std::vector<std::unique_ptr<Mixer>> make_layer_mixers(const ModelConfig& config);
// config.attention written back in its shortest form (one name when every layer agrees).
std::string canonical_mixers(const ModelConfig& config);
