#include "explore/head_steps.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/mixer_lab.h"

using nlohmann::json;

namespace {

// A kind without queries and keys tells its own steps (MixerLab::head_steps, in the kind's file): each with its
// values, and the head's output recomputed from them beside the model's own.
json recurrent_steps_json(const HeadSteps& h, const Mixer& mixer, const std::vector<std::string>& chars, int position,
                          int layer, int head, const std::vector<double>& model_output) {
  if (h.steps.empty())
    throw BadRequest("layer " + std::to_string(layer) + " (" + mixer.kind() + ") tells no steps: " +
                     mixer.lab().weights_description());
  json steps = json::array();
  for (const HeadStep& st : h.steps) {
    json values = json::array();
    for (const auto& [name, numbers] : st.values) values.push_back({{"name", name}, {"values", numbers}});
    steps.push_back({{"name", st.name}, {"math", st.math}, {"textbook", st.textbook}, {"file", st.file},
                     {"values", values}});
  }
  return {{"chars", chars},
          {"position", position},
          {"layer", layer},
          {"head", head},
          {"kind", mixer.kind()},
          {"head_size", (int)h.output.size()},
          {"recurrent", true},
          {"about", mixer.lab().weights_description()},
          {"steps", steps},
          {"output", h.output},
          {"model_output", model_output}};
}

}  // namespace

json head_steps_json(ExploredModel& m, const std::vector<int>& ids, int position, int layer, int head) {
  GPT& model = m.model();
  const int T = (int)ids.size(), L = model.config.n_layer, NH = model.config.n_head, C = model.config.n_embd;
  if (layer < 0 || layer >= L)
    throw BadRequest("layer " + std::to_string(layer) + " does not exist (0 to " + std::to_string(L - 1) + ")");
  if (head < 0 || head >= NH)
    throw BadRequest("head " + std::to_string(head) + " does not exist (0 to " + std::to_string(NH - 1) + ")");
  if (position < 0 || position >= T)
    throw BadRequest("position " + std::to_string(position) + " is outside the text (0 to " + std::to_string(T - 1) + ")");
  model.set_masks(m.loaded_masks);
  model.set_prefix_length(0);
  m.logits_for(ids);
  const Mixer& mixer = model.mixer(layer);
  const MixerLab& lab = mixer.lab();
  const MixerPass pass = model.mixer_pass(layer);
  const float* qkv = lab.qkv(pass.saved);
  std::vector<std::string> chars;
  for (int id : ids) chars.push_back(m.ckpt.tokenizer.decode_one(id));
  const HeadShares shares = lab.head_shares(pass);
  const float* y = shares.y + (size_t)position * shares.width + head * (shares.width / NH);
  const std::vector<double> model_o(y, y + shares.width / NH);
  if (!qkv) return recurrent_steps_json(lab.head_steps(pass, position, head), mixer, chars, position, layer, head,
                                        model_o);
  const int HS = C / NH;
  const AttentionMask& mask = model.masks()[layer];
  auto part = [&](int t, int third) {  // head h's HS columns of q (0), k (1) or v (2) at position t
    const float* row = qkv + (size_t)t * 3 * C + third * C + head * HS;
    return std::vector<double>(row, row + HS);
  };
  const std::vector<double> q = part(position, 0);
  json keys = json::array(), values = json::array(), dots = json::array(), scaled = json::array();
  json allowed = json::array(), P = json::array(), own = json::array();
  const double s = lab.logit_scale();
  std::vector<double> logits(T, -INFINITY);
  double top = -INFINITY;
  for (int j = 0; j < T; j++) {
    const std::vector<double> k = part(j, 1), v = part(j, 2);
    double dot = 0;
    for (int d = 0; d < HS; d++) dot += q[d] * k[d];
    keys.push_back(k), values.push_back(v), dots.push_back(dot), scaled.push_back(s * dot);
    const bool ok = mask.allows(position, j, T);
    allowed.push_back(ok ? 1 : 0);
    if (!ok) continue;
    logits[j] = s * dot;
    top = std::max(top, s * dot);
  }
  // Step 5: a softmax of the scaled scores when the layer's weights are one, else the layer's own implied weights.
  const float* weights = model.mixing_weights(layer) + ((size_t)head * T + position) * T;
  std::vector<double> p(T, 0.0);
  double sum = 0;
  for (int j = 0; j < T; j++) sum += std::isfinite(logits[j]) ? std::exp(logits[j] - top) : 0.0;
  for (int j = 0; j < T; j++) {
    p[j] = s > 0 ? (std::isfinite(logits[j]) ? std::exp(logits[j] - top) / sum : 0.0) : weights[j];
    P.push_back(p[j]);
    own.push_back(weights[j]);
  }
  // Step 6 and the model's own output of the head at this position.
  std::vector<double> o(HS, 0.0);
  for (int j = 0; j < T; j++)
    for (int d = 0; d < HS; d++) o[d] += p[j] * values[j][d].get<double>();
  // Each step with the textbook function docs/tour.md's table names for it.
  const std::string textbook = "src/textbook/reference.h";
  auto step = [&](const std::string& name, const std::string& math, const std::string& function,
                  const std::string& file) {
    return json{{"name", name}, {"math", math}, {"textbook", function}, {"file", file}};
  };
  const std::string scale_note = s > 0 ? "" : " (0: these weights are not exp(s·q·k) normalised)";
  const std::string weights_math = s > 0 ? "P_ij = exp(s·q_i·k_j) over the allowed keys, normalised to sum 1"
                                         : "the layer's implied weights";
  json steps = json::array();
  steps.push_back(step("q, k, v", "head h's columns of ln_1(x)·W_qkv + b", "RefQKVAttention::forward", textbook));
  steps.push_back(step("q·k", "q_i·k_j for every key j", "ref_attention_probs", textbook));
  steps.push_back(step("scale", "s·q_i·k_j, s = " + std::to_string(s) + scale_note, "ref_attention_probs", textbook));
  steps.push_back(step("mask", mask.to_string() + ": the keys position i may read", "AttentionMask::allows",
                       "src/ops/mask.cpp"));
  steps.push_back(step("weights", weights_math, "ref_attention_probs", textbook));
  steps.push_back(step("weighted V", "O_i = Σ_j P_ij v_j", "ref_attention_forward", textbook));
  return {{"chars", chars},       {"position", position},   {"layer", layer},
          {"head", head},         {"kind", mixer.kind()},   {"head_size", HS},
          {"from_scores", s > 0}, {"about", lab.weights_description()},
          {"steps", steps},       {"q", q},                 {"k", keys},
          {"v", values},          {"dot", dots},            {"scaled", scaled},
          {"allowed", allowed},   {"weights", P},           {"model_weights", own},
          {"output", o},          {"model_output", model_o}};
}
