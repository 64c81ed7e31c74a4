// ./inspect — look inside a trained model's attention.
//   ./inspect attention --ckpt out/tiny --prompt "Mira saw Tom. She waved." --out attn.html [--json attn.json]
//   ./inspect heads --ckpt out/tiny [--csv heads.csv] [--antecedents build/pronouns.tsv] [--mentions build/names.tsv]
//   ./inspect prune --ckpt out/tiny --data data/stories.txt [--out out/prune]
//   ./inspect serve --ckpt out/tiny [--port 8000] [--host 127.0.0.1]
// attention: one self-contained HTML page (and/or JSON) with every layer × head pattern for the prompt.
// heads:     a table of head-type scores (head_scores.h): previous-token, duplicate, induction, sink, distance,
//            entropy, confidence, OV copying and, with the story corpus's annotations, pronoun → antecedent;
//            95% bootstrap intervals for every mass, and antecedent accuracy against the nearest-name baseline.
// prune:     head importance and the exact loss increase per head, then the validation loss as heads are pruned
//            10% at a time by importance vs in random order (pruning.h); a CSV and an SVG plot.
// serve:     the explorer (explore/server.h, docs/explore.md): a local web page to type into and see each
//            character's surprisal, every head's attention, the next-character odds, and to sample.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/program_flags.h"
#include "base/read_file.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "data/dataset.h"
#include "lab/head_intervals.h"
#include "lab/head_scores.h"
#include "lab/pronouns.h"
#include "lab/html_report.h"
#include "lab/plot.h"
#include "lab/pruning.h"
#include "base/settings.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "data/utf8.h"
#include "explore/server.h"

static void write_text(const std::string& path, const std::string& text) {
  write_file_atomically(path, {{text.data(), text.size()}});
}

static bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

static int attention(Checkpoint& ckpt, const cxxopts::ParseResult& flags) {
  GPT& model = *ckpt.model;
  std::vector<int> ids = ckpt.tokenizer.encode(utf8_decode(flags["prompt"].as<std::string>(), "--prompt"), "--prompt");
  if (ids.empty()) throw std::runtime_error("--prompt must not be empty");
  if ((int)ids.size() > model.config.block_size) {
    std::fprintf(stderr, "inspect: the prompt is longer than the context (%d); keeping its last %d characters\n",
                 model.config.block_size, model.config.block_size);
    ids.erase(ids.begin(), ids.end() - model.config.block_size);
  }
  std::vector<HeadScores> scores = score_heads(model, ckpt.tokenizer.num_chars(), 16, 1);
  AttentionDump dump = dump_attention(model, ids, ckpt.tokenizer);
  dump.scores = scores;
  // A page of nulls helps no one: refuse, as ./sample does, when the forward that made the dump overflowed.
  const float* logits = model.logits();
  for (size_t i = 0; i < ids.size() * (size_t)model.config.vocab_size; i++)
    if (!std::isfinite(logits[i]))
      throw std::runtime_error(flags["ckpt"].as<std::string>() + ": the model's predictions are not finite numbers: "
                               "its weights are too large or broken");
  for (float a : dump.attn)
    if (!std::isfinite(a))
      throw std::runtime_error(flags["ckpt"].as<std::string>() + ": the model's attention weights are not finite numbers");
  const std::string out = flags.count("out") ? flags["out"].as<std::string>() : "";
  if (!out.empty()) {
    write_text(out, attention_html(dump, "Attention: " + flags["ckpt"].as<std::string>()));
    std::printf("wrote %s (%d layers × %d heads, %d tokens)\n", escape_for_message(out).c_str(), dump.n_layer,
                dump.n_head, dump.T);
  }
  if (flags.count("json")) {
    const std::string json = flags["json"].as<std::string>();
    write_text(json, attention_json(dump));
    std::printf("wrote %s\n", escape_for_message(json).c_str());
  }
  return 0;
}

// A table of NaN helps no one: refuse, as `attention` does, when the model's forward overflowed.
static std::runtime_error not_finite(const cxxopts::ParseResult& flags) {
  return std::runtime_error(flags["ckpt"].as<std::string>() + ": the model's predictions are not finite numbers: "
                            "its weights are too large or broken");
}

// The text heads annotates and prune validates on: --data when given; else the corpus the checkpoint was trained
// on (its settings name it) when that file is still there; else data/stories.txt, which the pronoun tables describe.
static std::string text_path(const Checkpoint& ckpt, const cxxopts::ParseResult& flags) {
  if (flags.count("data")) return flags["data"].as<std::string>();
  if (ckpt.resumable) {
    const nlohmann::json settings =
        nlohmann::json::parse(ckpt.resume.train_config, nullptr, /*allow_exceptions=*/false);
    if (settings.is_object() && settings.contains("data") && settings["data"].is_string()) {
      const std::string corpus = settings["data"].get<std::string>();
      if (file_exists(corpus)) return corpus;
    }
  }
  return flags["data"].as<std::string>();
}

// Why a default text (not named by --data) was of no use, and which flag to give.
static std::string unreadable_default(const std::string& path, const std::exception& e) {
  return "the default text " + path + " cannot be used (" + e.what() +
         "); give --data with a text it can, e.g. its training corpus";
}

// The text encoded for the model; for a default text the model cannot read, nothing, and a note saying so.
static std::optional<std::vector<int>> encode_text(const Checkpoint& ckpt, const std::u32string& text,
                                                   const std::string& path, const cxxopts::ParseResult& flags) {
  try {
    return ckpt.tokenizer.encode(text, path);
  } catch (const std::exception& e) {
    if (flags.count("data")) throw;
    std::fprintf(stderr, "inspect: no pronoun scores: %s\n", escape_for_message(unreadable_default(path, e)).c_str());
    return std::nullopt;
  }
}

// Every score that applies to its head's layer is a finite number (head_scores.h: the others are n/a by design).
static void check_finite(const std::vector<HeadScores>& scores, const cxxopts::ParseResult& flags) {
  for (const HeadScores& s : scores) {
    for (const Mean* m :
         {&s.previous_token, &s.duplicate_token, &s.induction, &s.sink, &s.pronoun, &s.pronoun_baseline})
      if (!std::isfinite(m->value())) throw not_finite(flags);
    if (s.probabilities)
      for (const Mean* m : {&s.distance, &s.entropy, &s.entropy_norm, &s.confidence})
        if (!std::isfinite(m->value())) throw not_finite(flags);
    if (s.has_ov && !std::isfinite(s.ov_copying)) throw not_finite(flags);
  }
}

static int heads(Checkpoint& ckpt, const cxxopts::ParseResult& flags) {
  GPT& model = *ckpt.model;
  const int NH = model.config.n_head, sequences = flags["sequences"].as<int>();
  // Before the work: score_heads runs all the sequences in one forward, and keeps per-sequence values per head.
  const int T = std::min(model.config.block_size, 2 * ckpt.tokenizer.num_chars()) / 2 * 2;
  check_forward_fits_in_memory(model.config, sequences, T,
                               (long double)sequences * (4.0L * T + 512.0L * model.config.n_layer * NH),
                               "--sequences " + std::to_string(sequences));
  std::vector<HeadScores> scores =
      score_heads(model, ckpt.tokenizer.num_chars(), sequences, flags["seed"].as<uint64_t>());
  check_finite(scores, flags);
  const int resamples = flags["resamples"].as<int>();
  std::string accuracy;
  std::string notes_path = flags["antecedents"].as<std::string>();
  const std::string data = text_path(ckpt, flags);
  if (file_exists(notes_path) && file_exists(data)) {
    std::u32string text = read_text_file(data);
    std::vector<PronounNote> notes = read_pronoun_notes(notes_path), good;
    for (const PronounNote& n : notes) {  // keep the notes that match this text (the table is for one corpus)
      const std::u32string a = utf8_decode(n.antecedent, notes_path), p = utf8_decode(n.pronoun, notes_path);
      if (n.antecedent_offset + (long)a.size() <= (long)text.size() && n.pronoun_offset + (long)p.size() <= (long)text.size() &&
          text.compare(n.antecedent_offset, a.size(), a) == 0 && text.compare(n.pronoun_offset, p.size(), p) == 0)
        good.push_back(n);
    }
    if (good.size() < notes.size() / 2)
      std::fprintf(stderr, "inspect: %s does not describe %s (%zu of %zu notes match); no pronoun scores\n",
                   escape_for_message(notes_path).c_str(), escape_for_message(data).c_str(), good.size(), notes.size());
    else if (const std::optional<std::vector<int>> encoded = encode_text(ckpt, text, data, flags)) {
      const std::vector<int>& tokens = *encoded;
      const int used = score_pronouns(model, tokens, good, scores, flags["pronouns"].as<int>());
      std::printf("pronoun → antecedent: %d pronouns of %s (baseline: mean mass on another name in the window)\n",
                  used, escape_for_message(data).c_str());
      const std::string names = flags["mentions"].as<std::string>();
      if (file_exists(names) && resamples > 0) {  // antecedent accuracy against the nearest-name baseline
        std::vector<PronounCase> cases = build_cases(good, read_name_mentions(names), story_starts(text),
                                                     (long)text.size(), model.config.block_size);
        if ((int)cases.size() > flags["pronouns"].as<int>()) cases.resize(flags["pronouns"].as<int>());
        ResolutionScores r = score_resolution(model, tokens, cases, {});
        accuracy = "Antecedent accuracy (lab/pronouns.h; docs/pronouns.md): the candidate name with the most mass, "
                   "at the character before the pronoun and at its last character\n\n" +
                   resolution_table(cases, r, NH, resamples).markdown;
      }
    }
  } else {
    std::printf("no pronoun scores: %s not found (make pronouns writes it for data/stories.txt)\n",
                escape_for_message(notes_path).c_str());
  }
  std::printf("scores on %d sequences of %d random distinct characters repeated twice\n\n%s",
              flags["sequences"].as<int>(), std::min(model.config.block_size, 2 * ckpt.tokenizer.num_chars()) / 2,
              heads_table(scores, NH).c_str());
  if (resamples > 0) {
    std::vector<HeadIntervals> iv = head_intervals(model, ckpt.tokenizer.num_chars(), flags["sequences"].as<int>(),
                                                   flags["seed"].as<uint64_t>(), scores, resamples);
    std::printf("\n%s", head_intervals_table(iv, NH).c_str());
  }
  check_finite(scores, flags);  // the pronoun scores too
  if (!accuracy.empty()) std::printf("\n%s", accuracy.c_str());
  const std::string csv = flags.count("csv") ? flags["csv"].as<std::string>() : "";
  if (!csv.empty()) {
    write_text(csv, heads_csv(scores, NH));
    std::printf("wrote %s\n", escape_for_message(csv).c_str());
  }
  return 0;
}

static int prune(Checkpoint& ckpt, const cxxopts::ParseResult& flags) {
  GPT& model = *ckpt.model;
  const int NH = model.config.n_head, T = model.config.block_size;
  const int batches = flags["batches"].as<int>(), batch = flags["batch"].as<int>();
  check_forward_fits_in_memory(model.config, batch, T, 8.0L * batches * batch * T,
                               "--batch " + std::to_string(batch) + " (with --batches " + std::to_string(batches) + ")");
  const std::string data = text_path(ckpt, flags);
  Corpus corpus;
  try {
    corpus = load_corpus(data, ckpt.tokenizer);
  } catch (const std::exception& e) {
    if (flags.count("data")) throw;
    throw std::runtime_error(unreadable_default(data, e));
  }
  EvalBatches val = make_eval_batches(corpus.val, batches, batch, T, 1234);
  const std::string out = flags["out"].as<std::string>();
  ::mkdir(out.c_str(), 0777);
  struct stat st;  // before the work, not after it
  const std::string dangling = dangling_link(out);
  if (!dangling.empty()) throw std::runtime_error("--out " + out + ": " + dangling);
  if (::stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("--out " + out + ": not a directory (prune writes three files into a directory)");
  model.enable_head_gates();
  const double base = gated_loss(model, val);
  std::vector<double> I = head_importance(model, val, true), raw = head_importance(model, val, false);
  std::vector<double> dL = ablation_increase(model, val);
  const std::vector<int> gated = gated_heads(model);  // the others' scores are NaN: they cannot be removed
  bool finite = std::isfinite(base);
  for (const std::vector<double>* v : {&I, &raw, &dL})
    for (int i : gated) finite = finite && std::isfinite((*v)[i]);
  if (!finite) throw not_finite(flags);
  std::printf("validation loss %.4f on %d batches of %d × %d\n\nhead   importance (raw |dL/dξ|)  loss increase alone\n",
              base, val.n, val.B, val.T);
  std::string heads_csv = "layer,head,importance,raw_importance,loss_increase\n";
  char line[256];
  for (size_t i = 0; i < I.size(); i++) {
    if (std::isnan(I[i])) {
      std::printf("%-6s n/a: layer %zu's mixer (%s) has no head gates\n", head_name((int)i, NH).c_str(), i / NH,
                  model.mixer((int)(i / NH)).kind());
      heads_csv += std::to_string(i / NH) + "," + std::to_string(i % NH) + ",,,\n";
      continue;
    }
    std::printf("%-6s %.3f      (%.4f)           %+.4f\n", head_name((int)i, NH).c_str(), I[i], raw[i], dL[i]);
    std::snprintf(line, sizeof line, "%zu,%zu,%.6g,%.6g,%.6g\n", i / NH, i % NH, I[i], raw[i], dL[i]);
    heads_csv += line;
  }
  if (gated.empty()) std::printf("\nno layer of this model has head gates: no head can be removed\n");
  write_text(out + "/head_importance.csv", heads_csv);

  const double step = flags["step"].as<double>();
  std::string csv = "order,seed,removed,fraction,val_loss,heads_removed\n";
  Chart chart{"Validation loss as heads are removed", "fraction of heads removed", "validation loss (nats)", {}};
  auto record = [&](const std::string& order, int seed, const std::vector<PruneStep>& curve) {
    Series s{order == "importance" ? "importance, normalised per layer"
             : order == "importance-raw" ? "raw importance |dL/dξ|"
                                         : "random order, seed " + std::to_string(seed),
             {}, {}};
    for (const PruneStep& p : curve) {
      std::snprintf(line, sizeof line, "%s,%d,%d,%.4f,%.6f,", order.c_str(), seed, p.removed, p.fraction, p.loss);
      csv += line + p.heads + "\n";
      s.x.push_back(p.fraction), s.y.push_back(p.loss);
    }
    chart.series.push_back(s);
  };
  std::vector<PruneStep> by_importance = prune_curve(model, val, -1, step);
  record("importance", -1, by_importance);
  std::vector<PruneStep> by_raw = prune_curve(model, val, -1, step, 1.0, false);
  record("importance-raw", -1, by_raw);
  std::vector<std::vector<PruneStep>> randoms;
  for (int s = 1; s <= flags["seeds"].as<int>(); s++) record("random", s, randoms.emplace_back(prune_curve(model, val, s, step)));
  std::printf("\nremoved  fraction  by importance (normalised)  by raw importance  random (mean of %zu seeds)\n",
              randoms.size());
  for (size_t k = 0; k < by_importance.size(); k++) {
    double mean = 0;
    for (auto& r : randoms) mean += r[k].loss / randoms.size();
    std::printf("%7d  %8.2f  %26.4f  %18.4f  %.4f\n", by_importance[k].removed, by_importance[k].fraction,
                by_importance[k].loss, by_raw[k].loss, randoms.empty() ? NAN : mean);
  }
  write_text(out + "/prune.csv", csv);
  write_text(out + "/prune.svg", render_svg(chart));
  const std::string shown = escape_for_message(out);
  std::printf("wrote %s/head_importance.csv, %s/prune.csv and %s/prune.svg\n", shown.c_str(), shown.c_str(),
              shown.c_str());
  return 0;
}

// Without --port: the first free port from 8000 (a stable address to keep in a browser tab); --port 0: any free one.
static int serve(const cxxopts::ParseResult& flags) {
  ServeOptions options;
  options.host = flags["host"].as<std::string>();
  if (!is_loopback_host(options.host))
    std::fprintf(stderr, "inspect: warning: serving on %s, not on loopback: anyone who can reach this machine can use "
                 "the page and the API (no password)\n", escape_for_message(options.host).c_str());
  ExploreServer server(flags["ckpt"].as<std::string>(), options);
  const int port = flags["port"].as<int>();
  if (port < 0 || port > 65535) throw std::runtime_error("--port must be 0 to 65535");
  if (flags.count("port")) server.bind(port);
  else server.bind_first_free(8000, 100);
  const std::vector<std::string> names = server.checkpoint_names();
  std::printf("explore: %s (%zu checkpoint%s) at %s\n", escape_for_message(server.folder()).c_str(), names.size(),
              names.size() == 1 ? "" : "s", escape_for_message(server.url()).c_str());
  std::printf("open that address in a browser; Ctrl-C stops the server\n");
  std::fflush(stdout);
  server.run();
  return 0;
}

// Every number flag within its range, before any work: a count below 1 gave NaN (--batches 0) or a std::vector
// message (--sequences -5), and a value past 2³¹ wrapped around.
static void check_numbers(const cxxopts::ParseResult& flags) {
  const std::vector<std::pair<std::string, int>> counts = {{"sequences", 1}, {"pronouns", 0}, {"resamples", 0},
                                                            {"batches", 1},   {"batch", 1},    {"seeds", 0},
                                                            {"threads", 0}};
  for (const cxxopts::KeyValue& given : flags.arguments()) {
    if (given.key() == "seed") settings_detail::check_integer_flag<uint64_t>("--seed", given.value());
    for (const auto& count : counts)
      if (given.key() == count.first) settings_detail::check_integer_flag<int>("--" + given.key(), given.value());
  }
  for (const auto& [name, lowest] : counts)
    if (flags[name].as<int>() < lowest)
      throw std::runtime_error(std::string("--") + name + " must be ≥ " + std::to_string(lowest) + " (got " +
                               std::to_string(flags[name].as<int>()) + ")");
  const double step = flags["step"].as<double>();
  if (!(step > 0 && step <= 1)) throw std::runtime_error("--step must be in (0, 1] (got " + std::to_string(step) + ")");
}

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  cxxopts::Options options("inspect", "Look inside a plaingpt model: inspect attention|heads|prune|serve");
  // clang-format off
  options.add_options()
    ("command", "attention, heads, prune or serve", cxxopts::value<std::string>())
    ("ckpt", "checkpoint file or output directory", cxxopts::value<std::string>()->default_value("out/tiny"))
    ("prompt", "attention: the text to show", cxxopts::value<std::string>()->default_value("Mira saw Tom. She waved at him."))
    ("out", "attention: HTML file; prune: output directory", cxxopts::value<std::string>())
    ("json", "attention: also write the data as JSON here", cxxopts::value<std::string>())
    ("csv", "heads: also write the table as CSV here", cxxopts::value<std::string>())
    ("data", "heads: the corpus the annotations describe; prune: the validation text (default: the model's "
     "training corpus when it is there, else data/stories.txt)",
     cxxopts::value<std::string>()->default_value("data/stories.txt"))
    ("antecedents", "heads: data/make_stories.cpp's pronoun table for --data",
     cxxopts::value<std::string>()->default_value("build/pronouns.tsv"))
    ("sequences", "heads: repeated random sequences to score on", cxxopts::value<int>()->default_value("32"))
    ("pronouns", "heads: at most this many pronouns", cxxopts::value<int>()->default_value("2000"))
    ("mentions", "heads: data/make_stories.cpp's name-mention table for --data (antecedent accuracy)",
     cxxopts::value<std::string>()->default_value("build/names.tsv"))
    ("resamples", "heads: bootstrap resamples for the 95% intervals (0 = none)", cxxopts::value<int>()->default_value("1000"))
    ("batches", "prune: validation batches", cxxopts::value<int>()->default_value("8"))
    ("batch", "prune: sequences per batch", cxxopts::value<int>()->default_value("16"))
    ("seeds", "prune: random orders to compare with", cxxopts::value<int>()->default_value("3"))
    ("step", "prune: fraction of all heads removed per round", cxxopts::value<double>()->default_value("0.1"))
    ("seed", "random seed", cxxopts::value<uint64_t>()->default_value("1"))
    ("port", "serve: the port (default: the first free one from 8000; 0 = any free port)",
     cxxopts::value<int>()->default_value("8000"))
    ("host", "serve: the address to listen on; anything but loopback exposes the model to the network",
     cxxopts::value<std::string>()->default_value("127.0.0.1"))
    ("threads", "threads (0 = all cores)", cxxopts::value<int>()->default_value("0"));
  // clang-format on
  options.parse_positional({"command"});
  options.positional_help("attention|heads|prune|serve");
  try {
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, argc, argv);
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& flags = *parsed;
    if (!flags.count("command")) {
      std::printf("%s\n", options.help().c_str());
      return 2;
    }
    check_numbers(flags);
    const int threads = flags["threads"].as<int>();
    set_threads(threads > 0 ? threads : default_threads());
    const std::string command = flags["command"].as<std::string>();
    if (command == "serve") return serve(flags);
    if (command != "attention" && command != "heads" && command != "prune")
      throw std::runtime_error("unknown command '" + command + "' (expected attention, heads, prune or serve)");
    Checkpoint ckpt = load_checkpoint(resolve_checkpoint(flags["ckpt"].as<std::string>()));
    print_checkpoint_notes(ckpt);
    if (command == "attention") {
      if (!flags.count("out") && !flags.count("json")) throw std::runtime_error("attention: give --out and/or --json");
      return attention(ckpt, flags);
    }
    if (command == "heads") return heads(ckpt, flags);
    if (!flags.count("out")) throw std::runtime_error("prune: give --out DIR");
    return prune(ckpt, flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inspect: error: %s\n", escape_for_message(e.what(), /*keep_newlines=*/true).c_str());
    return 1;
  }
}
