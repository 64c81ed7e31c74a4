#include "explore/lens.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/mixer_lab.h"
#include "ops/layernorm.h"

using nlohmann::json;

namespace {

// The final norm of one residual row, in double: ŷ = (r − mean)·ρ·γ + β, with ρ given (frozen) or its own.
std::vector<double> final_norm(const float* r, const float* gamma, const float* beta, int C, double* rho_out) {
  double mean = 0;
  for (int c = 0; c < C; c++) mean += r[c];
  mean /= C;
  double var = 0;
  for (int c = 0; c < C; c++) var += (r[c] - mean) * (r[c] - mean);
  var /= C;
  const double rho = 1.0 / std::sqrt(var + kLayerNormEps);
  if (rho_out) *rho_out = rho;
  std::vector<double> y(C);
  for (int c = 0; c < C; c++) y[c] = (r[c] - mean) * rho * gamma[c] + beta[c];
  return y;
}

// What part x (C) adds to the target's logit through the final norm with ρ frozen: ρ·Σ_c (x_c − mean x)·γ_c·w_c,
// w = W_E[target].
double through_frozen_norm(const double* x, double rho, const float* gamma, const float* w, int C) {
  double mean = 0;
  for (int c = 0; c < C; c++) mean += x[c];
  mean /= C;
  double sum = 0;
  for (int c = 0; c < C; c++) sum += (x[c] - mean) * gamma[c] * w[c];
  return rho * sum;
}

}  // namespace

json lens_json(ExploredModel& m, const std::vector<int>& ids, int position) {
  GPT& model = m.model();
  const int T = (int)ids.size(), L = model.config.n_layer, NH = model.config.n_head;
  const int C = model.config.n_embd, V = model.config.vocab_size;
  if (m.mask_token >= 0)
    throw BadRequest("the lens reads a next-character model; this checkpoint is a masked LM");
  if (position < 0 || position >= T)
    throw BadRequest("pos " + std::to_string(position) + " is outside the text (0 to " + std::to_string(T - 1) + ")");
  model.set_masks(m.loaded_masks);
  model.set_prefix_length(0);  // read left to right, as the score reads a prefix-LM
  const float* logits = m.logits_for(ids);
  const Activations& a = model.activations();
  const GPTParams& p = model.params();
  const Tokenizer& tok = m.ckpt.tokenizer;
  const int target = position + 1 < T ? ids[position + 1] : -1;
  const size_t row = (size_t)position * C;

  // The lens: after the embedding, then after each block.
  json layers = json::array();
  for (int stage = 0; stage <= L; stage++) {
    const float* r = (stage == 0 ? a.encoded : a.layers[stage - 1].residual3) + row;
    const std::vector<double> y = final_norm(r, p.ln_f_w, p.ln_f_b, C, nullptr);
    std::vector<double> z(V);
    for (int v = 0; v < V; v++) z[v] = std::inner_product(y.begin(), y.end(), p.wte + (size_t)v * C, 0.0);
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double zv : z) sum += std::exp(zv - top);
    const double lse = top + std::log(sum);
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(5, V);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int x, int w) { return z[x] != z[w] ? z[x] > z[w] : x < w; });
    json best = json::array();
    for (int i = 0; i < k; i++) best.push_back({tok.decode_one(order[i]), std::exp(z[order[i]] - lse)});
    layers.push_back({{"name", stage == 0 ? std::string("embedding") : "block " + std::to_string(stage - 1)},
                      {"top", best},
                      {"p_target", target >= 0 ? json(std::exp(z[target] - lse)) : json(nullptr)},
                      {"logit_target", target >= 0 ? json(z[target]) : json(nullptr)}});
  }
  json j = {{"position", position}, {"chars", std::vector<std::string>()}, {"layers", layers}};
  for (int id : ids) j["chars"].push_back(tok.decode_one(id));
  j["target"] = target >= 0 ? json(tok.decode_one(target)) : json(nullptr);
  if (target < 0) return j;

  // Direct logit attribution, ρ frozen at the full residual's (the forward's own statistic).
  const double rho = a.lnf_rstd[position];
  const float* w = p.wte + (size_t)target * C;
  json parts = json::array();
  std::vector<double> x(C);
  double total = 0;
  auto add = [&](const std::string& name, int layer, int head) {
    const double value = through_frozen_norm(x.data(), rho, p.ln_f_w, w, C);
    total += value;
    parts.push_back({{"name", name}, {"layer", layer >= 0 ? json(layer) : json(nullptr)},
                     {"head", head >= 0 ? json(head) : json(nullptr)}, {"value", value}});
  };
  for (int c = 0; c < C; c++) x[c] = a.encoded[row + c];
  add("embedding", -1, -1);
  for (int l = 0; l < L; l++) {
    const HeadShares s = model.mixer(l).lab().head_shares(model.mixer_pass(l));
    const int width = s.width / NH;
    for (int h = 0; h < NH; h++) {
      std::fill(x.begin(), x.end(), 0.0);
      const float* y = s.y + (size_t)position * s.width + h * width;
      for (int i = 0; i < width; i++)
        for (int c = 0; c < C; c++) x[c] += (double)y[i] * s.proj[((size_t)h * width + i) * C + c];
      add(std::to_string(l) + "." + std::to_string(h), l, h);
    }
    if (s.bias) {
      for (int c = 0; c < C; c++) x[c] = s.bias[c];
      add("block " + std::to_string(l) + " mixer bias", l, -1);
    }
    const LayerActivations& la = a.layers[l];
    for (int c = 0; c < C; c++) x[c] = (double)la.residual3[row + c] - la.residual2[row + c];
    if (!model.config.no_mlp) add("block " + std::to_string(l) + " MLP", l, -1);
  }
  double bias = 0;
  for (int c = 0; c < C; c++) bias += (double)p.ln_f_b[c] * w[c];
  j["attribution"] = {{"target", tok.decode_one(target)},
                      {"logit", logits[(size_t)position * V + target]},
                      {"parts", parts},
                      {"final_norm_bias", bias},
                      {"sum", total + bias}};
  return j;
}
