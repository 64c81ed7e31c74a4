#include "model/config.h"

#include "model/mixer_lab.h"
#include "model/mixers/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#define FIELD(member) SETTING_FIELD(ModelConfig, member)

// The upper bounds keep every product of sizes in 64-bit range and every index in int range. All are Scope::Run:
// a resumed run keeps its model.
const std::vector<Setting<ModelConfig>>& model_settings() {
  using S = Scope;
  // The mixer kinds' names come from their registry (model/mixers/registry.cpp), so a new kind needs no edit here.
  static const std::string mixer_help = [] {
    std::string help = "mixer of every layer, one of:";
    for (const MixerKind* kind : mixer_kinds()) help += std::string(" ") + kind->name + " (" + kind->summary + ");";
    return help;
  }();
  static const std::string layer_mixer_help =
      "one mixer per layer, comma-separated, each one of " + mixer_kind_names();
  // clang-format off
  static const std::vector<Setting<ModelConfig>> shared = {
    {"n_layer",    "n-layer",    "transformer blocks",                               FIELD(n_layer),    between(1, 1024, false, false),    S::Run},
    {"n_head",     "n-head",     "heads per block",                                  FIELD(n_head),     between(1, 1024, false, false),    S::Run},
    {"n_embd",     "n-embd",     "embedding width (divisible by --n-head)",          FIELD(n_embd),     between(1, 65536, false, false),   S::Run},
    {"block_size", "block",      "context length (block_size)",                      FIELD(block_size), between(1, 65536, false, false),   S::Run},
    {"vocab_size", nullptr,      "characters and special tokens (from the corpus)",  FIELD(vocab_size), between(1, 1 << 21, false, false), S::Run},
    {"no_mlp",     "no-mlp",     "blocks without their MLP (a mixer-only model)",     FIELD(no_mlp),     any_value(),                      S::Run,
     /*absent=*/nullptr, /*old_key=*/"attn_only"},  // its name until recurrent mixers made "attention-only" wrong
    {"attn_scale", "attn-scale", "multiply q·k by: sqrt (1/√d_k), inv (1/d_k), none (1) or a number",
                                                                                     FIELD(attn_scale), any_value(),                      S::Run},
    {"mixer",      "mixer",      mixer_help.c_str(),                                 FIELD(mixer),      any_value(),                      S::Run,
     /*absent=*/nullptr, /*old_key=*/"attention"},  // its name until checkpoints said what it is
    {nullptr,      "layer-mixer", layer_mixer_help.c_str(),                          FIELD(mixer),      any_value(),                      S::Run},
    {"positions",  "positions",  "position embedding: learned (wpe.weight) or none (order from the mask or the recurrence)",
                                                                                     FIELD(positions),  any_value(),                      S::Run},
  };
  // clang-format on
  static const std::vector<Setting<ModelConfig>> with_kinds = [] {
    std::vector<Setting<ModelConfig>> rows = shared;
    for (const MixerKind* kind : mixer_kinds()) rows.insert(rows.end(), kind->settings.begin(), kind->settings.end());
    return rows;
  }();
  return with_kinds;
}

#undef FIELD

const std::vector<RenamedFlag>& model_renamed_flags() {
  static const std::vector<RenamedFlag> renamed = {
      {"attention", "mixer"}, {"layer-attention", "layer-mixer"}, {"attn-only", "no-mlp"}};
  return renamed;
}

// A kind's settings are stored only by a model with a layer of that kind: a new kind changes no other model's
// metadata.
bool setting_stored(const char* key, const ModelConfig& config) {
  for (const MixerKind* kind : mixer_kinds())
    for (const Setting<ModelConfig>& row : kind->settings)
      if (std::string(key) == row.key) return uses_kind(config, *kind);
  return true;
}

void validate(const ModelConfig& c) { validated_mixers(c); }

std::vector<std::unique_ptr<Mixer>> validated_mixers(const ModelConfig& c) {
  check_ranges(model_settings(), c);
  if (c.n_embd % c.n_head != 0)
    throw std::runtime_error("n_embd (" + std::to_string(c.n_embd) + ") must be divisible by n_head (" +
                             std::to_string(c.n_head) + "): check --n-embd and --n-head");
  attention_scale(c);
  if (c.positions != "learned" && c.positions != "none")
    throw std::runtime_error("positions '" + c.positions + "' (--positions) should be learned or none");
  std::vector<std::unique_ptr<Mixer>> mixers;
  try {
    mixers = make_layer_mixers(c);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("mixer (--mixer, --layer-mixer): ") + e.what());
  }
  if (c.attn_scale != "sqrt" &&
      std::none_of(mixers.begin(), mixers.end(), [](const auto& m) { return m->lab().logit_scale() > 0; }))
    throw std::runtime_error("attn_scale '" + c.attn_scale + "' (--attn-scale) scales q·k logits, and no layer of "
                             "this model has any (mixer " + canonical_mixers(c) + ")");
  return mixers;
}

float attention_scale(const ModelConfig& c) {
  const float HS = (float)(c.n_embd / c.n_head);
  if (c.attn_scale == "sqrt") return 1.0f / std::sqrt(HS);  // unit-variance logits when q, k have unit variance
  if (c.attn_scale == "inv") return 1.0f / HS;
  if (c.attn_scale == "none") return 1.0f;
  char* end = nullptr;
  const float value = std::strtof(c.attn_scale.c_str(), &end);
  if (c.attn_scale.empty() || *end != '\0' || !(value > 0) || !std::isfinite(value))
    throw std::runtime_error("attn_scale '" + c.attn_scale + "' should be sqrt, inv, none or a positive number");
  return value;
}

std::string describe(const ModelConfig& c) {
  std::string text = std::to_string(c.n_layer) + (c.no_mlp ? " MLP-free" : "") + " layers, " +
                     std::to_string(c.n_head) + " heads, " + std::to_string(c.n_embd) + " wide, block " +
                     std::to_string(c.block_size) + ", vocab " + std::to_string(c.vocab_size);
  if (c.positions == "none") text += ", no position embedding";
  if (c.mixer == ModelConfig{}.mixer) return text;  // the GPT's own mixer: nothing to add
  text += ", mixer " + c.mixer;
  // Each kind present says what its own settings are, once.
  std::vector<const MixerKind*> described;
  for (const MixerKind* kind : layer_kinds(c))
    if (kind->describe && std::find(described.begin(), described.end(), kind) == described.end()) {
      text += " (" + kind->describe(c) + ")";
      described.push_back(kind);
    }
  return text;
}

ModelVariant parse_model_variant(const std::string& text) {
  ModelVariant v;
  v.label = text;
  const size_t colon = text.find(':');
  v.mixer = text.substr(0, colon);
  std::replace(v.mixer.begin(), v.mixer.end(), '+', ',');
  for (size_t start = colon; start != std::string::npos;) {
    const size_t next = text.find(':', start + 1);
    const std::string item = text.substr(start + 1, next == std::string::npos ? std::string::npos : next - start - 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::runtime_error("model '" + text + "': '" + item + "' is not key=value (a model setting by its key, e.g. " +
                               "n_head=2)");
    v.settings.push_back({item.substr(0, eq), item.substr(eq + 1)});
    start = next;
  }
  return v;
}

ModelConfig with_variant(ModelConfig config, const ModelVariant& variant) {
  config.mixer = variant.mixer;
  for (const std::pair<std::string, std::string>& setting : variant.settings) {
    const std::string& key = setting.first;  // not a structured binding: C++17 lambdas cannot capture one
    const std::string& text = setting.second;
    const Setting<ModelConfig>* row = nullptr;
    for (const Setting<ModelConfig>& s : model_settings())
      if (s.key && key == s.key) row = &s;
    if (!row) throw std::runtime_error("model '" + variant.label + "': '" + key + "' is not a model setting");
    try {
      std::visit(
        [&](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          if constexpr (std::is_same_v<T, std::string>) {
            *field = text;
          } else {
            const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
            if (value.is_discarded()) throw std::runtime_error(key + "=" + text + " is not a value");
            settings_detail::read_json_value(value, row->key, *field);
          }
        },
        row->field(config));
    } catch (const std::exception& e) {
      throw std::runtime_error("model '" + variant.label + "': " + e.what());
    }
  }
  try {
    check_ranges(model_settings(), config);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("model '" + variant.label + "': " + e.what());
  }
  return config;
}
