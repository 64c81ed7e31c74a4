// /api/lens: what each layer would predict if the model stopped there (the logit lens, nostalgebraist 2020), and
// how much each head and each MLP adds to the logit of the character that actually comes next (direct logit
// attribution, Elhage et al. 2021). For a next-character model and a text of at most block_size characters, at
// position p (its prediction is of character p + 1).
//
// The residual stream at p: r⁰ = the embedding (token + position), r^{l+1} = r^l + mixer_l + mlp_l (block l's
// output). The lens applies the model's own head to each:
//   z(r) = LN_f(r)·W_Eᵀ,   LN_f(r) = (r − mean(r))·ρ(r)·γ + β,   ρ(r) = 1/√(var(r) + ε)
// so its last layer (r^L) is the model's own prediction, exactly up to float rounding (a test holds it so).
//
// Attribution. With ρ frozen at the full residual's, ρ* = ρ(r^L) (the forward's own lnf_rstd), LN_f is linear in r
// (the centring is linear too), and the target's logit splits into a sum over what was added to the stream:
//   z_t = Σ_parts ρ*·Σ_c (x_c − mean(x))·γ_c·W_E[t, c]  +  Σ_c β_c·W_E[t, c]
//   parts: the embedding (the direct path), each head's y_h·W_h (model/head_shares.h), each mixer's output bias,
//   each MLP's output (residual3 − residual2, its biases included); the last term is the final norm's bias.
// The parts sum to the logit exactly because ρ* is the real one; what a part would do alone (with its own ρ) is
// not what it gets here: this is the first-order reading every tutorial uses, said so in docs/explore.md.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "explore/analysis.h"

// {position, target, layers: [{name, top: [[char, p]…], p_target, logit_target}], attribution: {target, logit,
// parts: [{name, layer, head, value}], final_norm_bias, sum}}. position in [0, T); at T − 1 there is no next
// character: target is null and the attribution is left out. A masked LM is refused (BadRequest).
nlohmann::json lens_json(ExploredModel& m, const std::vector<int>& ids, int position);
