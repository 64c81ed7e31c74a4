#include "explore/ablation.h"

#include <algorithm>
#include <cmath>

#include "data/utf8.h"
#include "model/mixer_lab.h"

using nlohmann::json;

std::vector<HeadRef> parse_heads(const std::string& spec, int n_layer, int n_head) {
  std::vector<HeadRef> heads;
  size_t start = 0;
  while (start <= spec.size() && !spec.empty()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    const size_t dot = item.find('.');
    const std::string layer = dot == std::string::npos ? "" : item.substr(0, dot);
    const std::string head = dot == std::string::npos ? "" : item.substr(dot + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(layer) || !digits(head))
      throw BadRequest("heads: '" + escape_for_message(item) + "' is not a head: write layer.head, e.g. 1.0 (several "
                       "comma-separated)");
    const HeadRef ref{std::stoi(layer), std::stoi(head)};
    if (ref.layer >= n_layer || ref.head >= n_head)
      throw BadRequest("heads: head " + item + " does not exist: this model has layers 0 to " +
                       std::to_string(n_layer - 1) + " with heads 0 to " + std::to_string(n_head - 1) + " each");
    const bool seen = std::any_of(heads.begin(), heads.end(),
                                  [&](const HeadRef& h) { return h.layer == ref.layer && h.head == ref.head; });
    if (!seen) heads.push_back(ref);
  }
  return heads;
}

AblateHow parse_ablate_how(const std::string& how) {
  if (how == "zero") return AblateHow::Zero;
  if (how == "mean") return AblateHow::Mean;
  throw BadRequest("how must be zero or mean (got '" + escape_for_message(how) + "')");
}

// The hook: for each chosen head of `layer`, out[n, :] −= (y_h[n] − ȳ_h)·W_h with ȳ_h = 0 (zero) or the mean of
// y_h over the positions of n's sequence (mean). In double, then added to the float stream once per element.
static void knock_out(const std::vector<int>& heads, AblateHow how, float* out, const HeadShares& s, int n_head,
                      int B, int T, int C) {
  const int width = s.width / n_head;  // each head's columns of y
  std::vector<double> mean(width), change(C);
  for (int h : heads) {
    const float* W = s.proj + (size_t)h * width * C;  // W_h: rows h·width … of the projection
    for (int b = 0; b < B; b++) {
      std::fill(mean.begin(), mean.end(), 0.0);
      if (how == AblateHow::Mean)
        for (int t = 0; t < T; t++)
          for (int i = 0; i < width; i++) mean[i] += s.y[((size_t)b * T + t) * s.width + h * width + i] / T;
      for (int t = 0; t < T; t++) {
        const size_t n = (size_t)b * T + t;
        std::fill(change.begin(), change.end(), 0.0);
        for (int i = 0; i < width; i++) {
          const double d = s.y[n * s.width + h * width + i] - mean[i];
          for (int c = 0; c < C; c++) change[c] += d * W[(size_t)i * C + c];
        }
        for (int c = 0; c < C; c++) out[n * C + c] = (float)(out[n * C + c] - change[c]);
      }
    }
  }
}

json ablate_json(ExploredModel& m, const std::vector<int>& ids, const std::vector<HeadRef>& heads, AblateHow how) {
  GPT& model = m.model();
  const int NH = model.config.n_head, C = model.config.n_embd;
  const json intact = score_text_json(m, ids);
  std::vector<std::vector<int>> by_layer(model.config.n_layer);
  for (const HeadRef& h : heads) by_layer[h.layer].push_back(h.head);
  // The hook lives for this call only; setting and clearing it each forget the last forward (model_lab.cpp), so
  // no intact answer is ever served from an ablated forward or the other way round.
  struct Unhook {
    ExploredModel& m;
    ~Unhook() {
      m.model().set_mixer_hook(nullptr);
      m.forward_rows(nullptr, 0, 0);
    }
  } unhook{m};
  model.set_mixer_hook([&](int layer, float* out, const MixerPass& pass) {
    if (by_layer[layer].empty()) return;
    knock_out(by_layer[layer], how, out, model.mixer(layer).lab().head_shares(pass), NH, pass.B, pass.T, C);
  });
  m.forward_rows(nullptr, 0, 0);  // the next forward is a new one
  json j = score_text_json(m, ids);
  json delta = json::array();
  for (size_t t = 0; t < ids.size(); t++) {
    const json& a = j["bits"][t];
    const json& b = intact["bits"][t];
    delta.push_back(a.is_null() || b.is_null() ? json(nullptr) : json(a.get<double>() - b.get<double>()));
  }
  json names = json::array();
  for (const HeadRef& h : heads) names.push_back(std::to_string(h.layer) + "." + std::to_string(h.head));
  j["intact_bits"] = intact["bits"];
  j["delta"] = delta;
  j["intact_bits_per_char"] = intact["bits_per_char"];
  const bool both = !j["bits_per_char"].is_null() && !intact["bits_per_char"].is_null();
  j["delta_bits_per_char"] =
      both ? json(j["bits_per_char"].get<double>() - intact["bits_per_char"].get<double>()) : json(nullptr);
  j["heads"] = names;
  j["how"] = how == AblateHow::Zero ? "zero" : "mean";
  return j;
}
