#include "explore/analysis.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/rng.h"
#include "data/utf8.h"
#include "generate/fill.h"
#include "generate/generate.h"
#include "lab/head_scores.h"
#include "lab/html_report.h"
#include "model/mixer_lab.h"
#include "train/evaluate.h"

using nlohmann::json;

ExploredModel::ExploredModel(Checkpoint c) : ckpt(std::move(c)) {
  loaded_masks = ckpt.model->masks();
  if (ckpt.objective == Objective::MLM) mask_token = ckpt.tokenizer.special_id(kMaskToken);
}

std::vector<int> request_ids(const ExploredModel& m, const std::string& utf8, const std::string& what, int min_chars,
                             int max_chars, char32_t blank) {
  std::u32string chars;
  try {
    chars = utf8_decode(utf8, what);
  } catch (const std::runtime_error& e) {
    throw BadRequest(e.what());
  }
  if ((int)chars.size() > max_chars)
    throw BadRequest(what + " has " + std::to_string(chars.size()) + " characters; this model reads at most " +
                     std::to_string(max_chars));
  if ((int)chars.size() < min_chars)
    throw BadRequest(what + " must hold at least " + std::to_string(min_chars) + " character" +
                     (min_chars == 1 ? "" : "s"));
  std::vector<int> ids;
  for (size_t i = 0; i < chars.size(); i++) {
    if (blank && chars[i] == blank) {
      ids.push_back(m.mask_token);
      continue;
    }
    const int id = m.ckpt.tokenizer.id_of(chars[i]);
    if (id < 0)  // the tokenizer's own wording, e.g. "text: character 'Z' (U+005A) at position 3 is not in …"
      try {
        m.ckpt.tokenizer.encode(chars.substr(i, 1), what);
      } catch (const std::runtime_error& e) {
        std::string message = e.what();
        const size_t at = message.find("at position 0");
        if (at != std::string::npos) message.replace(at, 13, "at position " + std::to_string(i));
        throw BadRequest(message);
      }
    ids.push_back(id);
  }
  return ids;
}

static std::vector<std::string> texts_of(const std::vector<int>& ids, const Tokenizer& tok) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(tok.decode_one(id));
  return out;
}

static std::vector<int> first_ids(int n) {
  std::vector<int> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// What the page says about each layer's weights, asked of the layer's mixer (model/mixer_lab.h; the page never
// compares kind names). kind: its name; probabilities: whether each row of its weights is a distribution over the
// keys (attention's probabilities) or signed and unnormalised (a recurrence's implied M); about:
// the kind's own paragraph on what its weights are.
static json mixer_notes(const GPT& model) {
  json notes = json::array();
  for (int l = 0; l < model.config.n_layer; l++) {
    const Mixer& mixer = model.mixer(l);
    notes.push_back({{"kind", mixer.kind()}, {"probabilities", mixer.lab().weights_are_probabilities()},
                     {"about", mixer.lab().weights_description()}});
  }
  return notes;
}

json model_summary(ExploredModel& m) {
  const ModelConfig& c = m.model().config;
  m.model().set_masks(m.loaded_masks);
  // The attention kind of every layer, as the lab names it, from a one-character run.
  const AttentionDump one = dump_attention(m.model(), {0}, m.ckpt.tokenizer);
  std::vector<std::string> masks;
  for (const AttentionMask& mask : m.loaded_masks) masks.push_back(mask.to_string());
  return {{"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"block_size", c.block_size},
          {"vocab_size", c.vocab_size},
          {"objective", to_string(m.ckpt.objective)},
          {"masked_lm", m.mask_token >= 0},
          {"masks", masks},
          {"attention", one.attention},
          {"mixers", mixer_notes(m.model())},
          {"step", m.ckpt.resumable ? json(m.ckpt.resume.step) : json(nullptr)},
          {"chars", texts_of(first_ids(m.ckpt.tokenizer.num_chars()), m.ckpt.tokenizer)},
          {"specials", m.ckpt.tokenizer.specials()},
          {"note", m.ckpt.note}};  // a format-1 file cannot be verified: ./sample prints this, the explorer answers it
}

// log of Σ_v exp(z_v), in double, so that p_v = exp(z_v − lse).
static double log_sum_exp(const float* z, int V) {
  const double max = *std::max_element(z, z + V);
  double sum = 0;
  for (int v = 0; v < V; v++) sum += std::exp(z[v] - max);
  return max + std::log(sum);
}

static void require_finite_logits(const float* z, int V) {
  for (int v = 0; v < V; v++)
    if (!std::isfinite(z[v]))
      throw std::runtime_error("the model's predictions are not finite numbers: its weights are too large or broken");
}

// The ten most likely tokens of one prediction, as [[text, p], …], most likely first.
static json top10(const float* z, int V, double lse, const Tokenizer& tok) {
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  const int k = std::min(10, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
  json out = json::array();
  for (int i = 0; i < k; i++) out.push_back({tok.decode_one(order[i]), std::exp(z[order[i]] - lse)});
  return out;
}

json score_text_json(ExploredModel& m, const std::vector<int>& ids, const std::function<void()>& between) {
  GPT& model = m.model();
  const int T = (int)ids.size(), V = model.config.vocab_size;
  const Tokenizer& tok = m.ckpt.tokenizer;
  model.set_masks(m.loaded_masks);
  model.set_prefix_length(0);  // a prefix-LM read left to right is a causal model (as ./sample --score does)
  json bits = json::array(), top = json::array(), p_actual = json::array(), rank = json::array();
  double total_nats = 0;
  long predicted = 0;
  auto record = [&](const float* z, int target) {
    require_finite_logits(z, V);
    const double lse = log_sum_exp(z, V), nats = lse - z[target];
    bits.push_back(nats / std::log(2.0));
    top.push_back(top10(z, V, lse, tok));
    p_actual.push_back(std::exp(-nats));
    // 1 + the tokens ranked before it (more likely, or as likely with a lower id, as the top list orders them)
    long before = 0;
    for (int v = 0; v < V; v++) before += z[v] > z[target] || (z[v] == z[target] && v < target);
    rank.push_back(before + 1);
    total_nats += nats, predicted++;
  };
  std::string method;
  if (m.mask_token >= 0) {
    // Masked LM: position t is predicted from the whole text with [MASK] at t. One row per position, 16 rows a
    // forward, so the activations stay small whatever the block size.
    method = "masked";
    const int rows = 16;
    std::vector<int> batch;
    for (int start = 0; start < T; start += rows) {
      if (start > 0 && between) {
        between();  // others may use the model meanwhile: put its masks back
        model.set_masks(m.loaded_masks);
        model.set_prefix_length(0);
      }
      const int B = std::min(rows, T - start);
      batch.clear();
      for (int b = 0; b < B; b++) {
        batch.insert(batch.end(), ids.begin(), ids.end());
        batch[(size_t)b * T + start + b] = m.mask_token;
      }
      model.forward(batch.data(), nullptr, B, T);
      for (int b = 0; b < B; b++) record(model.logits() + ((size_t)b * T + start + b) * V, ids[start + b]);
    }
  } else {
    // Next-token model: the logits at t − 1 predict x_t; the first character has no prediction.
    const bool leaky = std::any_of(model.masks().begin(), model.masks().end(),
                                   [&](const AttentionMask& mask) { return mask.sees_future(T); });
    method = leaky ? "next (this model's mask lets a position see the character it predicts)" : "next";
    bits.push_back(nullptr), top.push_back(nullptr), p_actual.push_back(nullptr), rank.push_back(nullptr);
    if (T <= m.block_size()) {
      model.forward(ids.data(), nullptr, 1, T);
      for (int t = 1; t < T; t++) record(model.logits() + (size_t)(t - 1) * V, ids[t]);
    } else {
      // A text longer than the block: the sliding windows of ./sample --score (train/evaluate.h), each character
      // predicted once, from up to block_size characters before it.
      for (const ScoreWindow& w : score_windows(T, m.block_size())) {
        model.forward(ids.data() + w.start, nullptr, 1, w.length);
        for (long t = w.first; t < w.start + w.length; t++)
          record(model.logits() + (size_t)(t - w.start) * V, ids[t + 1]);
      }
    }
  }
  const double nats = predicted ? total_nats / predicted : NAN;
  return {{"chars", texts_of(ids, tok)},
          {"bits", bits},
          {"top", top},
          {"p", p_actual},
          {"rank", rank},
          {"predicted", predicted},
          {"method", method},
          {"nats_per_char", predicted ? json(nats) : json(nullptr)},
          {"bits_per_char", predicted ? json(nats / std::log(2.0)) : json(nullptr)}};
}

constexpr int kThumb = 32;  // a head's whole-pattern thumbnail: at most kThumb × kThumb cells

// Rounded as ./inspect attention's JSON rounds them (lab/html_report.cpp), so the two can be compared digit for digit.
static double rounded(float p) { return std::round(p * 1e6) / 1e6; }

json attention_at_json(ExploredModel& m, const std::vector<int>& ids, int position, int layer, int head, bool with_map) {
  GPT& model = m.model();
  const int T = (int)ids.size(), L = model.config.n_layer, NH = model.config.n_head;
  if (position < 0 || position >= T)
    throw BadRequest("position " + std::to_string(position) + " is outside the text (0 to " + std::to_string(T - 1) + ")");
  if (layer < 0 || layer >= L) throw BadRequest("layer " + std::to_string(layer) + " does not exist (0 to " + std::to_string(L - 1) + ")");
  if (head < 0 || head >= NH) throw BadRequest("head " + std::to_string(head) + " does not exist (0 to " + std::to_string(NH - 1) + ")");
  model.set_masks(m.loaded_masks);
  const AttentionDump d = dump_attention(model, ids, m.ckpt.tokenizer);
  if (!std::all_of(d.attn.begin(), d.attn.end(), [](float p) { return std::isfinite(p); }))
    throw std::runtime_error("the model's attention weights are not finite numbers: its weights are too large or broken");
  auto row_of = [&](int l, int h, int q) {
    const float* r = &d.attn[(((size_t)l * NH + h) * T + q) * T];
    json row = json::array();
    for (int k = 0; k < T; k++) row.push_back(rounded(r[k]));
    return row;
  };
  auto mask_row = [&](int l, int q) {
    json row = json::array();
    for (int k = 0; k < T; k++) row.push_back(d.masks[l].allows(q, k, T) ? 1 : 0);
    return row;
  };
  // The chosen key's column: how much every query takes from `position` ("what attends to this character").
  auto column_of = [&](int l, int h, int k) {
    json col = json::array();
    for (int q = 0; q < T; q++) col.push_back(rounded(d.attn[(((size_t)l * NH + h) * T + q) * T + k]));
    return col;
  };
  auto mask_column = [&](int l, int k) {
    json col = json::array();
    for (int q = 0; q < T; q++) col.push_back(d.masks[l].allows(q, k, T) ? 1 : 0);
    return col;
  };
  json rows = json::array(), mask_rows = json::array(), cols = json::array(), mask_cols = json::array();
  json map = json::array(), mask = json::array(), spellings = json::array();
  for (int l = 0; l < L; l++) {
    json heads = json::array(), to = json::array();
    for (int h = 0; h < NH; h++) heads.push_back(row_of(l, h, position)), to.push_back(column_of(l, h, position));
    rows.push_back(heads);
    cols.push_back(to);
    mask_rows.push_back(mask_row(l, position));
    mask_cols.push_back(mask_column(l, position));
    spellings.push_back(d.masks[l].to_string());
  }
  // Each head's largest |weight| over its whole map: the page scales a head whose weights are not probabilities
  // (signed, unnormalised) by it, as ./inspect attention's page does.
  json scale = json::array();
  for (int l = 0; l < L; l++) {
    json heads = json::array();
    for (int h = 0; h < NH; h++) {
      float largest = 0;
      for (int q = 0; q < T; q++)
        for (int k = 0; k < T; k++)
          if (d.masks[l].allows(q, k, T)) largest = std::max(largest, std::fabs(d.attn[(((size_t)l * NH + h) * T + q) * T + k]));
      heads.push_back(rounded(largest));
    }
    scale.push_back(heads);
  }
  json j = {{"chars", d.tokens}, {"T", T}, {"n_layer", L}, {"n_head", NH}, {"position", position},
            {"masks", spellings}, {"attention", d.attention}, {"mixers", mixer_notes(model)}, {"rows", rows},
            {"mask_rows", mask_rows}, {"cols", cols}, {"mask_cols", mask_cols}, {"scale", scale}, {"layer", layer}, {"head", head}};
  // Every head's whole pattern as a thumbnail of at most kThumb × kThumb cells (each the largest-|weight| entry
  // of the queries × keys it covers, so a one-cell-wide diagonal stays visible), and the lab's head scores of
  // this text (lab/head_scores.h) for the layers whose weights are probabilities.
  const int S = std::min(T, kThumb);
  json thumbs = json::array(), head_scores = json::array();
  for (int l = 0; l < L; l++) {
    json heads = json::array(), scores = json::array();
    const bool probabilities = model.mixer(l).lab().weights_are_probabilities();
    for (int h = 0; h < NH; h++) {
      const float* P = &d.attn[((size_t)l * NH + h) * T * T];
      std::vector<float> cells((size_t)S * S, 0.0f);
      for (int q = 0; q < T; q++)
        for (int k = 0; k < T; k++) {
          float& c = cells[(size_t)(q * S / T) * S + k * S / T];
          if (std::fabs(P[(size_t)q * T + k]) > std::fabs(c)) c = P[(size_t)q * T + k];
        }
      json flat = json::array();
      for (float c : cells) flat.push_back(std::round(c * 1e4) / 1e4);
      heads.push_back(flat);
      if (!probabilities) {
        scores.push_back(nullptr);
        continue;
      }
      HeadScores hs;
      score_pattern(hs, P, ids.data(), T, d.masks[l]);
      auto value = [](const Mean& m) { return m.count ? json(m.value()) : json(nullptr); };
      scores.push_back({{"previous_token", value(hs.previous_token)}, {"induction", value(hs.induction)},
                        {"duplicate_token", value(hs.duplicate_token)}, {"sink", value(hs.sink)},
                        {"entropy_norm", value(hs.entropy_norm)}});
    }
    thumbs.push_back(heads);
    head_scores.push_back(scores);
  }
  j["thumb_size"] = S, j["thumbs"] = thumbs, j["head_scores"] = head_scores;
  if (with_map) {
    for (int q = 0; q < T; q++) map.push_back(row_of(layer, head, q)), mask.push_back(mask_row(layer, q));
    j["map"] = map, j["mask"] = mask;
  }
  return j;
}

std::vector<double> sampling_distribution(const float* z, int V, const SamplingOptions& o) {
  require_finite_logits(z, V);
  std::vector<int> order = first_ids(V);  // most likely first, ties to the lower id (as sample_token sorts)
  std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
  std::vector<double> q(V, 0.0);
  if (o.temperature == 0.0f) {
    q[order[0]] = 1.0;
    return q;
  }
  size_t keep = o.top_k > 0 ? std::min<size_t>(o.top_k, V) : V;
  std::vector<double> w(keep);
  double total = 0;
  for (size_t i = 0; i < keep; i++) total += w[i] = std::exp((z[order[i]] - z[order[0]]) / (double)o.temperature);
  double mass = 0;
  for (size_t i = 0; i < keep; i++) {
    mass += w[i] / total;
    if (mass >= o.top_p) {
      keep = i + 1;
      break;
    }
  }
  const double kept = std::accumulate(w.begin(), w.begin() + keep, 0.0);
  for (size_t i = 0; i < keep; i++) q[order[i]] = w[i] / kept;
  return q;
}

json next_json(ExploredModel& m, const std::vector<int>& ids, const SamplingOptions& options) {
  GPT& model = m.model();
  const int V = model.config.vocab_size;
  model.set_masks(m.loaded_masks);
  // As generation reads the prompt: the text is a prefix-LM's bidirectional prefix, and a masked LM predicts at an
  // appended [MASK]. One forward over the text (the decoder pushed it token by token: 218 ms against 14 ms at
  // T = 200 for a model that recomputes the context at every step); the last block_size positions when the [MASK]
  // makes one too many.
  std::vector<int> input = ids;
  if (m.mask_token >= 0) input.push_back(m.mask_token);
  if ((int)input.size() > m.block_size()) input.erase(input.begin(), input.end() - m.block_size());
  const int T = (int)input.size();
  model.set_prefix_length(T);
  model.forward(input.data(), nullptr, 1, T);
  const float* z = model.logits() + (size_t)(T - 1) * V;
  require_finite_logits(z, V);
  const double lse = log_sum_exp(z, V);
  std::vector<double> p(V);
  for (int v = 0; v < V; v++) p[v] = std::exp(z[v] - lse);
  return {{"tokens", texts_of(first_ids(V), m.ckpt.tokenizer)},
          {"p", p},
          {"q", sampling_distribution(z, V, options)},
          {"temperature", options.temperature},
          {"top_k", options.top_k},
          {"top_p", options.top_p}};
}

json fill_json(ExploredModel& m, const std::vector<int>& ids) {
  if (m.mask_token < 0)
    throw BadRequest("fill needs a masked-LM checkpoint (trained with --objective mlm); this one is " +
                     to_string(m.ckpt.objective));
  m.model().set_masks(m.loaded_masks);
  const std::vector<int> filled = fill_blanks(m.model(), ids, m.mask_token, m.ckpt.tokenizer.num_chars());
  json positions = json::array();
  for (size_t t = 0; t < ids.size(); t++)
    if (ids[t] == m.mask_token) positions.push_back(t);
  return {{"text", m.ckpt.tokenizer.decode(filled)}, {"chars", texts_of(filled, m.ckpt.tokenizer)}, {"filled", positions}};
}

namespace {
struct ReaderLeft {};  // thrown through generate() to end a stream nobody reads any more
}  // namespace

void stream_generation(ExploredModel& m, const std::vector<int>& ids, int n, const SamplingOptions& options,
                       uint64_t seed, const std::function<bool(const std::string&)>& emit) {
  std::vector<int> prompt = ids;
  if (prompt.empty()) {  // start somewhere, as ./sample does without --prompt
    const int newline = m.ckpt.tokenizer.id_of(U'\n');
    prompt.push_back(newline >= 0 ? newline : 0);
  }
  m.model().set_masks(m.loaded_masks);
  Rng rng(seed);
  try {
    generate(m.model(), prompt, n, options, rng, m.mask_token, [&](int token) {
      if (!emit(m.ckpt.tokenizer.decode_one(token))) throw ReaderLeft{};
    });
  } catch (const ReaderLeft&) {
  }
}
