#include "model/mixers/registry.h"
#include "model/mixers/registry_probe.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "base/layer_list.h"

// Each kind's MixerKind lives in its own file; kinds.h lists them.
#define MIXER_KIND(id) const MixerKind& id##_kind();
#include "model/mixers/kinds.h"
#undef MIXER_KIND

const std::vector<const MixerKind*>& mixer_kinds() {
  static const std::vector<const MixerKind*> kinds = {
#define MIXER_KIND(id) &id##_kind(),
#include "model/mixers/kinds.h"
#undef MIXER_KIND
  };
  return kinds;
}

std::string mixer_kind_names() {
  std::string names;
  for (const MixerKind* k : mixer_kinds()) names += std::string(names.empty() ? "" : ", ") + k->name;
  return names;
}

static const MixerKind& find_kind(const std::string& name, const std::string& text) {
  for (const MixerKind* k : mixer_kinds())
    if (name == k->name) return *k;
  throw std::runtime_error("mixer '" + name + "' in '" + text + "': expected one of " + mixer_kind_names());
}

std::vector<const MixerKind*> layer_kinds(const ModelConfig& config) {
  std::vector<const MixerKind*> kinds;
  for (const std::string& name : split_layer_list(config.mixer, config.n_layer, "mixer list"))
    kinds.push_back(&find_kind(name, config.mixer));
  return kinds;
}

bool uses_kind(const ModelConfig& config, const MixerKind& kind) {
  const int entries = 1 + (int)std::count(config.mixer.begin(), config.mixer.end(), ',');
  const std::vector<std::string> names = split_layer_list(config.mixer, entries, "mixer list");
  return std::find(names.begin(), names.end(), kind.name) != names.end();
}

static std::atomic<size_t> made{0};

std::vector<std::unique_ptr<Mixer>> make_layer_mixers(const ModelConfig& config) {
  std::vector<std::unique_ptr<Mixer>> mixers;
  for (const MixerKind* kind : layer_kinds(config)) mixers.push_back(kind->make(config));
  made += mixers.size();
  return mixers;
}

size_t mixers_made() { return made; }

std::string canonical_mixers(const ModelConfig& config) {
  std::vector<std::string> names;
  for (const MixerKind* kind : layer_kinds(config)) names.push_back(kind->name);
  return join_layer_list(names);
}
