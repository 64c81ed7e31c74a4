// /api/head: one head's computation at one character, step by step, for a layer whose mixer has queries and keys
// (MixerLab::qkv; the attention family). Each step names where docs/tour.md's table puts it in the textbook
// (src/textbook/reference.h) and in the fast code (file, then function):
//   1. q_i, k_j, v_j   head h's columns of the layer's q|k|v rows            RefQKVAttention::forward
//   2. q_i·k_j          for every key j                                        ref_attention_probs
//   3. s·q_i·k_j        s = the layer's logit scale (1/√HS unless --attn-scale) ref_attention_probs
//   4. the mask         which keys position i may read                          AttentionMask::allows
//   5. P_ij             softmax over the allowed keys (exactly 0 elsewhere)     ref_attention_probs
//   6. O_i = Σ_j P_ij v_j                                                       ref_attention_forward
// Steps 3 and 5 are those of a layer whose weights are a softmax of q·k (MixerLab::logit_scale() > 0); a layer
// whose weights are another function of q and k (its logit scale 0) shows its own implied weights as step 5, with
// the kind's note. Beside P and O the model's own (the forward's weights and the head's share of the output
// projection's input, model/head_shares.h), so that the reader sees the steps reproduce them.
// A layer without queries and keys (a recurrence) answers its kind's own steps instead (MixerLab::head_steps,
// model/head_steps.h, each kind's in its own file: how its state decays, what it erases, what it writes, how it is
// read), each with its values and textbook function, "recurrent": true, and the head's output recomputed from them
// beside the model's own; a kind that tells none is a BadRequest naming its note.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "explore/analysis.h"

nlohmann::json head_steps_json(ExploredModel& m, const std::vector<int>& ids, int position, int layer, int head);
