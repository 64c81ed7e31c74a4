#include "explore/analysis.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/rng.h"
#include "data/utf8.h"
#include "generate/fill.h"
#include "generate/generate.h"
#include "lab/head_scores.h"
#include "model/mixer_lab.h"
#include "train/evaluate.h"

using nlohmann::json;

ExploredModel::ExploredModel(Checkpoint c) : ckpt(std::move(c)) {
  loaded_masks = ckpt.model->masks();
  if (ckpt.objective == Objective::MLM) mask_token = ckpt.tokenizer.special_id(kMaskToken);
}

void ExploredModel::remember(const std::vector<int>& ids) {
  forwards++;
  last_ids_ = ids;
  last_masks_ = model().masks();
}

const float* ExploredModel::logits_for(const std::vector<int>& ids) {
  GPT& g = model();
  const bool same = !ids.empty() && ids == last_ids_ && g.masks() == last_masks_ && g.last_B() == 1 &&
                    g.last_T() == (int)ids.size();
  if (!same) {
    g.forward(ids.data(), nullptr, 1, (int)ids.size());
    remember(ids);
  }
  return g.logits();
}

void ExploredModel::forward_rows(const int* ids, int B, int T) {
  if (B > 0) model().forward(ids, nullptr, B, T), forwards++;
  last_ids_.clear();
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
  std::vector<std::string> masks;
  for (const AttentionMask& mask : m.loaded_masks) masks.push_back(mask.to_string());
  std::string notes;
  for (const std::string& note : m.ckpt.notes) notes += (notes.empty() ? "" : " ") + note;
  return {{"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"block_size", c.block_size},
          {"vocab_size", c.vocab_size},
          {"objective", to_string(m.ckpt.objective)},
          {"masked_lm", m.mask_token >= 0},
          {"masks", masks},
          {"mixers", mixer_notes(m.model())},  // each layer's kind and what its weights are (the page's info line)
          {"step", m.ckpt.resumable ? json(m.ckpt.resume.step) : json(nullptr)},
          {"chars", texts_of(first_ids(m.ckpt.tokenizer.num_chars()), m.ckpt.tokenizer)},
          {"specials", m.ckpt.tokenizer.specials()},
          {"note", notes}};  // a format-1 file cannot be verified, a renamed key: ./sample prints these, the explorer answers them
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

// What the logits z predict for the character `target`: its surprisal and rank, and the ten most likely tokens,
// most likely first.
static Prediction predict(const float* z, int V, int target) {
  require_finite_logits(z, V);
  Prediction out;
  const double lse = log_sum_exp(z, V);
  out.nats = lse - z[target];
  // 1 + the tokens ranked before it (more likely, or as likely with a lower id, as the top list orders them)
  long before = 0;
  for (int v = 0; v < V; v++) before += z[v] > z[target] || (z[v] == z[target] && v < target);
  out.rank = before + 1;
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  out.top_count = std::min(10, V);
  std::partial_sort(order.begin(), order.begin() + out.top_count, order.end(),
                    [&](int a, int b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
  for (int i = 0; i < out.top_count; i++) {
    out.top_ids[i] = order[i];
    out.top_p[i] = std::exp(z[order[i]] - lse);
  }
  return out;
}

json score_text_json(ExploredModel& m, const std::vector<int>& ids, const std::function<void()>& between,
                     long top_from, long top_to) {
  GPT& model = m.model();
  const int T = (int)ids.size(), V = model.config.vocab_size;
  const Tokenizer& tok = m.ckpt.tokenizer;
  model.set_masks(m.loaded_masks);
  model.set_prefix_length(0);  // a prefix-LM read left to right is a causal model (as ./sample --score does)
  json bits = json::array(), top = json::array(), p_actual = json::array(), rank = json::array();
  double total_nats = 0;
  long predicted = 0;
  auto record = [&](const Prediction& p) {
    const long t = (long)top.size();  // the character predicted
    bits.push_back(p.nats / std::log(2.0));
    p_actual.push_back(std::exp(-p.nats));
    rank.push_back(p.rank);
    total_nats += p.nats, predicted++;
    if (t < top_from || t > top_to) {
      top.push_back(nullptr);
      return;
    }
    json ten = json::array();
    // 6 decimals (the page shows 0.1%): 17 digits each made a 10,000-character answer 3.2 MB.
    for (int i = 0; i < p.top_count; i++) ten.push_back({tok.decode_one(p.top_ids[i]), std::round(p.top_p[i] * 1e6) / 1e6});
    top.push_back(std::move(ten));
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
      m.forward_rows(batch.data(), B, T);
      for (int b = 0; b < B; b++) record(predict(model.logits() + ((size_t)b * T + start + b) * V, V, ids[start + b]));
    }
  } else {
    // Next-token model: the logits at t − 1 predict x_t; the first character has no prediction.
    const bool leaky = std::any_of(model.masks().begin(), model.masks().end(),
                                   [&](const AttentionMask& mask) { return mask.sees_future(T); });
    method = leaky ? "next (this model's mask lets a position see the character it predicts)" : "next";
    bits.push_back(nullptr), top.push_back(nullptr), p_actual.push_back(nullptr), rank.push_back(nullptr);
    if (T <= m.block_size()) {
      const float* logits = m.logits_for(ids);
      for (int t = 1; t < T; t++) record(predict(logits + (size_t)(t - 1) * V, V, ids[t]));
    } else {
      // A text longer than the block: the sliding windows of ./sample --score (train/evaluate.h), each character
      // predicted once, from up to block_size characters before it. A window whose characters (and the one after
      // it, its last target) were scored before is taken from the model's cache (window_cache.h): a key typed
      // into a long text runs only the windows it changed.
      long computed = 0;
      for (const ScoreWindow& w : score_windows(T, m.block_size())) {
        const std::vector<int> key(ids.begin() + w.start, ids.begin() + w.start + w.length + 1);
        const std::vector<Prediction>* known = m.windows.find(key);
        if (!known) {
          if (computed++ > 0 && between) {
            between();  // others may use the model meanwhile (or this request may be given up): put its masks back
            model.set_masks(m.loaded_masks);
            model.set_prefix_length(0);
          }
          const std::vector<int> window(key.begin(), key.end() - 1);
          const float* logits = m.logits_for(window);
          std::vector<Prediction> predictions;
          for (int t = 0; t < w.length; t++) predictions.push_back(predict(logits + (size_t)t * V, V, key[t + 1]));
          known = m.windows.put(key, std::move(predictions));
        }
        for (long t = w.first; t < w.start + w.length; t++) record((*known)[t - w.start]);
      }
    }
  }
  const double nats = predicted ? total_nats / predicted : NAN;
  // Moved in, not listed in an initializer list, which would copy them: at 10,000 characters `top` is 300,000
  // values, and the copy (and freeing it) took most of a refresh's time.
  json out = json::object();
  out["chars"] = texts_of(ids, tok);
  out["bits"] = std::move(bits);
  out["top"] = std::move(top);
  out["p"] = std::move(p_actual);
  out["rank"] = std::move(rank);
  out["predicted"] = predicted;
  out["method"] = method;
  out["nats_per_char"] = predicted ? json(nats) : json(nullptr);
  out["bits_per_char"] = predicted ? json(nats / std::log(2.0)) : json(nullptr);
  return out;
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
  // Every layer's weights (NH × T × T), read in place after the forward (as lab/html_report.h's dump_attention
  // reads them, without its copy: 64 MB at T = 1000 for the tiny preset).
  m.logits_for(ids);
  const std::vector<AttentionMask> masks = model.masks();
  std::vector<const float*> weights(L);
  for (int l = 0; l < L; l++) {
    weights[l] = model.mixing_weights(l);
    if (!std::all_of(weights[l], weights[l] + (size_t)NH * T * T, [](float p) { return std::isfinite(p); }))
      throw std::runtime_error("the model's attention weights are not finite numbers: its weights are too large or broken");
  }
  auto head_of = [&](int l, int h) { return weights[l] + (size_t)h * T * T; };
  auto row_of = [&](int l, int h, int q) {
    const float* r = head_of(l, h) + (size_t)q * T;
    json row = json::array();
    for (int k = 0; k < T; k++) row.push_back(rounded(r[k]));
    return row;
  };
  auto mask_row = [&](int l, int q) {
    json row = json::array();
    for (int k = 0; k < T; k++) row.push_back(masks[l].allows(q, k, T) ? 1 : 0);
    return row;
  };
  // The chosen key's column: how much every query takes from `position` ("what attends to this character").
  auto column_of = [&](int l, int h, int k) {
    json col = json::array();
    for (int q = 0; q < T; q++) col.push_back(rounded(head_of(l, h)[(size_t)q * T + k]));
    return col;
  };
  auto mask_column = [&](int l, int k) {
    json col = json::array();
    for (int q = 0; q < T; q++) col.push_back(masks[l].allows(q, k, T) ? 1 : 0);
    return col;
  };
  json rows = json::array(), mask_rows = json::array(), cols = json::array(), mask_cols = json::array();
  json map = json::array();
  json spellings = json::array();
  for (int l = 0; l < L; l++) {
    json heads = json::array(), to = json::array();
    for (int h = 0; h < NH; h++) heads.push_back(row_of(l, h, position)), to.push_back(column_of(l, h, position));
    rows.push_back(heads);
    cols.push_back(to);
    mask_rows.push_back(mask_row(l, position));
    mask_cols.push_back(mask_column(l, position));
    spellings.push_back(masks[l].to_string());
  }
  json j = {{"chars", texts_of(ids, m.ckpt.tokenizer)}, {"T", T}, {"n_layer", L}, {"n_head", NH}, {"position", position},
            {"masks", spellings}, {"mixers", mixer_notes(model)}, {"rows", rows},
            {"mask_rows", mask_rows}, {"cols", cols}, {"mask_cols", mask_cols}, {"layer", layer}, {"head", head}};
  // In one pass over each head's map: its largest |weight| (the page scales a head whose weights are not
  // probabilities, signed and unnormalised, by it, as ./inspect attention's page does; a masked weight is 0, so
  // the mask need not be asked), and its whole pattern as a thumbnail of at most kThumb × kThumb cells, each the
  // largest-|weight| entry of the queries × keys it covers (so a one-cell-wide diagonal stays visible). Then the
  // lab's head scores of this text (lab/head_scores.h) for the layers whose weights are probabilities.
  const int S = std::min(T, kThumb);
  std::vector<int> bin(T);
  for (int i = 0; i < T; i++) bin[i] = i * S / T;
  json scale = json::array(), thumbs = json::array(), head_scores = json::array();
  for (int l = 0; l < L; l++) {
    json largest = json::array(), heads = json::array(), scores = json::array();
    const bool probabilities = model.mixer(l).lab().weights_are_probabilities();
    for (int h = 0; h < NH; h++) {
      const float* P = head_of(l, h);
      std::vector<float> cells((size_t)S * S, 0.0f);
      float most = 0;
      for (int q = 0; q < T; q++) {
        float* cell_row = &cells[(size_t)bin[q] * S];
        const float* row = P + (size_t)q * T;
        for (int k = 0; k < T; k++) {
          const float a = std::fabs(row[k]);
          most = std::max(most, a);
          if (a > std::fabs(cell_row[bin[k]])) cell_row[bin[k]] = row[k];
        }
      }
      largest.push_back(rounded(most));
      json flat = json::array();
      for (float c : cells) flat.push_back(std::round(c * 1e4) / 1e4);
      heads.push_back(flat);
      if (!probabilities) {
        scores.push_back(nullptr);
        continue;
      }
      HeadScores hs;
      score_pattern(hs, P, ids.data(), T, masks[l]);
      auto value = [](const Mean& m) { return m.count ? json(m.value()) : json(nullptr); };
      scores.push_back({{"previous_token", value(hs.previous_token)}, {"induction", value(hs.induction)},
                        {"duplicate_token", value(hs.duplicate_token)}, {"sink", value(hs.sink)},
                        {"entropy_norm", value(hs.entropy_norm)}});
    }
    scale.push_back(largest);
    thumbs.push_back(heads);
    head_scores.push_back(scores);
  }
  j["scale"] = scale, j["thumb_size"] = S, j["thumbs"] = thumbs, j["head_scores"] = head_scores;
  if (with_map) {
    // Compact: each query's allowed keys only (every mask allows one run of keys, ops/mask.h), 4 decimals (what
    // the page shows): at T = 1000 a causal map is half a million numbers, not a million and a 0/1 mask beside.
    json begin = json::array();
    for (int q = 0; q < T; q++) {
      const KeyRange K = masks[layer].keys_for(q, T);
      const float* row = head_of(layer, head) + (size_t)q * T;
      json weights = json::array();
      for (int k = K.begin; k < K.end; k++) weights.push_back(std::round(row[k] * 1e4) / 1e4);
      map.push_back(weights), begin.push_back(K.begin);
    }
    j["map"] = map, j["map_begin"] = begin;
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
  const float* z = m.logits_for(input) + (size_t)(T - 1) * V;
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
  m.forward_rows(nullptr, 0, 0);  // fill_blanks runs the model itself
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
  m.forward_rows(nullptr, 0, 0);  // generate runs the model itself
  Rng rng(seed);
  try {
    generate(m.model(), prompt, n, options, rng, m.mask_token, [&](int token) {
      if (!emit(m.ckpt.tokenizer.decode_one(token))) throw ReaderLeft{};
    });
  } catch (const ReaderLeft&) {
  }
}

json refresh_json(ExploredModel& m, const std::vector<int>& ids, int position, int layer, int head, bool with_map,
                  const SamplingOptions& options, const std::function<void()>& between, long top_from, long top_to) {
  const int T = (int)ids.size(), B = m.block_size();
  if (position < 0 || position >= T)
    throw BadRequest("position " + std::to_string(position) + " is outside the text (0 to " + std::to_string(T - 1) + ")");
  const long before = m.forwards;
  // The window the page's attention panel reads (page.h's attentionWindow): block_size characters ending at the
  // chosen one (a masked LM's: centred on it), inside the text.
  const int back = m.mask_token >= 0 ? B / 2 : B - 1;
  const int start = std::max(0, std::min(position - back, T - B));
  const std::vector<int> window(ids.begin() + start, ids.begin() + std::min(T, start + B));
  const std::vector<int> last(ids.begin() + std::max(0, T - B), ids.end());
  // Attention first: its forward keeps the logits that the next reader of the same characters under the same
  // masks takes. A text within the block: score (the same masks, always), then next (the same unless a prefix-LM
  // reads it as its prefix). A longer one: next (the last block_size characters, attention's window when the last
  // character is chosen), then score's windows.
  json j = {{"attention", attention_at_json(m, window, position - start, layer, head, with_map)},
            {"window_start", start}};
  if (T <= B) j["score"] = score_text_json(m, ids, between, top_from, top_to);
  j["next"] = next_json(m, last, options);
  if (T > B) j["score"] = score_text_json(m, ids, between, top_from, top_to);
  j["forwards"] = m.forwards - before;
  return j;
}
