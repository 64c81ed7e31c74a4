// The explorer's page, served by ./inspect serve at "/" (server.h). One self-contained file: its style and plain
// JavaScript are inline, it loads nothing from anywhere else (the server's Content-Security-Policy forbids it),
// and it talks only to the JSON API of server.h (docs/explore.md).
//
// Reading order of the script: the API helper, the text box and its debounced refresh, then one function per
// panel: drawStrip (surprisal), drawAttention (the heads' rows and one head's map), drawNext (the bars),
// generate/fill, and the checkpoint picker. Every string that comes from the checkpoint or the user reaches the
// page through textContent or a canvas, never as HTML, so a vocabulary of '<', '&' or quotes is shown as text.
//
// For scripted tests and links, the address may carry a first text and a checkpoint: /#text=Once%20upon&ckpt=a.safetensors
// (the text runs through the same code as typing). The body's data-status is "loading", "ok" after each complete
// refresh, or "error: …" on a script error; data-refreshes counts complete refreshes.
#pragma once

inline constexpr const char* kExplorePage = R"PAGE(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>plaingpt explorer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font-family: sans-serif; margin: 12px 18px; color: #222; }
header { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
h1 { font-size: 20px; margin: 0 8px 0 0; }
h2 { font-size: 15px; margin: 14px 0 6px; }
#info, .note { color: #555; font-size: 13px; }
textarea { width: 100%; box-sizing: border-box; font: 15px monospace; margin-top: 8px; }
#strip { font: 16px monospace; white-space: pre-wrap; word-break: break-all; line-height: 1.7; padding: 6px;
         background: #fafafa; border: 1px solid #ddd; min-height: 1.7em; }
#strip span { cursor: pointer; border-radius: 2px; }
#strip span.sel { outline: 2px solid #e08000; }
#strip span.filled { text-decoration: underline; text-decoration-color: #1f4fa0; text-decoration-thickness: 2px; }
#legend { display: inline-block; width: 160px; height: 10px; vertical-align: middle; border: 1px solid #bbb; }
.row { display: flex; gap: 22px; flex-wrap: wrap; align-items: flex-start; }
.controls label { margin-right: 12px; font-size: 13px; white-space: nowrap; }
.controls input[type=number] { width: 64px; }
#bars { font: 13px monospace; }
.bar { display: flex; align-items: center; gap: 6px; height: 17px; }
.bar .ch { width: 34px; text-align: right; }
.bar .track { position: relative; width: 200px; height: 13px; background: #f2f2f2; }
.bar .p { position: absolute; left: 0; top: 0; height: 13px; background: #c9c9c9; }
.bar .q { position: absolute; left: 0; top: 3px; height: 7px; background: #1f4fa0; }
#heads td { padding: 2px 6px 2px 0; vertical-align: middle; }
#heads th { font: 12px sans-serif; text-align: left; padding-right: 8px; white-space: nowrap; }
#heads canvas { display: block; cursor: pointer; border: 1px solid #bbb; image-rendering: pixelated; }
#heads canvas.sel { outline: 2px solid #e08000; }
.hl { font-size: 10px; color: #666; }
#map { border: 1px solid #999; image-rendering: pixelated; }
#tip { position: absolute; display: none; background: #ffffe8; border: 1px solid #888; padding: 3px 7px;
       font: 12px monospace; pointer-events: none; white-space: pre; z-index: 9; }
#error { color: #a00000; font-size: 13px; min-height: 1em; white-space: pre-wrap; }
button { font-size: 13px; }
</style></head>
<body data-status="loading" data-refreshes="0">
<header>
  <h1>plaingpt explorer</h1>
  <label>checkpoint <select id="ckpt"></select></label> <button id="relist" title="list the folder again">&#8635;</button>
  <span id="info"></span>
</header>
<textarea id="text" rows="4" spellcheck="false" placeholder="Type here"></textarea>
<div id="error"></div>
<h2>Surprise of each character <span class="note" id="total"></span></h2>
<div class="note">Colour = &minus;log<sub>2</sub> p(character | what the model sees), 0 <span id="legend"></span> 10+ bits.
  Hover a character for what the model expected there; click it to see its attention.</div>
<div id="strip"></div>
<div class="controls" style="margin-top:10px">
  <label>temperature <input id="temperature" type="range" min="0" max="2" step="0.05" value="0.8"> <span id="tval">0.80</span></label>
  <label>top-k <input id="top_k" type="number" min="0" value="40"></label>
  <label>top-p <input id="top_p" type="range" min="0.05" max="1" step="0.01" value="0.95"> <span id="pval">0.95</span></label>
  <span id="genbox"><label>characters <input id="n" type="number" min="1" max="2000" value="200"></label>
  <label>seed <input id="seed" type="number" min="0" value="1"></label>
  <button id="generate">Generate</button> <button id="stop" disabled>Stop</button></span>
  <span id="fillbox" hidden><button id="fill">Fill the blanks (_)</button></span>
</div>
<div class="row">
  <div>
    <h2>Next character <span class="note" id="nextnote"></span></h2>
    <div class="note">grey: the model's probabilities; blue: what a sample is drawn from after temperature, top-k, top-p</div>
    <div id="bars"></div>
  </div>
  <div>
    <h2 id="attntitle">Attention</h2>
    <div class="note">Each strip: one head's weights from the chosen character to every key (left = first character);
      grey = masked. Click a strip for its full map.</div>
    <table id="heads"></table>
    <h2 id="maptitle"></h2>
    <div class="note" id="mapnote"></div>
    <canvas id="map" width="0" height="0"></canvas>
  </div>
</div>
<div id="tip"></div>
<script>
'use strict';
window.onerror = function (msg) { document.body.dataset.status = 'error: ' + msg; };

const $ = id => document.getElementById(id);
const box = $('text'), tip = $('tip');
const S = {           // what the page shows now
  ckpt: '',           // checkpoint file name, as the server lists it
  model: null,        // /api/model's answer
  pos: -1,            // chosen character in the scored window (−1 = the last one)
  layer: 0, head: 0,  // the head whose full map is shown
  seq: 0,             // refresh counter: an answer to an older refresh is dropped
  generating: null,   // AbortController of the running generation
};

// ---- the API: parameters as a form body, JSON back; a non-2xx answer becomes an Error with the server's message.
async function api(path, params, signal) {
  const r = await fetch(path, { method: 'POST', body: new URLSearchParams(params), signal });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || ('HTTP ' + r.status));
  return j;
}
function showError(e) { $('error').textContent = e ? String(e.message || e) : ''; }

// A character as it can be seen: space, newline and tab get a visible sign.
const visible = c => c === ' ' ? '\u2423' : c === '\n' ? '\u21b5' : c === '\t' ? '\u21e5' : c;
const debounce = (f, ms) => { let t; return () => { clearTimeout(t); t = setTimeout(f, ms); }; };

function showTip(e, text) {
  tip.textContent = text;
  tip.style.display = 'block';
  tip.style.left = (e.pageX + 14) + 'px';
  tip.style.top = (e.pageY + 14) + 'px';
}
function hideTip() { tip.style.display = 'none'; }

// ---- the text box. The model reads at most block_size characters: the page scores the last block_size.
function windowText() {
  const chars = Array.from(box.value);  // code points, as the tokenizer counts them
  const B = S.model ? S.model.block_size : chars.length;
  const start = Math.max(0, chars.length - B);
  return { text: chars.slice(start).join(''), start, total: chars.length };
}
function samplingParams() {
  return { temperature: $('temperature').value, top_k: $('top_k').value, top_p: $('top_p').value };
}

// One refresh: surprisal, then attention at the chosen position, then the next-character bars.
async function refresh() {
  const seq = ++S.seq;
  const w = windowText();
  showError(null);
  history.replaceState(null, '', '#text=' + encodeURIComponent(box.value) + '&ckpt=' + encodeURIComponent(S.ckpt));
  try {
    if (!S.model) return;
    if (!w.text || (S.model.masked_lm && w.text.includes('_'))) {
      clearPanels(w.text ? 'the text has blanks: press "Fill the blanks"' : '');
    } else {
      const score = await api('/api/score', { ckpt: S.ckpt, text: w.text });
      if (seq !== S.seq) return;
      const T = score.chars.length;
      if (S.pos >= T) S.pos = -1;
      drawStrip(score, w);
      await drawAttention(w.text, seq);
      await drawNext(w.text, seq);
    }
    if (seq !== S.seq) return;
    document.body.dataset.refreshes = +document.body.dataset.refreshes + 1;
    if (!document.body.dataset.status.startsWith('error')) document.body.dataset.status = 'ok';
  } catch (e) {
    if (seq === S.seq) { showError(e); document.body.dataset.status = 'ok'; }
  }
}
const refreshSoon = debounce(refresh, 250);

function clearPanels(note) {
  for (const id of ['strip', 'bars', 'heads']) $(id).replaceChildren();
  $('total').textContent = note;
  $('map').width = $('map').height = 0;
  $('maptitle').textContent = $('mapnote').textContent = '';
}

// ---- surprisal: white (0 bits) through yellow to red (10 bits and more).
function heat(bits) {
  const t = Math.max(0, Math.min(1, bits / 10));
  const mix = (a, b, u) => Math.round(a + (b - a) * u);
  return t < 0.5 ? 'rgb(255,' + mix(255, 215, 2 * t) + ',' + mix(255, 90, 2 * t) + ')'
                 : 'rgb(' + mix(255, 225, 2 * t - 1) + ',' + mix(215, 60, 2 * t - 1) + ',' + mix(90, 40, 2 * t - 1) + ')';
}
function drawStrip(score, w, filled) {
  const strip = $('strip'), T = score.chars.length;
  strip.replaceChildren();
  const chosen = S.pos < 0 ? T - 1 : S.pos;
  score.chars.forEach((c, t) => {
    const span = document.createElement('span');
    span.textContent = c === '\n' ? '\u21b5\n' : c;
    const bits = score.bits[t];
    span.style.background = bits === null ? '#eeeeee' : heat(bits);
    span.dataset.bits = bits === null ? '' : bits.toFixed(3);
    if (t === chosen) span.classList.add('sel');
    if (filled && filled.includes(t)) span.classList.add('filled');
    span.addEventListener('mousemove', e => {
      if (bits === null) return showTip(e, '\u00ab' + visible(c) + '\u00bb  first character: nothing to predict it from');
      const lines = score.top[t].map(([ch, p]) => '  ' + visible(ch).padEnd(3) + (100 * p).toFixed(1).padStart(5) + '%');
      showTip(e, '\u00ab' + visible(c) + '\u00bb  ' + bits.toFixed(2) + ' bits\nthe model expected:\n' + lines.join('\n'));
    });
    span.addEventListener('mouseleave', hideTip);
    span.addEventListener('click', () => { S.pos = t; refresh(); });
    strip.appendChild(span);
  });
  $('total').textContent = score.bits_per_char === null ? '' :
      score.bits_per_char.toFixed(3) + ' bits/char over ' + score.predicted + ' predicted characters' +
      (w.start > 0 ? ' (the last ' + T + ' of ' + w.total + ' characters: the model reads ' + T + ')' : '') +
      (score.method === 'masked' ? ', each predicted with [MASK] in its place' : '');
}

// ---- attention: one strip per head (the chosen query's row), one full map.
function weightColor(p) {  // white → dark blue
  const a = Math.sqrt(Math.max(0, Math.min(1, p)));
  return 'rgb(' + Math.round(255 - 247 * a) + ',' + Math.round(255 - 207 * a) + ',' + Math.round(255 - 148 * a) + ')';
}
async function drawAttention(text, seq) {
  const T = Array.from(text).length, pos = S.pos < 0 ? T - 1 : S.pos;
  const A = await api('/api/attention', { ckpt: S.ckpt, text, position: pos, layer: S.layer, head: S.head });
  if (seq !== S.seq) return;
  $('attntitle').textContent = 'Attention of character ' + pos + ' \u00ab' + visible(A.chars[pos]) + '\u00bb';
  const table = $('heads'), cell = Math.max(2, Math.min(8, Math.floor(160 / T)));
  table.replaceChildren();
  for (let l = 0; l < A.n_layer; l++) {
    const tr = document.createElement('tr'), th = document.createElement('th');
    th.textContent = 'layer ' + l + ' \u00b7 ' + A.masks[l] + (A.implied[l] ? ' \u00b7 ' + A.attention[l] : '');
    tr.appendChild(th);
    for (let h = 0; h < A.n_head; h++) {
      const td = document.createElement('td'), c = document.createElement('canvas'), label = document.createElement('div');
      c.width = T * cell; c.height = 12;
      c.dataset.layer = l; c.dataset.head = h;
      const ctx = c.getContext('2d');
      for (let k = 0; k < T; k++) {
        ctx.fillStyle = A.mask_rows[l][k] ? weightColor(A.rows[l][h][k]) : '#c8c8c8';
        ctx.fillRect(k * cell, 0, cell, 12);
      }
      if (l === A.layer && h === A.head) c.classList.add('sel');
      c.addEventListener('mousemove', e => {
        const k = Math.floor((e.offsetX / c.clientWidth) * T);
        if (k >= 0 && k < T) showTip(e, 'L' + l + 'H' + h + ': \u00ab' + visible(A.chars[pos]) + '\u00bb \u2192 key ' + k +
            ' \u00ab' + visible(A.chars[k]) + '\u00bb ' + (A.mask_rows[l][k] ? A.rows[l][h][k].toFixed(3) : 'masked'));
      });
      c.addEventListener('mouseleave', hideTip);
      c.addEventListener('click', () => { S.layer = l; S.head = h; refresh(); });
      label.className = 'hl';
      label.textContent = 'H' + h;
      td.appendChild(c); td.appendChild(label);
      tr.appendChild(td);
    }
    table.appendChild(tr);
  }
  drawMap(A, pos);
}
// The full T × T map of the chosen head: rows are queries, columns keys, grey = masked, the chosen row outlined.
function drawMap(A, pos) {
  const T = A.T, cell = Math.max(3, Math.min(14, Math.floor(330 / T))), pad = cell >= 9 ? 14 : 0;
  const c = $('map');
  c.width = c.height = T * cell + pad;
  const ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  ctx.font = '10px monospace'; ctx.fillStyle = '#444'; ctx.textAlign = 'center';
  if (pad) for (let i = 0; i < T; i++) {  // the characters along the top (keys) and the left (queries)
    ctx.fillText(visible(A.chars[i]), pad + i * cell + cell / 2, 10);
    ctx.fillText(visible(A.chars[i]), 6, pad + i * cell + cell / 2 + 4);
  }
  for (let q = 0; q < T; q++)
    for (let k = 0; k < T; k++) {
      ctx.fillStyle = A.mask[q][k] ? weightColor(A.map[q][k]) : '#c8c8c8';
      ctx.fillRect(pad + k * cell, pad + q * cell, cell, cell);
    }
  ctx.strokeStyle = '#e08000'; ctx.lineWidth = 2;
  ctx.strokeRect(pad + 1, pad + pos * cell + 1, T * cell - 2, cell - 2);
  $('maptitle').textContent = 'Layer ' + A.layer + ', head ' + A.head;
  $('mapnote').textContent = 'mask ' + A.masks[A.layer] + ', ' + A.attention[A.layer] +
      (A.implied[A.layer] ? ' (the weights it implies)' : '') + '; rows = queries, columns = keys';
  c.onmousemove = e => {
    const k = Math.floor((e.offsetX - pad) / cell), q = Math.floor((e.offsetY - pad) / cell);
    if (q < 0 || k < 0 || q >= T || k >= T) return hideTip();
    showTip(e, 'query ' + q + ' \u00ab' + visible(A.chars[q]) + '\u00bb \u2192 key ' + k + ' \u00ab' + visible(A.chars[k]) +
        '\u00bb: ' + (A.mask[q][k] ? A.map[q][k].toFixed(4) : 'masked'));
  };
  c.onmouseleave = hideTip;
}

// ---- the next character: the 16 most likely, before (grey) and after (blue) temperature, top-k and top-p.
async function drawNext(text, seq) {
  const N = await api('/api/next', Object.assign({ ckpt: S.ckpt, text }, samplingParams()));
  if (seq !== undefined && seq !== S.seq) return;
  const order = N.p.map((p, v) => v).sort((a, b) => N.p[b] - N.p[a] || a - b).slice(0, 16);
  const bars = $('bars');
  bars.replaceChildren();
  for (const v of order) {
    const row = document.createElement('div'), ch = document.createElement('span'), track = document.createElement('span');
    const p = document.createElement('span'), q = document.createElement('span'), num = document.createElement('span');
    row.className = 'bar'; ch.className = 'ch'; track.className = 'track'; p.className = 'p'; q.className = 'q';
    ch.textContent = visible(N.tokens[v]);
    p.style.width = (100 * N.p[v]) + '%';
    q.style.width = (100 * N.q[v]) + '%';
    num.textContent = (100 * N.p[v]).toFixed(1) + '% \u2192 ' + (100 * N.q[v]).toFixed(1) + '%';
    track.appendChild(p); track.appendChild(q);
    row.appendChild(ch); row.appendChild(track); row.appendChild(num);
    bars.appendChild(row);
  }
  const kept = N.q.filter(x => x > 0).length;
  $('nextnote').textContent = 'after \u00ab' + visible(Array.from(text).pop()) + '\u00bb: a sample is drawn from ' + kept +
      ' of ' + N.p.length + ' tokens';
}
const nextSoon = debounce(() => {
  const w = windowText();
  if (w.text && S.model && !(S.model.masked_lm && w.text.includes('_'))) drawNext(w.text).catch(showError);
}, 120);

// ---- generation, streamed: one JSON line per token; Stop (or leaving the page) closes the connection.
async function generate() {
  const ctrl = new AbortController();
  S.generating = ctrl;
  $('generate').disabled = true; $('stop').disabled = false; box.readOnly = true;
  try {
    const params = Object.assign({ ckpt: S.ckpt, text: windowText().text, n: $('n').value, seed: $('seed').value },
                                 samplingParams());
    const r = await fetch('/api/generate', { method: 'POST', body: new URLSearchParams(params), signal: ctrl.signal });
    if (!r.ok) throw new Error((await r.json()).error);
    const reader = r.body.getReader(), decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      for (let nl; (nl = buffer.indexOf('\n')) >= 0; buffer = buffer.slice(nl + 1)) {
        const msg = JSON.parse(buffer.slice(0, nl));
        if (msg.error) throw new Error(msg.error);
        if (msg.token !== undefined) { box.value += msg.token; box.scrollTop = box.scrollHeight; }
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') showError(e);
  } finally {
    S.generating = null;
    $('generate').disabled = false; $('stop').disabled = true; box.readOnly = false;
    S.pos = -1;
    refresh();
  }
}

// ---- fill-in-the-blank, for a masked-LM checkpoint: each '_' becomes the model's most confident character.
async function fill() {
  try {
    const w = windowText();
    const F = await api('/api/fill', { ckpt: S.ckpt, text: w.text, blank: '_' });
    box.value = Array.from(box.value).slice(0, w.start).join('') + F.text;
    await refresh();
    const spans = $('strip').children;
    for (const t of F.filled) if (spans[t]) spans[t].classList.add('filled');
  } catch (e) { showError(e); }
}

// ---- the checkpoint picker: every *.safetensors of the served folder.
async function listCheckpoints() {
  const L = await api('/api/checkpoints', {});
  const select = $('ckpt');
  select.replaceChildren();
  for (const c of L.checkpoints) {
    const o = document.createElement('option');
    o.value = c.name;
    o.textContent = c.name + '  (' + new Date(c.modified_unix * 1000).toLocaleString() + ')';
    select.appendChild(o);
  }
  if (!L.checkpoints.some(c => c.name === S.ckpt)) S.ckpt = L.default;
  select.value = S.ckpt;
}
async function openCheckpoint(name) {
  S.ckpt = name;
  S.model = await api('/api/model', { ckpt: name });
  const M = S.model;
  $('info').textContent = M.n_layer + ' layers \u00d7 ' + M.n_head + ' heads, ' + M.n_embd + ' wide, block ' +
      M.block_size + ', ' + M.objective + ', masks ' + Array.from(new Set(M.masks)).join('/') + ', ' +
      Array.from(new Set(M.attention)).join('/') + ' attention' + (M.step !== null ? ', step ' + M.step : '') +
      ', ' + M.chars.length + ' characters';
  $('genbox').hidden = M.masked_lm;
  $('fillbox').hidden = !M.masked_lm;
  $('top_k').max = M.vocab_size;
  S.layer = Math.min(S.layer, M.n_layer - 1); S.head = Math.min(S.head, M.n_head - 1);
  await refresh();
}

box.addEventListener('input', () => { S.pos = -1; refreshSoon(); });
$('temperature').addEventListener('input', () => { $('tval').textContent = (+$('temperature').value).toFixed(2); nextSoon(); });
$('top_p').addEventListener('input', () => { $('pval').textContent = (+$('top_p').value).toFixed(2); nextSoon(); });
$('top_k').addEventListener('input', nextSoon);
$('generate').addEventListener('click', generate);
$('stop').addEventListener('click', () => { if (S.generating) S.generating.abort(); });
$('fill').addEventListener('click', fill);
$('ckpt').addEventListener('change', () => openCheckpoint($('ckpt').value).catch(showError));
$('relist').addEventListener('click', () => listCheckpoints().catch(showError));
(function legend() {
  const stops = [0, 2.5, 5, 7.5, 10].map(b => heat(b)).join(',');
  $('legend').style.background = 'linear-gradient(to right,' + stops + ')';
})();

// Start: the address's #text=…&ckpt=… if any, else a first sentence.
(async function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  box.value = hash.has('text') ? hash.get('text') : 'Once upon a time';
  S.ckpt = hash.get('ckpt') || '';
  try {
    await listCheckpoints();
    await openCheckpoint(S.ckpt);
  } catch (e) {
    showError(e);
    document.body.dataset.status = 'ok';
  }
})();
</script>
</body></html>
)PAGE";
