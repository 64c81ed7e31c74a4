// The mixer kinds as the tests see them: the registry's list (src/model/mixers/kinds.h, the one place a kind is
// registered), each kind's textbook and test shapes (its textbook header registers them: textbook/mixer.h), and
// model configs built from them. No test names a kind to sweep "every kind": it asks here, so a new kind is covered
// by its registration line and its own textbook, with no edit to any test.
#pragma once
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/layer_list.h"
#include "model/config.h"
#include "model/mixers/registry.h"
#include "ops/mask.h"
#include "textbook/mixer.h"

namespace testutil {

// Every registered kind's name, in the order of kinds.h.
inline std::vector<std::string> registered_kinds() {
  std::vector<std::string> names;
  for (const MixerKind* kind : mixer_kinds()) names.push_back(kind->name);
  return names;
}

// Every registered kind alone, then one hybrid of two layers: the last kind, then the first.
inline std::vector<std::string> every_kind_and_a_hybrid() {
  std::vector<std::string> mixers = registered_kinds();
  mixers.push_back(mixers.back() + "," + mixers.front());
  return mixers;
}

// Every pair of two different kinds, each once ("a,b" with a before b in kinds.h).
inline std::vector<std::string> every_pair_of_kinds() {
  const std::vector<std::string> kinds = registered_kinds();
  std::vector<std::string> pairs;
  for (size_t a = 0; a < kinds.size(); a++)
    for (size_t b = a + 1; b < kinds.size(); b++) pairs.push_back(kinds[a] + "," + kinds[b]);
  return pairs;
}

// A model of `mixer` (one kind, or one per layer) with these sizes and every other setting at its default.
inline ModelConfig sized_config(const std::string& mixer, int n_layer, int n_head, int n_embd, int block, int vocab) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  c.block_size = block;
  c.vocab_size = vocab;
  c.mixer = mixer;
  return c;
}

// The registered kinds whose layers take every mask, bidirectional among them (the kinds that are not recurrences),
// in the order of kinds.h: what the tests that sweep masks over kinds run.
inline std::vector<std::string> kinds_that_take_every_mask() {
  ModelConfig c = sized_config("", 1, 2, 8, 8, 5);
  std::vector<std::string> kinds;
  for (const MixerKind* kind : mixer_kinds()) {
    c.mixer = kind->name;
    const std::unique_ptr<Mixer> mixer = kind->make(c);
    try {
      mixer->check_mask(AttentionMask::parse("bidirectional"));
      kinds.push_back(kind->name);
    } catch (const std::runtime_error&) {
    }
  }
  return kinds;
}

// The textbook of `kind`, which its own header registers; throws saying what is missing.
inline const RefMixerKind& textbook_of(const std::string& kind) {
  const RefMixerKind* ref = find_ref_mixer_kind(kind);
  if (!ref)
    throw std::runtime_error("mixer kind '" + kind + "' has no textbook registered: its header textbook/" + kind +
                             ".h (or the like) must call register_ref_mixer, and its own test file include it");
  if (ref->test_shapes.empty())
    throw std::runtime_error("mixer kind '" + kind + "' registers no test shapes with its textbook");
  return *ref;
}

// Every kind of c.mixer at its first test shape (c.n_layer must already match the list).
inline void apply_test_shapes(ModelConfig& c) {
  for (const std::string& kind : split_layer_list(c.mixer, c.n_layer, "mixer list")) textbook_of(kind).test_shapes[0].apply(c);
}

// A model of `mixer` (one kind per layer, n_layer from the list) at the kinds' first test shapes.
inline ModelConfig kind_config(const std::string& mixer, int n_head, int n_embd, int block, int vocab) {
  const int n_layer = 1 + (int)std::count(mixer.begin(), mixer.end(), ',');
  ModelConfig c = sized_config(mixer, n_layer, n_head, n_embd, block, vocab);
  apply_test_shapes(c);
  return c;
}

// "softmax,mamba" → "softmax_mamba": a gtest parameter's name.
inline std::string param_name(std::string mixer) {
  std::replace(mixer.begin(), mixer.end(), ',', '_');
  return mixer;
}

}  // namespace testutil
