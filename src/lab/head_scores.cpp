#include "lab/head_scores.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <complex>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "model/mixer_lab.h"
#include "base/read_file.h"
#include "model/model.h"
#include "base/rng.h"

extern "C" void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda, double* wr,
                       double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr, double* work,
                       const int* lwork, int* info);

void score_pattern(HeadScores& s, const float* P, const int* tokens, int T, const AttentionMask& mask) {
  for (int i = 0; i < T; i++) {
    const float* row = P + (size_t)i * T;
    const KeyRange K = mask.keys_for(i, T);
    const int visible = K.end - K.begin;
    if (i >= 1 && mask.allows(i, i - 1, T)) s.previous_token.add(row[i - 1]);
    if (tokens) {
      double dup = 0, ind = 0;
      bool has_dup = false, has_ind = false;
      for (int j = std::max(0, K.begin); j < std::min(i, K.end); j++) {
        if (tokens[j] == tokens[i]) dup += row[j], has_dup = true;
        if (j >= 1 && tokens[j - 1] == tokens[i]) ind += row[j], has_ind = true;
      }
      if (has_dup) s.duplicate_token.add(dup);
      if (has_ind) s.induction.add(ind);
    }
    if (visible < 2) continue;
    double distance = 0, entropy = 0, best = 0;
    for (int j = K.begin; j < K.end; j++) {
      const double p = row[j];
      distance += p * std::abs(i - j);
      if (p > 0) entropy -= p * std::log(p);
      best = std::max(best, p);
    }
    s.sink.add(K.begin == 0 ? row[0] : 0.0);
    s.distance.add(distance);
    s.entropy.add(entropy);
    s.entropy_norm.add(entropy / std::log((double)visible));
    s.confidence.add(best);
  }
}

double previous_token_score(const float* P, int T, const AttentionMask& mask) {
  HeadScores s;
  score_pattern(s, P, nullptr, T, mask);
  return s.previous_token.value();
}
double duplicate_token_score(const float* P, const int* tokens, int T, const AttentionMask& mask) {
  HeadScores s;
  score_pattern(s, P, tokens, T, mask);
  return s.duplicate_token.value();
}
double induction_score(const float* P, const int* tokens, int T, const AttentionMask& mask) {
  HeadScores s;
  score_pattern(s, P, tokens, T, mask);
  return s.induction.value();
}

std::vector<int> repeated_random_sequences(int B, int n, int vocab, Rng& rng) {
  if (n < 1 || n > vocab) throw std::runtime_error("repeated_random_sequences: need 1 ≤ n ≤ vocab");
  std::vector<int> out((size_t)B * 2 * n), ids(vocab);
  for (int b = 0; b < B; b++) {
    for (int v = 0; v < vocab; v++) ids[v] = v;
    for (int k = 0; k < n; k++) std::swap(ids[k], ids[k + rng.below(vocab - k)]);  // partial Fisher–Yates
    for (int k = 0; k < n; k++) out[(size_t)b * 2 * n + k] = out[(size_t)b * 2 * n + n + k] = ids[k];
  }
  return out;
}

double ov_copying_score(const GPT& model, int layer, int head) {
  const int C = model.config.n_embd, HS = model.config.head_size(), V = model.config.vocab_size;
  const BlockParams& p = model.params().h[layer];
  const MixerLab::QKVWeights w = model.mixer(layer).lab().qkv_weights(p.mixer);
  if (!w.qkv) return std::nan("");  // a mixer without values and an output projection has no OV circuit
  // G = diag(γ_f)·W_Eᵀ·W_E·diag(γ₁)  (C × C)
  std::vector<double> gram((size_t)C * C, 0.0);
  for (int v = 0; v < V; v++) {
    const float* e = model.params().wte + (size_t)v * C;
    for (int a = 0; a < C; a++)
      for (int b = 0; b < C; b++) gram[(size_t)a * C + b] += (double)e[a] * e[b];
  }
  for (int a = 0; a < C; a++)
    for (int b = 0; b < C; b++) gram[(size_t)a * C + b] *= (double)model.params().ln_f_w[a] * p.ln_1_w[b];
  // A = W_O^h (HS × C) · G · W_V^h (C × HS); W_V^h = qkv_w[:, 2C + h·HS …], W_O^h = proj_w[h·HS …, :].
  std::vector<double> GV((size_t)C * HS, 0.0), A((size_t)HS * HS, 0.0);
  for (int a = 0; a < C; a++)
    for (int c = 0; c < C; c++) {
      const double g = gram[(size_t)a * C + c];
      const float* wv = w.qkv + (size_t)c * 3 * C + 2 * C + head * HS;
      for (int d = 0; d < HS; d++) GV[(size_t)a * HS + d] += g * wv[d];
    }
  for (int r = 0; r < HS; r++) {
    const float* wo = w.proj + (size_t)(head * HS + r) * C;
    for (int a = 0; a < C; a++)
      for (int d = 0; d < HS; d++) A[(size_t)r * HS + d] += (double)wo[a] * GV[(size_t)a * HS + d];
  }
  // Eigenvalues of A (LAPACK is column-major: it sees Aᵀ, which has the same eigenvalues).
  std::vector<double> wr(HS), wi(HS), work(8 * HS + 64);
  int n = HS, lda = HS, one = 1, lwork = (int)work.size(), info = 0;
  double dummy = 0;
  dgeev_("N", "N", &n, A.data(), &lda, wr.data(), wi.data(), &dummy, &one, &dummy, &one, work.data(), &lwork, &info);
  if (info != 0) return std::nan("");
  double re = 0, mag = 0;
  for (int k = 0; k < HS; k++) re += wr[k], mag += std::abs(std::complex<double>(wr[k], wi[k]));
  return mag > 0 ? re / mag : 0.0;
}

std::vector<HeadScores> score_heads(GPT& model, int vocab, int B, uint64_t seed) {
  const int L = model.config.n_layer, NH = model.config.n_head;
  const int n = std::min(model.config.block_size, 2 * vocab) / 2;
  if (n < 2) throw std::runtime_error("score_heads: need block_size ≥ 4 and at least 2 characters");
  const int T = 2 * n;
  Rng rng(seed);
  std::vector<int> x = repeated_random_sequences(B, n, vocab, rng);
  model.forward(x.data(), nullptr, B, T);
  std::vector<HeadScores> scores((size_t)L * NH);
  for (int l = 0; l < L; l++) {
    const float* probs = model.mixing_weights(l);
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        score_pattern(scores[(size_t)l * NH + h], probs + ((size_t)b * NH + h) * T * T, &x[(size_t)b * T], T,
                      model.masks()[l]);
  }
  for (int l = 0; l < L; l++) {
    const MixerLab& lab = model.mixer(l).lab();
    const bool has_ov = lab.qkv_weights(model.params().h[l].mixer).qkv != nullptr;
    for (int h = 0; h < NH; h++) {
      HeadScores& s = scores[(size_t)l * NH + h];
      s.has_ov = has_ov;
      s.probabilities = lab.weights_are_probabilities();
      s.ov_copying = ov_copying_score(model, l, h);  // NaN without an OV circuit
    }
  }
  return scores;
}

long tsv_whole_number(const std::vector<std::string>& cells, size_t column, const char* name, long lowest) {
  const std::string& text = cells.at(column);
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(begin, &end, 10);
  // strtol would skip leading blanks and take a '+': the cell must start as the number does.
  const bool starts_as_number = !text.empty() && (std::isdigit((unsigned char)text[0]) || text[0] == '-');
  if (!starts_as_number || end != begin + text.size() || errno == ERANGE || value < lowest)
    throw std::runtime_error("column " + std::to_string(column + 1) + " (" + name + "): expected a whole number ≥ " +
                             std::to_string(lowest) + ", got '" + text + "'");
  return value;
}

std::vector<PronounNote> read_pronoun_notes(const std::string& path) {
  std::vector<PronounNote> notes;
  for_each_tsv_row(path, "pronoun table", 6, [&](const std::vector<std::string>& c) {
    PronounNote n;
    n.pronoun_offset = tsv_whole_number(c, 0, "pronoun_offset", 0);
    n.pronoun_length = tsv_whole_number(c, 1, "pronoun_length", 1);
    n.pronoun = c[2];
    n.antecedent_offset = tsv_whole_number(c, 3, "antecedent_offset", 0);
    n.antecedent_length = tsv_whole_number(c, 4, "antecedent_length", 1);
    n.antecedent = c[5];
    notes.push_back(n);
  });
  return notes;
}

int score_pronouns(GPT& model, const std::vector<int>& text, const std::vector<PronounNote>& notes,
                   std::vector<HeadScores>& scores, int max_notes) {
  const int T = model.config.block_size, L = model.config.n_layer, NH = model.config.n_head;
  // Usable notes: the antecedent fits in the window that ends at the pronoun's last character.
  std::vector<const PronounNote*> usable;
  for (const PronounNote& n : notes) {
    const long query = n.pronoun_offset + n.pronoun_length - 1;
    if (query >= (long)text.size() || n.antecedent_offset < std::max(0L, query - T + 1)) continue;
    usable.push_back(&n);
    if ((int)usable.size() >= max_notes) break;
  }
  // Names seen by the windows: every annotated antecedent span (sorted by offset for the range scan below).
  std::vector<const PronounNote*> names;
  for (const PronounNote& n : notes) names.push_back(&n);
  std::sort(names.begin(), names.end(), [](auto a, auto b) { return a->antecedent_offset < b->antecedent_offset; });
  const int B = 16;
  std::vector<int> x((size_t)B * T);
  for (size_t first = 0; first < usable.size(); first += B) {
    const int nb = (int)std::min<size_t>(B, usable.size() - first);
    std::vector<long> starts(nb);
    for (int b = 0; b < nb; b++) {
      const PronounNote& n = *usable[first + b];
      const long query = n.pronoun_offset + n.pronoun_length - 1;
      starts[b] = std::max(0L, std::min(query - T + 1, (long)text.size() - T));
      std::copy(text.begin() + starts[b], text.begin() + starts[b] + T, x.begin() + (size_t)b * T);
    }
    model.forward(x.data(), nullptr, nb, T);
    for (int l = 0; l < L; l++) {
      const float* probs = model.mixing_weights(l);
      for (int b = 0; b < nb; b++) {
        const PronounNote& n = *usable[first + b];
        const long start = starts[b];
        const int q = (int)(n.pronoun_offset + n.pronoun_length - 1 - start);
        // Other names: distinct spans, other text, wholly before the query.
        std::vector<std::pair<long, long>> others;
        auto it = std::lower_bound(names.begin(), names.end(), start,
                                   [](const PronounNote* a, long s) { return a->antecedent_offset < s; });
        for (; it != names.end() && (*it)->antecedent_offset + (*it)->antecedent_length <= start + q; ++it) {
          if ((*it)->antecedent == n.antecedent) continue;
          std::pair<long, long> span{(*it)->antecedent_offset, (*it)->antecedent_length};
          if (std::find(others.begin(), others.end(), span) == others.end()) others.push_back(span);
        }
        for (int h = 0; h < NH; h++) {
          const float* row = probs + (((size_t)b * NH + h) * T + q) * T;
          auto mass = [&](long offset, long length) {
            double m = 0;
            for (long k = offset; k < offset + length; k++) m += row[k - start];
            return m;
          };
          HeadScores& s = scores[(size_t)l * NH + h];
          s.pronoun.add(mass(n.antecedent_offset, n.antecedent_length));
          if (!others.empty()) {
            double m = 0;
            for (auto& [o, len] : others) m += mass(o, len);
            s.pronoun_baseline.add(m / others.size());
          }
        }
      }
    }
  }
  return (int)usable.size();
}

static const char* kColumns[] = {"layer", "head",     "prev_token", "duplicate", "induction", "sink",
                                 "distance", "entropy", "entropy_norm", "confidence", "ov_copying",
                                 "pronoun", "pronoun_baseline"};

// The row's values in kColumns' order from prev_token on; NaN where a score does not apply to the head's layer.
static std::vector<double> row_values(const HeadScores& s) {
  const double na = std::nan("");
  const auto if_distribution = [&](const Mean& m) { return s.probabilities ? m.value() : na; };
  return {s.previous_token.value(),
          s.duplicate_token.value(),
          s.induction.value(),
          s.sink.value(),
          if_distribution(s.distance),
          if_distribution(s.entropy),
          if_distribution(s.entropy_norm),
          if_distribution(s.confidence),
          s.has_ov ? s.ov_copying : na,
          s.pronoun.count ? s.pronoun.value() : na,
          s.pronoun_baseline.count ? s.pronoun_baseline.value() : na};
}

std::string heads_csv(const std::vector<HeadScores>& scores, int NH) {
  std::string out;
  for (const char* c : kColumns) out += std::string(out.empty() ? "" : ",") + c;
  out += "\n";
  char cell[64];
  for (size_t i = 0; i < scores.size(); i++) {
    out += std::to_string(i / NH) + "," + std::to_string(i % NH);
    for (double v : row_values(scores[i])) {
      if (std::isnan(v)) out += ",";
      else std::snprintf(cell, sizeof cell, ",%.6g", v), out += cell;
    }
    out += "\n";
  }
  return out;
}

// One cell of the table: v in `format`, or "n/a" as wide as the number would be where the score does not apply.
static std::string cell(double v, const char* format, int width) {
  char text[32];
  if (std::isnan(v)) std::snprintf(text, sizeof text, "%-*s", width, "n/a");
  else std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string heads_table(const std::vector<HeadScores>& scores, int NH) {
  std::string out = "head   prev   dup    induct sink   dist   entropy (norm) conf   ov_copy pronoun (base)\n";
  bool no_ov = false;             // some row's ov_copy is n/a
  bool not_distribution = false;  // some row's dist, entropy and conf are n/a
  for (size_t i = 0; i < scores.size(); i++) {
    const std::vector<double> v = row_values(scores[i]);
    char name[48];
    std::snprintf(name, sizeof name, "L%zuH%-3zu ", i / NH, i % NH);
    out += name;
    out += cell(v[0], "%.3f", 5) + "  " + cell(v[1], "%.3f", 5) + "  " + cell(v[2], "%.3f", 5) + "  ";
    out += cell(v[3], "%.3f", 5) + "  " + cell(v[4], "%5.2f", 5) + "  " + cell(v[5], "%.3f", 5) + "  ";
    out += "(" + cell(v[6], "%.2f", 4) + ") " + cell(v[7], "%.3f", 5) + "  " + cell(v[8], "%+.3f", 6) + "  ";
    if (std::isnan(v[9])) out += "  -\n";
    else out += cell(v[9], "%.3f", 5) + " (" + cell(v[10], "%.3f", 5) + ")\n";
    no_ov = no_ov || !scores[i].has_ov;
    not_distribution = not_distribution || !scores[i].probabilities;
  }
  if (no_ov) out += "n/a ov_copy: the layer's mixer has no values and output projection per head (no OV circuit)\n";
  if (not_distribution)
    out += "n/a dist, entropy, conf: the layer's weights are signed and unnormalised (a recurrence's implied "
           "weights), not a distribution\n";
  return out;
}
