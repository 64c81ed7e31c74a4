#include "lab/attention_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/mixer_lab.h"
#include "model/model.h"

// Entropy, max weight and saturation of one row of weights p over its n keys, added to the running sums.
struct RowStats {
  double entropy = 0, entropy_norm = 0, max_weight = 0;
  long saturated = 0, rows = 0;
  void add(const double* p, int n) {
    if (n < 2) return;
    double H = 0, pmax = 0;
    for (int j = 0; j < n; j++) {
      if (p[j] > 0) H -= p[j] * std::log(p[j]);
      pmax = std::max(pmax, p[j]);
    }
    entropy += H, entropy_norm += H / std::log((double)n), max_weight += pmax;
    saturated += pmax > 0.99;
    rows++;
  }
};

// Row statistics of weights A (B, NH, T, T) that some other mixer implies (e.g. φ(q)·φ(k)/den):
// no logits, so logit_var and logit_max are NaN.
static LayerAttentionStats implied_weight_stats(const float* A, const AttentionMask& mask, int B, int NH, int T) {
  RowStats rs;
  std::vector<double> p(T);
  for (int bh = 0; bh < B * NH; bh++)
    for (int i = 0; i < T; i++) {
      const KeyRange K = mask.keys_for(i, T);
      for (int j = K.begin; j < K.end; j++) p[j - K.begin] = A[((size_t)bh * T + i) * T + j];
      rs.add(p.data(), K.end - K.begin);
    }
  LayerAttentionStats st;
  st.logit_var = st.logit_max = NAN;
  if (rs.rows)
    st.entropy = rs.entropy / rs.rows, st.entropy_norm = rs.entropy_norm / rs.rows,
    st.max_weight = rs.max_weight / rs.rows, st.saturated = (double)rs.saturated / rs.rows;
  return st;
}

// Each sequence's sums on their own, added in sequence order afterwards: the sequences are shared among the threads
// and the result is the same bits for any number of them. Per row, one exp per key: with e_j = exp(s_j − max) and
// z = Σ e_j, p_j = e_j / z and the entropy −Σ p_j log p_j = log z − Σ p_j (s_j − max). Measured at every evaluation
// of ./train; written with a log and two exps per key, one thread and a serial double dot product, it was a tenth of
// the evaluation's time (issue 28).
LayerAttentionStats layer_attention_stats(const float* qkv, const AttentionMask& mask, float scale, int B, int T,
                                          int C, int NH) {
  const int HS = C / NH;
  struct Sums {
    double sum = 0, sum_sq = 0, maxabs = 0, entropy = 0, entropy_norm = 0, max_weight = 0;
    long logits = 0, rows = 0, saturated = 0;
  };
  std::vector<Sums> per_sequence(B);
#pragma omp parallel
  {
    std::vector<double> s(T), e(T);
#pragma omp for schedule(static)
    for (int b = 0; b < B; b++) {
      Sums& a = per_sequence[b];
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < T; i++) {
          const float* q = qkv + ((size_t)b * T + i) * 3 * C + h * HS;
          const KeyRange K = mask.keys_for(i, T);
          double mx = -INFINITY;
          for (int j = K.begin; j < K.end; j++) {
            const float* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
            double dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int d = 0; d < HS; d++) dot += (double)q[d] * k[d];
            s[j] = scale * dot;
            a.sum += s[j], a.sum_sq += s[j] * s[j], a.logits++;
            a.maxabs = std::max(a.maxabs, std::fabs(s[j]));
            mx = std::max(mx, s[j]);
          }
          const int n = K.end - K.begin;
          if (n < 2) continue;
          double z = 0;
          for (int j = K.begin; j < K.end; j++) z += e[j] = std::exp(s[j] - mx);
          double weighted = 0;  // Σ p_j (s_j − max)
          for (int j = K.begin; j < K.end; j++) weighted += e[j] * (s[j] - mx);
          const double H = std::log(z) - weighted / z, pmax = 1 / z;  // the largest weight's e is exp(0) = 1
          a.entropy += H, a.entropy_norm += H / std::log((double)n), a.max_weight += pmax;
          a.saturated += pmax > 0.99;
          a.rows++;
        }
    }
  }
  Sums all;
  for (const Sums& a : per_sequence) {
    all.sum += a.sum, all.sum_sq += a.sum_sq, all.maxabs = std::max(all.maxabs, a.maxabs);
    all.entropy += a.entropy, all.entropy_norm += a.entropy_norm, all.max_weight += a.max_weight;
    all.logits += a.logits, all.rows += a.rows, all.saturated += a.saturated;
  }
  LayerAttentionStats st;
  if (all.logits) {
    const double mean = all.sum / all.logits;
    st.logit_var = std::max(0.0, all.sum_sq / all.logits - mean * mean);
    st.logit_max = all.maxabs;
  }
  if (all.rows) {
    st.entropy = all.entropy / all.rows, st.entropy_norm = all.entropy_norm / all.rows;
    st.max_weight = all.max_weight / all.rows, st.saturated = (double)all.saturated / all.rows;
  }
  return st;
}

std::vector<LayerAttentionStats> attention_statistics(const GPT& model) {
  const int B = model.last_B(), T = model.last_T(), C = model.config.n_embd, NH = model.config.n_head;
  std::vector<LayerAttentionStats> out;
  for (int l = 0; l < model.config.n_layer; l++) {
    const MixerLab& mixer = model.mixer(l).lab();
    const MixerPass pass = model.mixer_pass(l);
    const float* qkv = mixer.qkv(pass.saved);
    LayerAttentionStats st;
    if (qkv && mixer.logit_scale() > 0)
      st = layer_attention_stats(qkv, pass.mask, mixer.logit_scale(), B, T, C, NH);
    else if (mixer.weights_are_probabilities())
      st = implied_weight_stats(model.mixing_weights(l), pass.mask, B, NH, T);
    else
      st.logit_var = st.logit_max = st.entropy = st.entropy_norm = st.max_weight = st.saturated = NAN;
    st.grad_q = st.grad_k = NAN;
    if (const float* g = mixer.qkv_weights(model.grads().h[l].mixer).qkv) {  // (C, 3C)
      double gq = 0, gk = 0;
      for (int r = 0; r < C; r++)
        for (int c = 0; c < C; c++) {
          const double a = g[(size_t)r * 3 * C + c], b = g[(size_t)r * 3 * C + C + c];
          gq += a * a, gk += b * b;
        }
      st.grad_q = std::sqrt(gq), st.grad_k = std::sqrt(gk);
    }
    out.push_back(st);
  }
  return out;
}

static const char* kNames[] = {"logit_var", "logit_max", "entropy", "entropy_norm",
                               "max_weight", "saturated", "grad_q", "grad_k"};
static const int kColumns = sizeof kNames / sizeof kNames[0];

std::string attention_stats_header(int n_layer) {
  std::string out;
  for (int l = 0; l < n_layer; l++)
    for (const char* n : kNames) out += ",L" + std::to_string(l) + "_" + n;
  return out;
}

std::string attention_stats_cells(const std::vector<LayerAttentionStats>& stats) {
  std::string out;
  char cell[48];
  for (const LayerAttentionStats& s : stats)
    for (double v : {s.logit_var, s.logit_max, s.entropy, s.entropy_norm, s.max_weight, s.saturated, s.grad_q,
                     s.grad_k})
      if (std::isnan(v)) out += ",";  // does not apply (logits of a mixer that has none)
      else std::snprintf(cell, sizeof cell, ",%.6g", v), out += cell;
  return out;
}

std::vector<LayerAttentionStats> measure_attention(GPT& model, const int* x, const int* y, int B, int T) {
  model.forward(x, y, B, T);
  model.zero_grad();
  model.backward();
  std::vector<LayerAttentionStats> stats = attention_statistics(model);
  model.zero_grad();
  return stats;
}

std::string attention_stats_empty_cells(int n_layer) { return std::string((size_t)n_layer * kColumns, ','); }

std::string measure_attention_cells(GPT& model, const int* x, const int* y, int B, int T) {
  return attention_stats_cells(measure_attention(model, x, y, B, T));
}
