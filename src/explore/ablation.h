// /api/ablate: the surprisal of every character with some heads knocked out, beside the intact model's.
//
// A head is knocked out through the model's mixer seam (GPT::set_mixer_hook): right after layer l's mixer wrote
// out = x + Σ_h y_h·W_h + b (model/head_shares.h: every kind's output projection splits into its heads' shares),
//   zero   out −= y_h·W_h                      the head adds nothing (for the attention family the same as its
//                                              head gate ξ_h = 0, ops/head_gate.h)
//   mean   out += (ȳ_h − y_h)·W_h              the head adds, at every position, its mean share over the text's
//                                              positions (ȳ_h = mean_t y_h[t], each sequence its own mean): what
//                                              it always says stays, what it says about this position goes
// and everything after that layer reads the changed stream. No kind is named: the hook reads each kind's answer to
// MixerLab::head_shares. The ablated score goes through score_text_json like the intact one (a masked LM's
// batched rows, a long text's sliding windows), so the two compare character for character:
//   delta_t = s_t(ablated) − s_t(intact)   bits (null where a character has no prediction)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "explore/analysis.h"

struct HeadRef {
  int layer = 0;
  int head = 0;
};

// "1.0,0.3" (layer.head, comma-separated; "" = none) → the heads, in order, each once. Throws BadRequest naming
// `heads` on a malformed item or a head the model does not have (and what it has).
std::vector<HeadRef> parse_heads(const std::string& spec, int n_layer, int n_head);

enum class AblateHow { Zero, Mean };
// "zero" or "mean"; anything else is a BadRequest naming `how`.
AblateHow parse_ablate_how(const std::string& how);

// {chars, bits, intact_bits, delta, bits_per_char, intact_bits_per_char, delta_bits_per_char, heads, how, top}:
// score_text_json's fields for the ablated model, with the intact model's bits beside them. An empty list runs the
// ablated forward too (through the hook, which then changes nothing): delta is 0 everywhere, exactly. The model is
// held for the whole call (no `between`): while the hook is set no other request may run it.
nlohmann::json ablate_json(ExploredModel& m, const std::vector<int>& ids, const std::vector<HeadRef>& heads,
                           AblateHow how);
