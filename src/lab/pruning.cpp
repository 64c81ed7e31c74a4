#include "lab/pruning.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>

#include <sys/stat.h>
#include <stdexcept>

#include "base/read_file.h"
#include "data/dataset.h"
#include "model/model.h"
#include "base/rng.h"

EvalBatches make_eval_batches(const std::vector<int>& tokens, int n, int B, int T, uint64_t seed) {
  if ((long)tokens.size() < T + 1) throw std::runtime_error("validation text shorter than one window");
  EvalBatches e;
  e.B = B, e.T = T, e.n = n;
  e.x.resize((size_t)n * B * T), e.y.resize(e.x.size());
  Rng rng(seed);
  for (int k = 0; k < n; k++) sample_batch(tokens, B, T, rng, &e.x[(size_t)k * B * T], &e.y[(size_t)k * B * T]);
  return e;
}

double gated_loss(GPT& model, const EvalBatches& e) {
  double total = 0;
  for (int k = 0; k < e.n; k++)
    total += model.forward(&e.x[(size_t)k * e.B * e.T], &e.y[(size_t)k * e.B * e.T], e.B, e.T);
  return total / e.n;
}

std::vector<int> gated_heads(const GPT& model) {
  std::vector<int> heads;
  for (int l = 0; l < model.config.n_layer; l++)
    if (model.mixer(l).has_head_gates())
      for (int h = 0; h < model.config.n_head; h++) heads.push_back(l * model.config.n_head + h);
  return heads;
}

// NaN at every head that cannot be removed, 0 at the others.
static std::vector<double> zero_at_gated_heads(const GPT& model) {
  std::vector<double> v((size_t)model.config.n_layer * model.config.n_head, std::nan(""));
  for (int i : gated_heads(model)) v[i] = 0.0;
  return v;
}

std::vector<double> head_importance(GPT& model, const EvalBatches& e, bool normalise) {
  if (model.head_gates().empty()) model.enable_head_gates();
  const int L = model.config.n_layer, NH = model.config.n_head;
  std::vector<double> I = zero_at_gated_heads(model);
  for (int k = 0; k < e.n; k++) {
    model.zero_grad();
    model.forward(&e.x[(size_t)k * e.B * e.T], &e.y[(size_t)k * e.B * e.T], e.B, e.T);
    model.backward();
    for (size_t i = 0; i < I.size(); i++) I[i] += std::fabs(model.head_gate_grads()[i]) / e.n;
  }
  model.zero_grad();
  if (normalise)
    for (int l = 0; l < L; l++) {
      if (!model.mixer(l).has_head_gates()) continue;
      double norm = 0;
      for (int h = 0; h < NH; h++) norm += I[(size_t)l * NH + h] * I[(size_t)l * NH + h];
      norm = std::sqrt(norm);
      if (norm > 0)
        for (int h = 0; h < NH; h++) I[(size_t)l * NH + h] /= norm;
    }
  return I;
}

std::vector<double> ablation_increase(GPT& model, const EvalBatches& e) {
  if (model.head_gates().empty()) model.enable_head_gates();
  const double base = gated_loss(model, e);
  std::vector<double> delta = zero_at_gated_heads(model);
  for (int i : gated_heads(model)) {
    const float saved = model.head_gates()[i];
    model.set_head_gate(i, 0);
    delta[i] = gated_loss(model, e) - base;
    model.set_head_gate(i, saved);
  }
  return delta;
}

std::string head_name(int index, int n_head) {
  return "L" + std::to_string(index / n_head) + "H" + std::to_string(index % n_head);
}

std::vector<PruneStep> prune_curve(GPT& model, const EvalBatches& e, int64_t seed, double step_fraction,
                                   double max_fraction, bool normalise) {
  model.enable_head_gates();
  const std::vector<int> heads = gated_heads(model);
  const int total = (int)heads.size();
  const int per_round = std::max(1, (int)std::ceil(step_fraction * total - 1e-9));
  const int limit = std::min(total - 1, (int)std::floor(max_fraction * total + 1e-9));
  std::vector<int> order = heads;  // the random order, when seed ≥ 0
  if (seed >= 0) {
    Rng rng((uint64_t)seed);
    for (int i = total - 1; i > 0; i--) std::swap(order[i], order[rng.below(i + 1)]);
  }
  std::vector<PruneStep> curve{{0, 0.0, gated_loss(model, e), ""}};
  std::string removed_names;
  int removed = 0;
  while (removed < limit) {
    const int now = std::min(per_round, limit - removed);
    std::vector<int> chosen;
    if (seed >= 0) {
      chosen.assign(order.begin() + removed, order.begin() + removed + now);
    } else {
      std::vector<double> I = head_importance(model, e, normalise);
      std::vector<int> alive;
      for (int i : heads)
        if (model.head_gates()[i] != 0) alive.push_back(i);
      std::stable_sort(alive.begin(), alive.end(), [&](int a, int b) { return I[a] < I[b]; });
      chosen.assign(alive.begin(), alive.begin() + now);
    }
    for (int i : chosen) model.set_head_gate(i, 0), removed_names += (removed_names.empty() ? "" : " ") + head_name(i, model.config.n_head);
    removed += now;
    curve.push_back({removed, (double)removed / total, gated_loss(model, e), removed_names});
  }
  model.set_head_gates(std::vector<float>(model.head_gates().size(), 1.0f));
  return curve;
}

// A list of every head of a 1024-layer, 64-head model is under 1 MB.
static const uint64_t kMaxHeadListBytes = uint64_t(16) << 20;

std::vector<float> parse_prune_spec(const std::string& spec, int n_layer, int n_head) {
  // A name that exists is a file of head names, read only if it is a regular file of a sane size (a FIFO hung
  // ./sample, /dev/zero was read as an empty list); anything else is the list itself.
  struct stat st;
  const std::string text = ::stat(spec.c_str(), &st) == 0
                               ? read_regular_file(spec, kMaxHeadListBytes, "a list of heads (--prune)")
                               : spec;
  std::vector<float> gates((size_t)n_layer * n_head, 1.0f);
  std::string name;
  auto take = [&]() {
    if (name.empty()) return;
    int l = -1, h = -1;
    char tail = 0;
    if (std::sscanf(name.c_str(), "L%dH%d%c", &l, &h, &tail) != 2 || l < 0 || h < 0)
      throw std::runtime_error("--prune: '" + name + "' is not a head name like L0H1");
    if (l >= n_layer || h >= n_head)
      throw std::runtime_error("--prune: the model has no head " + name + " (" + std::to_string(n_layer) +
                               " layers × " + std::to_string(n_head) + " heads)");
    gates[(size_t)l * n_head + h] = 0.0f;
    name.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') take();
    else name += (char)std::toupper((unsigned char)c);
  }
  take();
  return gates;
}
