#include "lab/pronouns.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "lab/head_scores.h"
#include "lab/pruning.h"
#include "model/model.h"

// ---------------------------------------------------------------------------------------------- cases
std::vector<NameMention> read_name_mentions(const std::string& path) {
  std::vector<NameMention> out;
  for_each_tsv_row(path, "name-mention table", 4, [&](const std::vector<std::string>& c) {
    out.push_back({tsv_whole_number(c, 0, "offset", 0), tsv_whole_number(c, 1, "length", 1), c[2], c[3]});
  });
  std::sort(out.begin(), out.end(), [](const NameMention& a, const NameMention& b) { return a.offset < b.offset; });
  return out;
}

double PronounCase::random_accuracy() const {
  long right = 0;
  for (const Candidate& c : candidates) right += c.correct;
  return candidates.empty() ? 0.0 : (double)right / candidates.size();
}

std::vector<long> story_starts(const std::u32string& text) {
  std::vector<long> starts{0};
  for (size_t i = 1; i < text.size(); i++)
    if (text[i - 1] == U'\n' && i >= 2 && text[i - 2] == U'\n') starts.push_back((long)i);
  return starts;
}

std::vector<PronounCase> build_cases(const std::vector<PronounNote>& notes, const std::vector<NameMention>& mentions,
                                     const std::vector<long>& starts, long text_size, int T, long from, long to) {
  if (to < 0) to = text_size;
  std::map<long, const NameMention*> at;  // offset → mention
  for (const NameMention& m : mentions) at[m.offset] = &m;
  std::vector<PronounCase> cases;
  for (const PronounNote& n : notes) {
    if (n.pronoun_offset < from || n.pronoun_offset >= to || n.pronoun_offset < 1) continue;
    auto ante = at.find(n.antecedent_offset);
    if (ante == at.end()) continue;  // "it" → a thing, or a place: not about people
    const long last = n.pronoun_offset + n.pronoun_length - 1;  // the window ends at the pronoun's last character
    if (last >= text_size) continue;
    const long window_start = std::max(0L, std::min(last - T + 1, text_size - T));
    const long story = *(std::upper_bound(starts.begin(), starts.end(), n.pronoun_offset) - 1);
    PronounCase c;
    c.pronoun_offset = n.pronoun_offset, c.pronoun_length = n.pronoun_length;
    c.pronoun = n.pronoun, c.antecedent = ante->second->name, c.window_start = window_start;
    std::set<std::string> names;
    for (auto it = at.lower_bound(std::max(window_start, story)); it != at.end(); ++it) {
      const NameMention& m = *it->second;
      if (m.offset + m.length > n.pronoun_offset) break;
      c.candidates.push_back({m.offset, m.length, m.name == c.antecedent});
      names.insert(m.name);
    }
    if (names.size() < 2 || !names.count(c.antecedent)) continue;
    cases.push_back(std::move(c));
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------- one row
double mention_mass(const float* row, long window_start, const Candidate& c) {
  double m = 0;
  for (long k = c.offset; k < c.offset + c.length; k++) m += row[k - window_start];
  return m;
}

int choose_candidate(const float* row, long window_start, const std::vector<Candidate>& candidates) {
  int best = -1;
  double best_mass = -1;
  for (size_t i = 0; i < candidates.size(); i++) {
    const double m = mention_mass(row, window_start, candidates[i]);
    if (m > best_mass) best = (int)i, best_mass = m;  // strict: a tie keeps the earlier mention
  }
  return best;
}

void antecedent_masses(const float* row, long window_start, const std::vector<Candidate>& candidates,
                       double* antecedent, double* other) {
  double right = 0, wrong = 0;
  int n_wrong = 0;
  for (const Candidate& c : candidates) {
    const double m = mention_mass(row, window_start, c);
    if (c.correct) right += m;
    else wrong += m, n_wrong++;
  }
  *antecedent = right;
  *other = n_wrong ? wrong / n_wrong : 0.0;
}

// ---------------------------------------------------------------------------------------------- a model
std::vector<float> position_losses(const float* logits, const int* targets, int n, int V) {
  std::vector<float> out(n);
  for (int i = 0; i < n; i++) {
    const float* z = logits + (size_t)i * V;
    double mx = z[0];
    for (int v = 1; v < V; v++) mx = std::max(mx, (double)z[v]);
    double sum = 0;
    for (int v = 0; v < V; v++) sum += std::exp((double)z[v] - mx);
    out[i] = (float)(std::log(sum) + mx - z[targets[i]]);
  }
  return out;
}

void set_heads_off(GPT& model, const std::vector<int>& off) {
  std::vector<float> gates((size_t)model.config.n_layer * model.config.n_head, 1.0f);
  for (int h : off) {
    if (h < 0 || h >= (int)gates.size()) throw std::runtime_error("set_heads_off: no head " + std::to_string(h));
    gates[h] = 0.0f;
  }
  model.set_head_gates(gates);  // all at once: a bad index above leaves the model's gates as they were
}

namespace {
// Runs the cases' windows in batches; `visit(first, nb, x, y)` after each forward (y[b·T + t] = x's next char).
void for_each_batch(GPT& model, const std::vector<int>& tokens, const std::vector<PronounCase>& cases,
                    const std::function<void(size_t, int, const std::vector<int>&, const std::vector<int>&)>& visit) {
  const int T = model.config.block_size, B = 16;
  if ((long)tokens.size() < T + 1) throw std::runtime_error("pronoun cases: the text is shorter than one window");
  std::vector<int> x((size_t)B * T), y((size_t)B * T);
  for (size_t first = 0; first < cases.size(); first += B) {
    const int nb = (int)std::min<size_t>(B, cases.size() - first);
    for (int b = 0; b < nb; b++) {
      const long s = cases[first + b].window_start;
      for (int t = 0; t < T; t++) {
        x[(size_t)b * T + t] = tokens[s + t];
        y[(size_t)b * T + t] = s + t + 1 < (long)tokens.size() ? tokens[s + t + 1] : tokens[s + t];
      }
    }
    model.forward(x.data(), nullptr, nb, T);
    visit(first, nb, x, y);
  }
}

// Loss at the character before the pronoun (its first character's prediction), and the mean loss over the
// window's positions whose target is not a pronoun character (and is inside the text).
void window_losses(const std::vector<float>& loss, const PronounCase& c, const std::vector<unsigned char>& pronoun_chars,
                   long text_size, int T, float* first, float* other) {
  *first = loss[c.pronoun_offset - 1 - c.window_start];
  double sum = 0;
  int n = 0;
  for (int t = 0; t < T; t++) {
    const long target = c.window_start + t + 1;
    if (target >= text_size) continue;
    if (!pronoun_chars.empty() && pronoun_chars[target]) continue;
    if (target >= c.pronoun_offset && target < c.pronoun_offset + c.pronoun_length) continue;
    sum += loss[t], n++;
  }
  *other = n ? (float)(sum / n) : NAN;
}
}  // namespace

ResolutionScores empty_scores(int n_heads, int n_cases) {
  ResolutionScores r;
  r.n_heads = n_heads, r.n_cases = n_cases;
  for (int q = 0; q < 2; q++) {
    r.correct[q].assign((size_t)n_heads * n_cases, 0);
    r.chose_nearest[q].assign((size_t)n_heads * n_cases, 0);
    r.antecedent_mass[q].assign((size_t)n_heads * n_cases, 0);
    r.other_mass[q].assign((size_t)n_heads * n_cases, 0);
  }
  r.first_char_loss.assign(n_cases, 0), r.other_loss.assign(n_cases, 0), r.rival_margin.assign(n_cases, NAN);
  return r;
}

void score_case(ResolutionScores& r, int head, int i, const PronounCase& c, const float* row_own,
                const float* row_before) {
  const float* rows[2] = {row_own, row_before};
  const size_t at = (size_t)head * r.n_cases + i;
  for (int q = 0; q < 2; q++) {
    const int chosen = choose_candidate(rows[q], c.window_start, c.candidates);
    r.correct[q][at] = c.candidates[chosen].correct;
    r.chose_nearest[q][at] = chosen == (int)c.candidates.size() - 1;
    double a, o;
    antecedent_masses(rows[q], c.window_start, c.candidates, &a, &o);
    r.antecedent_mass[q][at] = (float)a, r.other_mass[q][at] = (float)o;
  }
}

ResolutionScores score_resolution(GPT& model, const std::vector<int>& tokens, const std::vector<PronounCase>& cases,
                                  const std::vector<unsigned char>& pronoun_chars, const std::vector<int>& rival) {
  const int T = model.config.block_size, L = model.config.n_layer, NH = model.config.n_head;
  const int V = model.config.vocab_size;
  ResolutionScores r = empty_scores(L * NH, (int)cases.size());
  for_each_batch(model, tokens, cases, [&](size_t first, int nb, const std::vector<int>&, const std::vector<int>& y) {
    std::vector<float> loss = position_losses(model.logits(), y.data(), nb * T, V);
    for (int b = 0; b < nb; b++) {
      const PronounCase& c = cases[first + b];
      std::vector<float> window(loss.begin() + (size_t)b * T, loss.begin() + (size_t)(b + 1) * T);
      window_losses(window, c, pronoun_chars, (long)tokens.size(), T, &r.first_char_loss[first + b],
                    &r.other_loss[first + b]);
      const long before = c.pronoun_offset - 1 - c.window_start;
      const int right = y[(size_t)b * T + before];
      const int other = right < (int)rival.size() ? rival[right] : -1;
      if (other >= 0) {  // the logits' difference is the difference of the log-probabilities
        const float* z = model.logits() + ((size_t)b * T + before) * V;
        r.rival_margin[first + b] = z[right] - z[other];
      }
    }
    for (int l = 0; l < L; l++) {
      const float* P = model.mixing_weights(l);
      for (int b = 0; b < nb; b++) {
        const PronounCase& c = cases[first + b];
        const long own = c.pronoun_offset + c.pronoun_length - 1 - c.window_start;
        const long before = c.pronoun_offset - 1 - c.window_start;
        for (int h = 0; h < NH; h++) {
          const float* head = P + ((size_t)b * NH + h) * T * T;
          score_case(r, l * NH + h, (int)(first + b), c, head + own * T, head + before * T);
        }
      }
    }
  });
  return r;
}

LossPair case_losses(GPT& model, const std::vector<int>& tokens, const std::vector<PronounCase>& cases,
                     const std::vector<unsigned char>& pronoun_chars) {
  const int T = model.config.block_size, V = model.config.vocab_size;
  LossPair out;
  out.pronoun.assign(cases.size(), 0), out.other.assign(cases.size(), 0);
  for_each_batch(model, tokens, cases, [&](size_t first, int nb, const std::vector<int>&, const std::vector<int>& y) {
    std::vector<float> loss = position_losses(model.logits(), y.data(), nb * T, V);
    for (int b = 0; b < nb; b++) {
      std::vector<float> window(loss.begin() + (size_t)b * T, loss.begin() + (size_t)(b + 1) * T);
      window_losses(window, cases[first + b], pronoun_chars, (long)tokens.size(), T, &out.pronoun[first + b],
                    &out.other[first + b]);
    }
  });
  return out;
}

// ---------------------------------------------------------------------------------------------- intervals
namespace {
// splitmix64: a fixed, portable stream, so an interval is the same on every machine.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};
double quantile(std::vector<double>& v, double p) {  // linear interpolation between order statistics
  std::sort(v.begin(), v.end());
  const double pos = p * (v.size() - 1);
  const size_t i = (size_t)pos;
  return i + 1 < v.size() ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
}
}  // namespace

Interval bootstrap(int n, const std::function<double(const std::vector<int>&)>& statistic, int resamples,
                   uint64_t seed, double level) {
  if (n <= 0) return {NAN, NAN, NAN};
  std::vector<int> idx(n);
  for (int i = 0; i < n; i++) idx[i] = i;
  Interval out;
  out.value = statistic(idx);
  SplitMix rng{seed ^ 0x5851F42D4C957F2DULL};
  std::vector<double> stats(resamples);
  for (int r = 0; r < resamples; r++) {
    for (int i = 0; i < n; i++) idx[i] = (int)(rng.next() % (uint64_t)n);
    stats[r] = statistic(idx);
  }
  out.lo = quantile(stats, (1 - level) / 2), out.hi = quantile(stats, (1 + level) / 2);
  return out;
}

Interval bootstrap_mean(const std::vector<double>& x, int resamples, uint64_t seed, double level) {
  return bootstrap(
      (int)x.size(),
      [&](const std::vector<int>& idx) {
        double s = 0;
        for (int i : idx) s += x[i];
        return s / idx.size();
      },
      resamples, seed, level);
}

Interval bootstrap_ratio(const std::vector<double>& sums, const std::vector<double>& counts, int resamples,
                         uint64_t seed, double level) {
  return bootstrap(
      (int)sums.size(),
      [&](const std::vector<int>& idx) {
        double s = 0, c = 0;
        for (int i : idx) s += sums[i], c += counts[i];
        return c > 0 ? s / c : NAN;
      },
      resamples, seed, level);
}

SplitStat split_mean(const std::vector<PronounCase>& cases, const std::function<double(int)>& value, int resamples,
                     uint64_t seed, double level) {
  std::vector<double> all, nearest, not_nearest;
  for (int i = 0; i < (int)cases.size(); i++) {
    const double v = value(i);
    all.push_back(v);
    (cases[i].nearest_correct() ? nearest : not_nearest).push_back(v);
  }
  SplitStat s;
  s.all = bootstrap_mean(all, resamples, seed, level);
  s.nearest = bootstrap_mean(nearest, resamples, seed + 1, level);
  s.not_nearest = bootstrap_mean(not_nearest, resamples, seed + 2, level);
  s.n_all = (int)all.size(), s.n_nearest = (int)nearest.size(), s.n_not_nearest = (int)not_nearest.size();
  return s;
}

std::string format_interval(const Interval& i, int decimals) {
  if (std::isnan(i.value)) return "-";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.*f [%.*f, %.*f]", decimals, i.value, decimals, i.lo, decimals, i.hi);
  return buf;
}

ResolutionTable resolution_table(const std::vector<PronounCase>& cases, const ResolutionScores& r, int NH,
                                 int resamples) {
  ResolutionTable t;
  SplitStat nearest = split_mean(cases, [&](int i) { return (double)cases[i].nearest_correct(); }, resamples, 1);
  SplitStat random = split_mean(cases, [&](int i) { return cases[i].random_accuracy(); }, resamples, 1);
  t.random_not_nearest = random.not_nearest.value;
  char line[512];
  std::snprintf(line, sizeof line,
                "%d cases: %d where the antecedent is the nearest name, %d where it is not.\n\n"
                "| head | before: all | before: nearest | before: not nearest | own: all | own: nearest | "
                "own: not nearest | own: antecedent mass | own: other-name mass |\n"
                "|---|---|---|---|---|---|---|---|---|\n",
                nearest.n_all, nearest.n_nearest, nearest.n_not_nearest);
  t.markdown = line;
  auto row = [&](const std::string& name, const SplitStat& b, const SplitStat& o, const std::string& extra) {
    t.markdown += "| " + name + " | " + format_interval(b.all) + " | " + format_interval(b.nearest) + " | " +
                  format_interval(b.not_nearest) + " | " + format_interval(o.all) + " | " +
                  format_interval(o.nearest) + " | " + format_interval(o.not_nearest) + " | " + extra + " |\n";
  };
  row("nearest name", nearest, nearest, " | ");
  row("random candidate", random, random, " | ");
  for (int q = 0; q < 2; q++) t.not_nearest[q].assign(r.n_heads, NAN);
  for (int h = 0; h < r.n_heads; h++) {
    auto per_case = [&](const std::vector<unsigned char>& v) {
      return [&v, &r, h](int i) { return (double)v[(size_t)h * r.n_cases + i]; };
    };
    auto per_case_f = [&](const std::vector<float>& v) {
      return [&v, &r, h](int i) { return (double)v[(size_t)h * r.n_cases + i]; };
    };
    SplitStat b = split_mean(cases, per_case(r.correct[kBefore]), resamples, 10 + 4 * h);
    SplitStat o = split_mean(cases, per_case(r.correct[kOwn]), resamples, 11 + 4 * h);
    SplitStat am = split_mean(cases, per_case_f(r.antecedent_mass[kOwn]), resamples, 12 + 4 * h);
    SplitStat om = split_mean(cases, per_case_f(r.other_mass[kOwn]), resamples, 13 + 4 * h);
    row(head_name(h, NH), b, o, format_interval(am.all) + " | " + format_interval(om.all));
    t.not_nearest[kBefore][h] = b.not_nearest.value, t.not_nearest[kOwn][h] = o.not_nearest.value;
  }
  return t;
}
