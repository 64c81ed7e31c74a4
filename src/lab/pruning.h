// Head importance and pruning (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"). Each head's
// output is multiplied by a gate ξ_h (head_gate.h); ξ_h = 0 removes the head. On fixed validation batches x_k:
//   importance    I_h = mean_k |∂L(x_k)/∂ξ_h|   at the current gates, then normalised per layer: I_h / ‖I_layer‖₂
//   ablation      ΔL_h = L(ξ with ξ_h = 0) − L(ξ)      the exact loss increase when that head alone goes
//   pruning       rounds of ⌈10% of all heads⌉: remove the remaining heads with the lowest importance, re-score,
//                 repeat; the same rounds in a random order (per seed) are the baseline.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

class GPT;

// n fixed (B, T) next-token batches cut from `tokens` with `seed`.
struct EvalBatches {
  int B = 0, T = 0, n = 0;
  std::vector<int> x, y;  // n·B·T each
};
EvalBatches make_eval_batches(const std::vector<int>& tokens, int n, int B, int T, uint64_t seed);

// Mean loss over the batches with the model's current head gates.
double gated_loss(GPT& model, const EvalBatches& batches);
// The heads that can be removed (layer-major indices): those of the layers whose mixer has head gates
// (Mixer::has_head_gates; a recurrence's heads share a norm before the projection and have none). Every score below
// is NaN for the other heads, and pruning never picks them.
std::vector<int> gated_heads(const GPT& model);
// I_h (L·NH, layer-major), per-layer normalised when `normalise`. Turns the gates on if they are off.
std::vector<double> head_importance(GPT& model, const EvalBatches& batches, bool normalise = true);
// ΔL_h for every head, each removed alone from the current gates (which are restored).
std::vector<double> ablation_increase(GPT& model, const EvalBatches& batches);

struct PruneStep {
  int removed = 0;        // heads removed so far
  double fraction = 0;    // removed / the heads that can be removed (gated_heads)
  double loss = 0;        // validation loss with them removed
  std::string heads;      // those removed, "L0H1 L2H3 …"
};
// From all gates 1 down to one head left (or `max_fraction` removed). seed < 0: by importance (per-layer
// normalised when `normalise`), re-scored each round; otherwise a random order drawn with that seed. The gates are
// restored to 1 at the end.
std::vector<PruneStep> prune_curve(GPT& model, const EvalBatches& batches, int64_t seed, double step_fraction = 0.1,
                                   double max_fraction = 1.0, bool normalise = true);

// "L0H1,L2H3" (or a file holding such names separated by commas, spaces or newlines) → gates with those heads at
// 0 and the rest at 1. Throws on a malformed name or a head the model does not have.
std::vector<float> parse_prune_spec(const std::string& spec, int n_layer, int n_head);
std::string head_name(int index, int n_head);  // "L<l>H<h>"
