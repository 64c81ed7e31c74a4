// ./pronouns — do any heads resolve pronouns? The test src/lab/pronouns.h describes, on trained checkpoints:
// antecedent accuracy per head against the nearest-name and random baselines, split by whether the antecedent is
// the nearest name; at the pronoun and just before it; the loss on the pronoun's first character; and ablations
// of the best pronoun heads against random heads and recency heads. Intervals: percentile bootstrap over cases.
//   make pronouns-lab        (trains or reuses the models, writes docs/pronouns_tables.md and docs/pronouns_*.svg)
//   build/bin/pronouns --group tiny=out/tiny,out/pronouns/tiny-seed1338 --group long=out/pronouns/long-seed1337
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <map>
#include <numeric>

#include "base/program_flags.h"
#include "base/rng.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "data/dataset.h"
#include "data/utf8.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "lab/head_scores.h"
#include "lab/plot.h"
#include "lab/pronouns.h"
#include "lab/pruning.h"
#include "model/model.h"
#include "train/trainer.h"

namespace {

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

// A text with its annotations: the corpus (validation split for the numbers, training split to choose heads) or
// the probe set.
struct Annotated {
  std::string path;
  std::u32string text;
  std::vector<PronounNote> notes;
  std::vector<NameMention> mentions;
  std::vector<unsigned char> pronoun_chars;
};

Annotated load_annotated(const std::string& text_path, const std::string& notes_path, const std::string& names_path) {
  Annotated a;
  a.path = text_path;
  a.text = read_text_file(text_path);
  a.notes = read_pronoun_notes(notes_path);
  a.mentions = read_name_mentions(names_path);
  a.pronoun_chars.assign(a.text.size(), 0);
  for (const PronounNote& n : a.notes) {
    const std::u32string p = utf8_decode(n.pronoun, notes_path), ante = utf8_decode(n.antecedent, notes_path);
    if (n.pronoun_offset + (long)p.size() > (long)a.text.size() || a.text.compare(n.pronoun_offset, p.size(), p) != 0 ||
        a.text.compare(n.antecedent_offset, ante.size(), ante) != 0)
      throw std::runtime_error(notes_path + ": pronoun '" + n.pronoun + "' at offset " +
                               std::to_string(n.pronoun_offset) + " does not match " + text_path +
                               " (rebuild the tables with make_stories)");
    for (long k = n.pronoun_offset; k < n.pronoun_offset + (long)p.size(); k++) a.pronoun_chars[k] = 1;
  }
  for (const NameMention& m : a.mentions) {
    const std::u32string name = utf8_decode(m.name, names_path);
    if (m.offset + (long)name.size() > (long)a.text.size() || a.text.compare(m.offset, name.size(), name) != 0)
      throw std::runtime_error(names_path + ": name '" + m.name + "' at offset " + std::to_string(m.offset) +
                               " does not match " + text_path);
  }
  return a;
}

struct Sets {
  std::vector<PronounCase> val, probes;  // val: every corpus case (both splits)
  std::vector<int> select;                // indices into val of the training split's cases: to choose heads
  std::vector<PronounCase> ablate[2];     // a spread-out subset of val and of probes for the ablations
};

// What one model did on one case set.
struct ModelRun {
  std::string group, path;
  int steps = 0;
  uint64_t seed = 0;
  int L = 0, NH = 0;
  ResolutionScores val, probes;
  std::vector<int> pronoun_heads, nearest_heads;
  // ablation: per set (0 val, 1 probes), per condition: Δ first-char loss and Δ other-char loss per case
  std::map<std::string, LossPair> ablated[2];
  LossPair base[2];
};

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return v.empty() ? NAN : s / v.size();
}

// Per head: accuracy at query q on the cases (0/1 values).
std::function<double(int)> head_correct(const ResolutionScores& r, int q, int h) {
  return [&r, q, h](int i) { return (double)r.correct[q][(size_t)h * r.n_cases + i]; };
}

// The k heads with the largest score (ties: lower index).
std::vector<int> top_k(const std::vector<double>& score, int k) {
  std::vector<int> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score[a] > score[b]; });
  idx.resize(std::min<size_t>(k, idx.size()));
  return idx;
}

std::string head_list(const std::vector<int>& heads, int NH) {
  std::string s;
  for (int h : heads) s += (s.empty() ? "" : " ") + head_name(h, NH);
  return s;
}

// Mean of the per-case difference ablated − base, with its interval.
Interval delta(const std::vector<float>& after, const std::vector<float>& before, int resamples, uint64_t seed) {
  std::vector<double> d(after.size());
  for (size_t i = 0; i < d.size(); i++) d[i] = (double)after[i] - before[i];
  return bootstrap_mean(d, resamples, seed);
}

}  // namespace

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("pronouns", "Pronoun heads tested against a nearest-name baseline, with ablations.");
  // clang-format off
  options.add_options()
    ("group", "NAME=ckpt[,ckpt…]: one group of models (seeds of one recipe); repeat for more groups",
     cxxopts::value<std::vector<std::string>>())
    ("expect", "NAME=steps: every checkpoint of group NAME must have been trained for that many steps",
     cxxopts::value<std::vector<std::string>>())
    ("data", "the training corpus", cxxopts::value<std::string>()->default_value("data/stories.txt"))
    ("antecedents", "make_stories --antecedents table of --data", cxxopts::value<std::string>()->default_value("build/pronouns.tsv"))
    ("mentions", "make_stories --mentions table of --data", cxxopts::value<std::string>()->default_value("build/names.tsv"))
    ("probes", "make_stories --probes text", cxxopts::value<std::string>()->default_value("build/probes.txt"))
    ("probe-antecedents", "its --antecedents table", cxxopts::value<std::string>()->default_value("build/probes.tsv"))
    ("probe-mentions", "its --mentions table", cxxopts::value<std::string>()->default_value("build/probe_names.tsv"))
    ("ablate", "heads removed per ablation", cxxopts::value<int>()->default_value("2"))
    ("random-sets", "random head sets to ablate as the control", cxxopts::value<int>()->default_value("4"))
    ("ablation-cases", "at most this many corpus cases and probes per ablation", cxxopts::value<int>()->default_value("400"))
    ("resamples", "bootstrap resamples", cxxopts::value<int>()->default_value("1000"))
    ("out", "markdown tables", cxxopts::value<std::string>()->default_value("docs/pronouns_tables.md"))
    ("plot", "SVG plot", cxxopts::value<std::string>()->default_value("docs/pronouns_accuracy.svg"))
    ("threads", "threads (0 = all cores)", cxxopts::value<int>()->default_value("0"));
  // clang-format on
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& flags = *parsed;
    if (!flags.count("group")) throw std::runtime_error("give at least one --group NAME=ckpt[,ckpt…]");
    const int threads = flags["threads"].as<int>();
    set_threads(threads > 0 ? threads : default_threads());
    const int resamples = flags["resamples"].as<int>(), k = flags["ablate"].as<int>();

    Annotated corpus = load_annotated(flags["data"].as<std::string>(), flags["antecedents"].as<std::string>(),
                                      flags["mentions"].as<std::string>());
    Annotated probes = load_annotated(flags["probes"].as<std::string>(), flags["probe-antecedents"].as<std::string>(),
                                      flags["probe-mentions"].as<std::string>());

    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    // cxxopts splits a vector flag's value at commas: "tiny=a,b" arrives as "tiny=a", "b"; join them back.
    std::vector<std::string> group_flags;
    for (const std::string& g : flags["group"].as<std::vector<std::string>>())
      if (g.find('=') == std::string::npos && !group_flags.empty()) group_flags.back() += "," + g;
      else group_flags.push_back(g);
    for (const std::string& g : group_flags) {
      const size_t eq = g.find('=');
      if (eq == std::string::npos || eq == 0) throw std::runtime_error("--group '" + g + "': expected NAME=ckpt[,ckpt…]");
      std::vector<std::string> paths;
      std::string rest = g.substr(eq + 1);
      for (size_t at = 0; at <= rest.size();) {
        size_t comma = rest.find(',', at);
        if (comma == std::string::npos) comma = rest.size();
        if (comma > at) paths.push_back(rest.substr(at, comma - at));
        at = comma + 1;
      }
      if (paths.empty()) throw std::runtime_error("--group '" + g + "': no checkpoints");
      groups.push_back({g.substr(0, eq), paths});
    }

    std::map<std::string, int> expect;
    if (flags.count("expect"))
      for (const std::string& e : flags["expect"].as<std::vector<std::string>>()) {
        const size_t eq = e.find('=');
        if (eq == std::string::npos) throw std::runtime_error("--expect '" + e + "': expected NAME=steps");
        expect[e.substr(0, eq)] = std::stoi(e.substr(eq + 1));
      }

    std::vector<ModelRun> runs;
    std::map<int, Sets> sets_by_T;
    for (auto& [group, paths] : groups)
      for (const std::string& path : paths) {
        Checkpoint ckpt = load_checkpoint(resolve_checkpoint(path));
        GPT& model = *ckpt.model;
        const int T = model.config.block_size;
        ModelRun run;
        run.group = group, run.path = path, run.L = model.config.n_layer, run.NH = model.config.n_head;
        if (ckpt.resumable) {
          TrainConfig tc = train_config_from_json(ckpt.resume.train_config, path, nullptr, &ckpt.model->config);
          run.steps = ckpt.resume.step, run.seed = tc.seed;
        }
        if (expect.count(group) && run.steps != expect[group])
          throw std::runtime_error(path + " was trained for " + std::to_string(run.steps) + " steps, but group '" +
                                   group + "' expects " + std::to_string(expect[group]) +
                                   " (delete it to retrain, or point --group elsewhere)");
        if (!sets_by_T.count(T)) {
          Sets s;
          const long n = (long)corpus.text.size(), split = (long)(0.9 * n);
          std::vector<long> cs = story_starts(corpus.text), ps = story_starts(probes.text);
          s.val = build_cases(corpus.notes, corpus.mentions, cs, n, T, 0, n);
          s.probes = build_cases(probes.notes, probes.mentions, ps, (long)probes.text.size(), T);
          for (int i = 0; i < (int)s.val.size(); i++)
            if (s.val[i].pronoun_offset + T < split) s.select.push_back(i);
          const size_t want = (size_t)std::max(1, flags["ablation-cases"].as<int>());
          for (int set = 0; set < 2; set++) {
            const std::vector<PronounCase>& all = set == 0 ? s.val : s.probes;
            const double stride = std::max(1.0, (double)all.size() / want);
            for (double i = 0; (size_t)i < all.size() && s.ablate[set].size() < want; i += stride)
              s.ablate[set].push_back(all[(size_t)i]);
          }
          sets_by_T[T] = std::move(s);
        }
        const Sets& s = sets_by_T[T];
        std::vector<int> ctok = ckpt.tokenizer.encode(corpus.text, corpus.path);
        std::vector<int> ptok = ckpt.tokenizer.encode(probes.text, probes.path);
        std::printf("%s: %s (%d steps, seed %llu): %zu corpus cases, %zu probes, %zu cases to choose heads\n",
                    group.c_str(), path.c_str(), run.steps, (unsigned long long)run.seed, s.val.size(),
                    s.probes.size(), s.select.size());
        std::fflush(stdout);
        run.val = score_resolution(model, ctok, s.val, corpus.pronoun_chars);
        // The probes' pronouns are "She"/"He" (or "she"/"he" after "Then"): the first letter decides the gender.
        std::vector<int> rival(ckpt.tokenizer.size(), -1);
        for (auto [a, b] : {std::pair<char32_t, char32_t>{U'S', U'H'}, {U's', U'h'}}) {
          const int ia = ckpt.tokenizer.id_of(a), ib = ckpt.tokenizer.id_of(b);
          if (ia >= 0 && ib >= 0) rival[ia] = ib, rival[ib] = ia;
        }
        run.probes = score_resolution(model, ptok, s.probes, probes.pronoun_chars, rival);
        // Choose the heads on the training split: pronoun heads by accuracy where the antecedent is not the
        // nearest name (best of the two queries), recency heads by how often they choose the nearest name.
        const int H = run.L * run.NH;
        std::vector<double> pron(H), near(H);
        for (int h = 0; h < H; h++)
          for (int q = 0; q < 2; q++) {
            double right = 0, cases_not_nearest = 0, nearest = 0;
            for (int i : s.select) {
              const size_t at = (size_t)h * run.val.n_cases + i;
              if (!s.val[i].nearest_correct()) right += run.val.correct[q][at], cases_not_nearest++;
              nearest += run.val.chose_nearest[q][at];
            }
            pron[h] = std::max(pron[h], right / std::max(1.0, cases_not_nearest));
            near[h] += nearest / std::max<size_t>(1, s.select.size()) / 2;
          }
        run.pronoun_heads = top_k(pron, k);
        run.nearest_heads = top_k(near, k);
        const std::vector<PronounCase>* case_sets[2] = {&s.ablate[0], &s.ablate[1]};
        const std::vector<int>* toks[2] = {&ctok, &ptok};
        const Annotated* texts[2] = {&corpus, &probes};
        Rng rng(7);
        std::vector<std::vector<int>> random_sets;
        for (int r = 0; r < flags["random-sets"].as<int>(); r++) {
          std::vector<int> all(H);
          std::iota(all.begin(), all.end(), 0);
          for (int j = 0; j < k; j++) std::swap(all[j], all[j + rng.below(H - j)]);
          random_sets.emplace_back(all.begin(), all.begin() + k);
        }
        for (int set = 0; set < 2; set++) {
          auto losses = [&](const std::vector<int>& off) {
            set_heads_off(model, off);
            return case_losses(model, *toks[set], *case_sets[set], texts[set]->pronoun_chars);
          };
          run.base[set] = losses({});
          run.ablated[set]["pronoun"] = losses(run.pronoun_heads);
          run.ablated[set]["nearest"] = losses(run.nearest_heads);
          for (size_t r = 0; r < random_sets.size(); r++)
            run.ablated[set]["random" + std::to_string(r)] = losses(random_sets[r]);
        }
        set_heads_off(model, {});
        runs.push_back(std::move(run));
      }

    // ------------------------------------------------------------------------------------------ the tables
    const Sets& s0 = sets_by_T.begin()->second;
    std::string md = "<!-- written by build/bin/pronouns (make pronouns-lab); do not edit by hand -->\n\n";
    char line[1024];
    std::snprintf(line, sizeof line,
                  "Cases: %zu corpus pronouns (both splits: these are attention measurements on text like the "
                  "training text), %zu probes (text the model never saw); pronoun and recency heads for the "
                  "ablations chosen on the %zu cases of the training split. Intervals: 95%% percentile bootstrap over "
                  "cases, %d resamples, seeded.\n\n",
                  s0.val.size(), s0.probes.size(), s0.select.size(), resamples);
    md += line;
    const char* set_names[2] = {"corpus", "probes"};

    // Per-head table for the first model of each group.
    std::map<std::string, bool> shown;
    Chart chart{"Antecedent accuracy per head where the nearest name is wrong (probes)", "head (layer-major index)",
                "accuracy, not-nearest probes", {}};
    for (const ModelRun& run : runs) {
      if (shown[run.group]) continue;
      shown[run.group] = true;
      const Sets& s = sets_by_T.begin()->second;
      for (int set = 0; set < 2; set++) {
        const std::vector<PronounCase>& cases = set == 0 ? s.val : s.probes;
        const ResolutionScores& r = set == 0 ? run.val : run.probes;
        md += "### " + run.group + " (" + run.path + ", " + std::to_string(run.steps) + " steps): heads on the " +
              set_names[set] + "\n\n";
        ResolutionTable t = resolution_table(cases, r, run.NH, resamples);
        md += t.markdown;
        if (set == 1) {
          Series before{run.group + " (before the pronoun)", {}, {}}, own{run.group + " (at the pronoun)", {}, {}};
          for (int h = 0; h < r.n_heads; h++) {
            before.x.push_back(h), before.y.push_back(t.not_nearest[kBefore][h]);
            own.x.push_back(h), own.y.push_back(t.not_nearest[kOwn][h]);
          }
          chart.series.push_back(before), chart.series.push_back(own);
          if (run.group == runs.front().group)
            chart.series.push_back({"random candidate", {0, (double)r.n_heads - 1}, {t.random_not_nearest, t.random_not_nearest}});
        }
        int best[2] = {0, 0};
        for (int q = 0; q < 2; q++)
          for (int h = 0; h < r.n_heads; h++)
            if (t.not_nearest[q][h] > t.not_nearest[q][best[q]]) best[q] = h;
        std::snprintf(line, sizeof line,
                      "\nBest head where the nearest name is wrong (chosen after looking, so optimistic): before the "
                      "pronoun %s, at the pronoun %s. The nearest-name baseline scores 0 there by construction.\n\n",
                      head_name(best[kBefore], run.NH).c_str(), head_name(best[kOwn], run.NH).c_str());
        md += line;
      }
    }

    // Behaviour and ablation, one row per model.
    for (int set = 0; set < 2; set++) {
      const std::vector<PronounCase>& cases = set == 0 ? s0.val : s0.probes;
      md += std::string("### Loss on the pronoun's first character, ") + set_names[set] + "\n\n"
            "| model | steps | seed | first char: all | first char: nearest | first char: not nearest | other "
            "characters | best head, not nearest (before / own) | nearest baseline: all | random: not nearest |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n";
      for (const ModelRun& run : runs) {
        const ResolutionScores& r = set == 0 ? run.val : run.probes;
        SplitStat first = split_mean(cases, [&](int i) { return (double)r.first_char_loss[i]; }, resamples, 3);
        SplitStat other = split_mean(cases, [&](int i) { return (double)r.other_loss[i]; }, resamples, 4);
        SplitStat nearest = split_mean(cases, [&](int i) { return (double)cases[i].nearest_correct(); }, resamples, 1);
        SplitStat random = split_mean(cases, [&](int i) { return cases[i].random_accuracy(); }, resamples, 1);
        double best[2] = {0, 0};
        for (int h = 0; h < r.n_heads; h++)
          for (int q = 0; q < 2; q++)
            best[q] = std::max(best[q], split_mean(cases, head_correct(r, q, h), 1).not_nearest.value);
        std::snprintf(line, sizeof line, "| %s | %d | %llu | %s | %s | %s | %s | %.3f / %.3f | %.3f | %.3f |\n",
                      run.group.c_str(), run.steps, (unsigned long long)run.seed, format_interval(first.all).c_str(),
                      format_interval(first.nearest).c_str(), format_interval(first.not_nearest).c_str(),
                      format_interval(other.all).c_str(), best[kBefore], best[kOwn], nearest.all.value,
                      random.not_nearest.value);
        md += line;
      }
      md += "\n";
    }
    md += "### Gender agreement on the probes: does the model prefer the right pronoun's first letter?\n\n"
          "Fraction of probes where p(first letter of the right pronoun) > p(the other gender's: S against H), at the "
          "character before the pronoun, and the mean log-odds ln p(right) − ln p(rival).\n\n"
          "| model | seed | right preferred: all | nearest | not nearest | mean log-odds: nearest | not nearest |\n"
          "|---|---|---|---|---|---|---|\n";
    for (const ModelRun& run : runs) {
      const std::vector<PronounCase>& cases = s0.probes;
      const ResolutionScores& r = run.probes;
      SplitStat right = split_mean(cases, [&](int i) { return r.rival_margin[i] > 0 ? 1.0 : 0.0; }, resamples, 8);
      SplitStat margin = split_mean(cases, [&](int i) { return (double)r.rival_margin[i]; }, resamples, 9);
      md += "| " + run.group + " | " + std::to_string(run.seed) + " | " + format_interval(right.all) + " | " +
            format_interval(right.nearest) + " | " + format_interval(right.not_nearest) + " | " +
            format_interval(margin.nearest, 2) + " | " + format_interval(margin.not_nearest, 2) + " |\n";
    }
    md += "\n";
    for (int set = 0; set < 2; set++) {
      const std::vector<PronounCase>& cases = s0.ablate[set];
      std::vector<int> not_nearest;
      for (int i = 0; i < (int)cases.size(); i++)
        if (!cases[i].nearest_correct()) not_nearest.push_back(i);
      std::snprintf(line, sizeof line,
                    "### Ablation (%d heads to 0), %s (%zu cases): change in loss (nats)\n\n"
                    "| model | seed | heads | Δ first char of pronoun | Δ first char, not nearest | Δ other characters |\n"
                    "|---|---|---|---|---|---|\n",
                    k, set_names[set], cases.size());
      md += line;
      for (const ModelRun& run : runs) {
        auto sub = [&](const std::vector<float>& v) {
          std::vector<float> out;
          for (int i : not_nearest) out.push_back(v[i]);
          return out;
        };
        for (const std::string cond : {"pronoun", "nearest"}) {
          const LossPair& a = run.ablated[set].at(cond);
          const std::vector<int>& heads = cond == "pronoun" ? run.pronoun_heads : run.nearest_heads;
          md += "| " + run.group + " | " + std::to_string(run.seed) + " | " +
                (cond == "pronoun" ? "best pronoun heads " : "recency heads ") + head_list(heads, run.NH) + " | " +
                format_interval(delta(a.pronoun, run.base[set].pronoun, resamples, 5)) + " | " +
                format_interval(delta(sub(a.pronoun), sub(run.base[set].pronoun), resamples, 6)) + " | " +
                format_interval(delta(a.other, run.base[set].other, resamples, 7)) + " |\n";
        }
        // Random sets: the mean over sets, and the range over sets.
        std::vector<double> dp, dn, dothers;
        for (auto& [name, a] : run.ablated[set]) {
          if (name.rfind("random", 0) != 0) continue;
          dp.push_back(mean_of(a.pronoun) - mean_of(run.base[set].pronoun));
          dn.push_back(mean_of(sub(a.pronoun)) - mean_of(sub(run.base[set].pronoun)));
          dothers.push_back(mean_of(a.other) - mean_of(run.base[set].other));
        }
        auto range = [](const std::vector<double>& v) {
          if (v.empty()) return std::string("-");
          const double m = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
          return fmt("%.3f", m) + " (sets: " + fmt("%.3f", *std::min_element(v.begin(), v.end())) + " … " +
                 fmt("%.3f", *std::max_element(v.begin(), v.end())) + ")";
        };
        md += "| " + run.group + " | " + std::to_string(run.seed) + " | " + std::to_string(dp.size()) +
              " random sets of " + std::to_string(k) + " | " + range(dp) + " | " + range(dn) + " | " +
              range(dothers) + " |\n";
      }
      md += "\n";
    }

    // Across seeds: mean ± standard deviation of the headline numbers per group.
    md += "### Across training seeds (mean ± sd over seeds)\n\n| group | seeds | set | best head accuracy, not nearest "
          "(before) | first-char loss, not nearest | other-char loss | Δ first char, pronoun heads | Δ first char, "
          "recency heads | Δ first char, random heads | right pronoun preferred, not nearest |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n";
    for (auto& [group, paths] : groups)
      for (int set = 0; set < 2; set++) {
        const std::vector<PronounCase>& cases = set == 0 ? s0.val : s0.probes;
        std::vector<double> cols[7];
        for (const ModelRun& run : runs) {
          if (run.group != group) continue;
          const ResolutionScores& r = set == 0 ? run.val : run.probes;
          double best = 0;
          for (int h = 0; h < r.n_heads; h++)
            best = std::max(best, split_mean(cases, head_correct(r, kBefore, h), 1).not_nearest.value);
          cols[0].push_back(best);
          cols[1].push_back(split_mean(cases, [&](int i) { return (double)r.first_char_loss[i]; }, 1).not_nearest.value);
          cols[2].push_back(mean_of(r.other_loss));
          cols[3].push_back(mean_of(run.ablated[set].at("pronoun").pronoun) - mean_of(run.base[set].pronoun));
          cols[4].push_back(mean_of(run.ablated[set].at("nearest").pronoun) - mean_of(run.base[set].pronoun));
          double rnd = 0;
          int n = 0;
          for (auto& [name, a] : run.ablated[set])
            if (name.rfind("random", 0) == 0) rnd += mean_of(a.pronoun) - mean_of(run.base[set].pronoun), n++;
          cols[5].push_back(n ? rnd / n : NAN);
          cols[6].push_back(set == 0 ? NAN
                                     : split_mean(cases, [&](int i) { return r.rival_margin[i] > 0 ? 1.0 : 0.0; }, 1)
                                           .not_nearest.value);
        }
        md += "| " + group + " | " + std::to_string(cols[0].size()) + " | " + (set == 0 ? "corpus" : "probes");
        for (auto& c : cols) {
          const double m = std::accumulate(c.begin(), c.end(), 0.0) / c.size();
          double v = 0;
          for (double x : c) v += (x - m) * (x - m);
          const double sd = c.size() > 1 ? std::sqrt(v / (c.size() - 1)) : 0.0;
          md += std::isnan(m) ? std::string(" | -") : " | " + fmt("%.3f", m) + " ± " + fmt("%.3f", sd);
        }
        md += " |\n";
      }
    md += "\n";

    const std::string out = flags["out"].as<std::string>(), plot = flags["plot"].as<std::string>();
    write_file_atomically(out, {{md.data(), md.size()}});
    const std::string svg = render_svg(chart);
    write_file_atomically(plot, {{svg.data(), svg.size()}});
    std::printf("%s\nwrote %s and %s\n", md.c_str(), out.c_str(), plot.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pronouns: error: %s\n", e.what());
    return 1;
  }
}
