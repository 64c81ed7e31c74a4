// The mixer kinds a model may use, by the name --mixer, --layer-mixer and the checkpoint's "mixer" key spell them
// (the flags were --attention and --layer-attention, which still work: model_renamed_flags in model/config.h; the key was
// "attention", which files written then still hold: the row's old_key, base/settings.h). A kind is its own
// files, one stem across the folders (model/mixers/<kind>.cpp; the op it plugs in, ops/<kind>.{h,cpp}; its
// double-precision textbook, textbook/<kind>.h: softmax_attention, linear_attention, mamba, rwkv; the GPT's own
// softmax attention has its textbook in textbook/reference.h) plus one line in model/mixers/kinds.h. Its file defines
//   const MixerKind& <id>_kind() { static const MixerKind kind = {name, summary, make, settings, describe}; … }
// and nothing outside those files names it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "model/config.h"
#include "model/mixer.h"

struct MixerKind {
  const char* name;     // "softmax": --mixer, --layer-mixer and the checkpoint spell the kind so
  const char* summary;  // one line for --help (the --mixer flag's help lists every kind with its summary)
  std::unique_ptr<Mixer> (*make)(const ModelConfig& config);
  // The kind's own settings (its struct in config.mixer_settings, fields by MIXER_SETTING_FIELD): rows of
  // model_settings() like the shared ones, so flags, ranges and the checkpoint's metadata come from them.
  std::vector<Setting<ModelConfig>> settings = {};
  // Those settings in a few words for describe() ("ssm state 16, expand 2, …"); null for a kind without any.
  std::string (*describe)(const ModelConfig& config) = nullptr;
};
const std::vector<const MixerKind*>& mixer_kinds();  // in the order of kinds.h
std::string mixer_kind_names();  // "softmax, linear, …" for messages

// The kind of every layer from config.mixer ("softmax", or "softmax,linear,…" one per layer). Throws naming the
// unknown kind and the accepted ones, or the count when the list does not match n_layer.
std::vector<const MixerKind*> layer_kinds(const ModelConfig& config);
// Whether a layer of `config` is of `kind`. Never throws: a config whose mixer list does not parse uses no kind
// (validate says what is wrong with it).
bool uses_kind(const ModelConfig& config, const MixerKind& kind);
// One mixer per layer, made by each layer's kind.
std::vector<std::unique_ptr<Mixer>> make_layer_mixers(const ModelConfig& config);
// validate(config) (config.h), and the mixers it made to check them: a model builds its mixers this once
// (defined beside validate, in config.cpp).
std::vector<std::unique_ptr<Mixer>> validated_mixers(const ModelConfig& config);
// config.mixer written back in its shortest form (one name when every layer agrees).
std::string canonical_mixers(const ModelConfig& config);
