#include "lab/html_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/mixer_lab.h"
#include "model/model.h"
#include "data/tokenizer.h"

AttentionDump dump_attention(GPT& model, const std::vector<int>& ids, const Tokenizer& tokenizer) {
  const int T = (int)ids.size(), L = model.config.n_layer, NH = model.config.n_head;
  if (T < 1 || T > model.config.block_size)
    throw std::runtime_error("the prompt must hold 1 to " + std::to_string(model.config.block_size) +
                             " characters, got " + std::to_string(T));
  AttentionDump d;
  d.n_layer = L, d.n_head = NH, d.T = T, d.masks = model.masks();
  for (int id : ids) d.tokens.push_back(tokenizer.decode_one(id));
  for (int l = 0; l < L; l++) {
    const MixerLab& lab = model.mixer(l).lab();
    d.mixers.push_back(model.mixer(l).kind());
    d.probabilities.push_back(lab.weights_are_probabilities());
    d.implied.push_back(lab.weights_are_implied());
    d.descriptions.push_back(lab.weights_description());
  }
  model.forward(ids.data(), nullptr, 1, T);
  for (int l = 0; l < L; l++) {
    const float* p = model.mixing_weights(l);
    d.attn.insert(d.attn.end(), p, p + (size_t)NH * T * T);
  }
  return d;
}

static nlohmann::json to_json(const AttentionDump& d) {
  using nlohmann::json;
  const int T = d.T, NH = d.n_head;
  json attn = json::array(), mask = json::array(), masks = json::array(), scores = json::array();
  for (int l = 0; l < d.n_layer; l++) {
    json layer = json::array();
    for (int h = 0; h < NH; h++) {
      json rows = json::array();
      for (int q = 0; q < T; q++) {
        const float* r = &d.attn[(((size_t)l * NH + h) * T + q) * T];
        json row = json::array();
        for (int k = 0; k < T; k++) row.push_back(std::round(r[k] * 1e6) / 1e6);
        rows.push_back(row);
      }
      layer.push_back(rows);
    }
    attn.push_back(layer);
    json m = json::array();
    for (int q = 0; q < T; q++) {
      json row = json::array();
      for (int k = 0; k < T; k++) row.push_back(d.masks[l].allows(q, k, T) ? 1 : 0);
      m.push_back(row);
    }
    mask.push_back(m);
    masks.push_back(d.masks[l].to_string());
  }
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  for (size_t i = 0; i < d.scores.size(); i++) {
    const HeadScores& s = d.scores[i];
    scores.push_back({{"layer", (int)i / NH}, {"head", (int)i % NH},
                      {"previous_token", num(s.previous_token.value())}, {"duplicate_token", num(s.duplicate_token.value())},
                      {"induction", num(s.induction.value())}, {"sink", num(s.sink.value())},
                      {"distance", num(s.distance.value())}, {"entropy", num(s.entropy.value())},
                      {"entropy_norm", num(s.entropy_norm.value())}, {"confidence", num(s.confidence.value())},
                      {"ov_copying", num(s.ov_copying)}});
  }
  return {{"tokens", d.tokens}, {"n_layer", d.n_layer}, {"n_head", NH}, {"T", T},
          {"masks", masks},    {"mask", mask},         {"attn", attn},   {"scores", scores},
          {"mixers", d.mixers.empty() ? std::vector<std::string>(d.n_layer, ModelConfig{}.mixer) : d.mixers},
          {"probabilities", d.probabilities.empty() ? std::vector<bool>(d.n_layer, true) : d.probabilities},
          {"implied", d.implied.empty() ? std::vector<bool>(d.n_layer, false) : d.implied},
          {"descriptions", d.descriptions.empty() ? std::vector<std::string>(d.n_layer, "") : d.descriptions}};
}

std::string attention_json(const AttentionDump& d) { return to_json(d).dump(); }

// The page's script. Everything it needs is in the JSON block above it; it never fetches anything.
static const char* kScript = R"JS(
window.onerror = function (msg) { document.body.setAttribute('data-status', 'error: ' + msg); };
const D = JSON.parse(document.getElementById('data').textContent);
const MIXERS = D.mixers || D.attention;  // "attention" in JSON written before the key said it holds mixer kinds
const T = D.T, show = t => t === ' ' ? '\u2423' : t === '\n' ? '\u21b5' : t === '\t' ? '\u21e5' : t;
const tip = document.getElementById('tip');
function color(p) {  // white → dark blue
  const a = Math.sqrt(Math.max(0, Math.min(1, p)));
  return 'rgb(' + Math.round(255 - 247 * a) + ',' + Math.round(255 - 207 * a) + ',' + Math.round(255 - 148 * a) + ')';
}
function colorNegative(p) {  // white → dark red
  const a = Math.sqrt(Math.max(0, Math.min(1, p)));
  return 'rgb(' + Math.round(255 - 90 * a) + ',' + Math.round(255 - 230 * a) + ',' + Math.round(255 - 220 * a) + ')';
}
// A layer whose weights are not probabilities (signed, unnormalised): each head is scaled by its largest |A|, positive blue, negative red.
const signed = l => !D.probabilities[l];
const largest = {};
function extent(l, h) {
  const key = l + ',' + h;
  if (!(key in largest)) {
    let m = 0;
    for (let q = 0; q < T; q++) for (let k = 0; k < T; k++) m = Math.max(m, Math.abs(D.attn[l][h][q][k]));
    largest[key] = m;
  }
  return largest[key];
}
function weight(l, h, q, k) {  // in [-1, 1]: the value itself, or M over the head's largest |M|
  const v = D.attn[l][h][q][k];
  if (!signed(l)) return v;
  const m = extent(l, h);
  return m > 0 ? v / m : 0;
}
function cellColor(l, h, q, k) {
  const w = weight(l, h, q, k);
  return w < 0 ? colorNegative(-w) : color(w);
}
function drawHeat(canvas, l, h, cell) {
  canvas.width = canvas.height = T * cell;
  const ctx = canvas.getContext('2d');
  for (let q = 0; q < T; q++)
    for (let k = 0; k < T; k++) {
      ctx.fillStyle = D.mask[l][q][k] ? cellColor(l, h, q, k) : '#c8c8c8';
      ctx.fillRect(k * cell, q * cell, cell, cell);
    }
}
function hover(canvas, l, h, cell) {
  canvas.addEventListener('mousemove', e => {
    const r = canvas.getBoundingClientRect(), s = canvas.width / r.width;
    const k = Math.floor((e.clientX - r.left) * s / cell), q = Math.floor((e.clientY - r.top) * s / cell);
    if (q < 0 || k < 0 || q >= T || k >= T) return;
    tip.style.display = 'block';
    tip.style.left = (e.pageX + 12) + 'px';
    tip.style.top = (e.pageY + 12) + 'px';
    tip.textContent = 'L' + l + 'H' + h + '  query ' + q + ' \u00ab' + show(D.tokens[q]) + '\u00bb \u2192 key ' + k +
        ' \u00ab' + show(D.tokens[k]) + '\u00bb: ' + (D.mask[l][q][k] ? D.attn[l][h][q][k].toFixed(4) : 'masked');
  });
  canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
}
function scoreText(l, h) {
  const s = D.scores.find(s => s.layer === l && s.head === h);
  if (!s) return '';
  const f = v => v === null ? '-' : v.toFixed(2);
  return 'prev ' + f(s.previous_token) + ' ind ' + f(s.induction) + ' dup ' + f(s.duplicate_token) +
         ' sink ' + f(s.sink) + ' ov ' + f(s.ov_copying);
}
function select(l, h) {
  document.querySelectorAll('.head').forEach(e => e.classList.toggle('sel', +e.dataset.l === l && +e.dataset.h === h));
  document.getElementById('dtitle').textContent = 'Layer ' + l + ', head ' + h + ' (mask ' + D.masks[l] + ', ' + MIXERS[l] + ')  ' + scoreText(l, h);
  const big = document.getElementById('big'), cell = Math.max(4, Math.floor(520 / T));
  const fresh = big.cloneNode(false);  // a new canvas: the old one's listeners go with it
  big.replaceWith(fresh);
  fresh.id = 'big';
  drawHeat(fresh, l, h, cell);
  hover(fresh, l, h, cell);
  lines(l, h);
}
function lines(l, h) {  // bertviz-style: queries on the left, keys on the right, line opacity = weight
  const NS = 'http://www.w3.org/2000/svg', svg = document.getElementById('lines'), row = 16, w = 320;
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute('width', w);
  svg.setAttribute('height', T * row + 10);
  const groups = [];
  for (let q = 0; q < T; q++) {
    const g = document.createElementNS(NS, 'g');
    for (let k = 0; k < T; k++) {
      const w = weight(l, h, q, k), p = Math.abs(w);
      if (!D.mask[l][q][k] || p < 0.01) continue;
      const ln = document.createElementNS(NS, 'line');
      ln.setAttribute('x1', 70); ln.setAttribute('y1', q * row + 12);
      ln.setAttribute('x2', w - 70); ln.setAttribute('y2', k * row + 12);
      ln.setAttribute('stroke', w < 0 ? '#a01f1f' : '#1f4fa0'); ln.setAttribute('stroke-opacity', p);
      ln.setAttribute('stroke-width', 2);
      g.appendChild(ln);
    }
    svg.appendChild(g);
    groups.push(g);
  }
  for (let side = 0; side < 2; side++)
    for (let i = 0; i < T; i++) {
      const t = document.createElementNS(NS, 'text');
      t.setAttribute('x', side ? w - 64 : 64); t.setAttribute('y', i * row + 16);
      t.setAttribute('text-anchor', side ? 'start' : 'end');
      t.textContent = show(D.tokens[i]);
      if (!side) {
        t.addEventListener('mouseenter', () => groups.forEach((g, q) => g.style.display = q === i ? '' : 'none'));
        t.addEventListener('mouseleave', () => groups.forEach(g => g.style.display = ''));
        t.style.cursor = 'pointer';
      }
      svg.appendChild(t);
    }
}
const grid = document.getElementById('grid'), small = Math.max(2, Math.min(6, Math.floor(150 / T)));
for (let l = 0; l < D.n_layer; l++) {
  const tr = document.createElement('tr');
  const th = document.createElement('th');
  th.textContent = 'layer ' + l + (D.implied[l] ? ' (' + MIXERS[l] + ')' : '');
  tr.appendChild(th);
  for (let h = 0; h < D.n_head; h++) {
    const td = document.createElement('td'), c = document.createElement('canvas'), cap = document.createElement('div');
    td.className = 'head'; td.dataset.l = l; td.dataset.h = h;
    drawHeat(c, l, h, small);
    hover(c, l, h, small);
    cap.textContent = 'H' + h + '  ' + scoreText(l, h);
    cap.className = 'cap';
    td.appendChild(c); td.appendChild(cap);
    td.addEventListener('click', () => select(l, h));
    tr.appendChild(td);
  }
  grid.appendChild(tr);
}
document.getElementById('prompt').textContent = D.tokens.map(show).join('');
select(0, 0);
document.body.setAttribute('data-status', 'ok');
)JS";

static std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// What each implied-weights layer's heat map shows, in its mixer's own words, once per kind present.
static std::string kind_notes(const AttentionDump& d) {
  std::string notes;
  std::vector<std::string> seen;
  for (size_t l = 0; l < d.descriptions.size(); l++) {
    const std::string& text = d.descriptions[l];
    if (l >= d.implied.size() || !d.implied[l] || text.empty()) continue;
    if (std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
    seen.push_back(text);
    notes += "<p class=\"kind-note\">" + escape_html(text) + "</p>\n";
  }
  return notes;
}

std::string attention_html(const AttentionDump& d, const std::string& title) {
  // JSON inside <script>: a '<' can only occur inside a string, where \u003c means the same, so "</script>" in a
  // prompt cannot end the block.
  std::string data;
  for (char c : attention_json(d)) data += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape_html(title) +
         "</title>\n<style>\nbody{font-family:sans-serif;margin:16px;color:#222}\n"
         "canvas{image-rendering:pixelated;border:1px solid #999;display:block}\n"
         ".head{cursor:pointer;padding:4px;vertical-align:top}.head.sel{outline:3px solid #e08000}\n"
         ".cap{font-size:10px;max-width:160px}\n#detail{display:flex;gap:24px;align-items:flex-start;margin-top:12px}\n"
         "#tip{position:absolute;display:none;background:#ffffe0;border:1px solid #888;padding:2px 6px;"
         "font:12px monospace;pointer-events:none}\n#prompt{font-family:monospace;white-space:pre-wrap;"
         "background:#f4f4f4;padding:6px}\ntext{font:12px monospace}\n</style></head>\n<body data-status=\"loading\">\n"
         "<h1>" + escape_html(title) + "</h1>\n<div id=\"prompt\"></div>\n"
         "<p>Rows are queries, columns keys; grey cells are masked. Hover for a value, click a head to enlarge it. "
         "In the line view, hover a query on the left to see only its lines.</p>\n" + kind_notes(d) +
         "<table id=\"grid\"></table>\n<h2 id=\"dtitle\"></h2>\n<div id=\"detail\"><canvas id=\"big\"></canvas>"
         "<svg id=\"lines\" xmlns=\"http://www.w3.org/2000/svg\"></svg></div>\n<div id=\"tip\"></div>\n"
         "<script type=\"application/json\" id=\"data\">" + data + "</script>\n<script>" + kScript +
         "</script>\n</body></html>\n";
}
