// The shape of a model (nanoGPT's GPTConfig), its table of settings, and the checks that make a bad one fail early
// with a clear message.
//
// The settings are of two kinds. The shared ones (sizes, no_mlp, attn_scale, the mixer of every layer) are the
// fields of ModelConfig below, with their rows in model_settings() (config.cpp). A mixer kind's own settings (e.g.
// a state-space layer's state size) are a small struct the kind declares in its own files, with its rows in its own
// MixerKind (model/mixers/registry.h): ModelConfig carries them in `mixer_settings`, one struct per kind, created
// with its defaults on first use, so this file never changes for a new kind. model_settings() is the shared rows
// followed by every kind's rows, so ./train's flags and --help, the range checks, the checkpoint's metadata (written
// and read, under the same keys as ever), the known keys of format 2 and later, --print-settings and the experiments'
// select_settings see a kind's settings exactly as they see the shared ones.
//
// To add a model setting: a field with its default (here, or in the kind's settings struct), its row (in
// model_settings(), or in the kind's rows), the code that uses it, and its test. Everything else follows from the
// row. A checkpoint written before the setting existed loads with the row's `absent` value, or the default.
#pragma once
#include <any>
#include <map>
#include <string>
#include <typeindex>
#include <vector>

#include "base/renamed_flags.h"
#include "base/settings.h"

// The settings structs of the mixer kinds, one per kind, each holding its own defaults: get<S>() reads (and on a
// non-const store creates) the kind's struct S. Copying the store copies every struct.
class MixerSettings {
 public:
  template <typename S>
  S& get() {
    std::any& slot = by_type_[typeid(S)];
    if (!slot.has_value()) slot = S{};
    return std::any_cast<S&>(slot);
  }
  template <typename S>
  const S& get() const {
    static const S defaults{};
    const auto it = by_type_.find(typeid(S));
    return it == by_type_.end() ? defaults : std::any_cast<const S&>(it->second);
  }

 private:
  std::map<std::type_index, std::any> by_type_;
};

struct ModelConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int block_size = 64;  // the longest context: every sequence has T ≤ block_size
  int vocab_size = 0;   // set from the tokenizer
  bool no_mlp = false;              // blocks without their MLP (e.g. the induction-head experiment)
  std::string attn_scale = "sqrt";  // multiplies q·k: sqrt = 1/√HS, inv = 1/HS, none = 1, or a number
  // The mixer of every layer, or one per layer: "softmax,linear,linear" (model/mixers/kinds.h lists them).
  // Only softmax layers have q·k logits, so attn_scale applies to those alone.
  std::string mixer = "softmax";
  // learned: GPT-2's position embedding wpe.weight (block_size, C), added to each token's; none: no wpe.weight at
  // all, so order reaches the model only through the causal mask or a recurrence ("NoPE" for softmax attention).
  std::string positions = "learned";
  MixerSettings mixer_settings;  // each kind's own settings, read only by layers of that kind

  int head_size() const { return n_embd / n_head; }
};

// The field of a kind's settings struct that a row sets: MIXER_SETTING_FIELD(KindSettings, field).
#define MIXER_SETTING_FIELD(Settings, member) \
  [](ModelConfig & c) -> SettingField { return &c.mixer_settings.get<Settings>().member; }

// Every model setting, once: its key in the checkpoint's metadata, ./train's flag, help line, range. The shared
// rows, then each mixer kind's rows in the order of model/mixers/kinds.h.
const std::vector<Setting<ModelConfig>>& model_settings();

// The model's flags that were renamed, still taken under their old spelling with a note (base/renamed_flags.h):
// --attention → --mixer, --layer-attention → --layer-mixer, --attn-only → --no-mlp.
const std::vector<RenamedFlag>& model_renamed_flags();

// Whether a model of `config` stores the setting `key` (base/settings.h): a mixer kind's settings only when a layer
// is of that kind, every other always.
bool setting_stored(const char* key, const ModelConfig& config);

// Throws std::runtime_error naming the offending field, e.g. "n_embd (130) must be divisible by n_head (4)": the
// table's ranges, then the checks that involve two settings or parse a value.
void validate(const ModelConfig& config);

// "4 layers, 4 heads, 128 wide, block 64, vocab 65" ("4 MLP-free layers, …" with no_mlp), then the mixers
// when they are not softmax, each kind saying what its own settings are.
std::string describe(const ModelConfig& config);

// The number attn_scale stands for; throws on a spelling it does not know.
float attention_scale(const ModelConfig& config);

// A model as the experiments' --models lists name one: its layers' kinds joined by '+' ("softmax+<kind>"; one kind
// means every layer), then model settings after ':', each key=value by its row of model_settings()
// ("<kind>:<setting>=0:<other setting>=4"). An experiment lists a kind's ablation this way, with no list of kinds
// or of their settings of its own.
struct ModelVariant {
  std::string label;  // the text as given
  std::string mixer;  // config.mixer's spelling: "softmax,<kind>"
  std::vector<std::pair<std::string, std::string>> settings;  // ("rwkv_erase", "0"), in the order given
};
ModelVariant parse_model_variant(const std::string& text);
// `config` with the variant's mixer and settings, each typed and range-checked by its row; throws naming the
// variant and the key when the key is not a model setting or its value does not fit.
ModelConfig with_variant(ModelConfig config, const ModelVariant& variant);
