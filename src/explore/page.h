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
// refresh, or "error: …" on a script error; data-refreshes counts complete refreshes, and data-latency is the
// milliseconds from the last key to the refresh that drew its answer in every panel (debounce included).
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
/* One column; from 1200 px the attention panel beside the text and its strip (each column may shrink: min 0). */
#layout { display: grid; grid-template-columns: minmax(0, 1fr); gap: 0 28px; align-items: start; }
@media (min-width: 1200px) { #layout { grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); } }
section { min-width: 0; }
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
#heads button.head { padding: 0; border: 0; background: none; display: block; }
#heads button.head:focus-visible { outline: 2px solid #1f4fa0; outline-offset: 2px; }
.hl { font-size: 10px; color: #666; }
#map { border: 1px solid #999; image-rendering: pixelated; max-width: 100%; }
#map[width="0"] { display: none; }  /* no map yet: not even its border */
#map:focus-visible, #strip:focus-visible { outline: 2px solid #1f4fa0; outline-offset: 2px; }
#tip { position: absolute; display: none; background: #ffffe8; border: 1px solid #888; padding: 3px 7px;
       font: 12px monospace; pointer-events: none; white-space: pre; z-index: 9; color: #000; }
#card { font: 12px monospace; white-space: pre-wrap; margin-top: 4px; }
#card:focus-visible { outline: 2px solid #1f4fa0; outline-offset: 2px; }
#error { color: #a00000; font-size: 13px; min-height: 1em; white-space: pre-wrap; }
button { font-size: 13px; }
#ckpt { max-width: calc(100vw - 130px); }
#thumbs { display: flex; flex-wrap: wrap; gap: 8px; max-width: 640px; }
#thumbs figure { margin: 0; font: 10px monospace; color: #444; width: 72px; }
#thumbs button { padding: 0; border: 1px solid #bbb; background: none; display: block; }
#thumbs button[aria-pressed=true] { outline: 2px solid #e08000; }
#thumbs canvas { display: block; width: 64px; height: 64px; image-rendering: pixelated; }
#heads tr { display: flex; flex-wrap: wrap; align-items: center; gap: 0 6px; }
/* Explorer III: the run's timeline, heads knocked out, the logit lens. */
#interp { display: grid; grid-template-columns: minmax(0, 1fr); gap: 0 28px; align-items: start; }
@media (min-width: 1200px) { #interp { grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); } }
#timeline { border: 1px solid #ccc; max-width: 100%; cursor: pointer; }
#scrub { width: min(600px, 100%); }
#knock button { font: 11px monospace; margin: 0 4px 4px 0; padding: 2px 5px; background: #f4f4f4; border: 1px solid #aaa; }
#knock button[aria-pressed=true] { background: #333; color: #fff; }
#lenstable { font: 12px monospace; border-collapse: collapse; }
#steptable { font: 12px monospace; border-collapse: collapse; }
#steptable td, #steptable th { padding: 1px 8px 1px 0; text-align: right; white-space: nowrap; }
#lenstable td, #lenstable th { padding: 1px 8px 1px 0; text-align: left; white-space: nowrap; }
#dla .bar .track { width: 160px; }
#dla .bar .p { background: #1f4fa0; }
#dla .bar .n { position: absolute; right: 50%; top: 0; height: 13px; background: #b03020; }
#dla .bar .ch { width: 120px; }
@media (max-width: 600px) {  /* a phone: nothing wider than the screen */
  body { margin: 8px; }
  .bar .track { width: 130px; }
  #heads th { width: 100%; white-space: normal; }
}
</style></head>
<body data-status="loading" data-refreshes="0">
<header>
  <h1>plaingpt explorer</h1>
  <label>checkpoint <select id="ckpt"></select></label> <button id="relist" title="list the folder again" aria-label="list the folder's checkpoints again">&#8635;</button>
  <span id="info"></span>
</header>
<main id="layout">
<section id="reading" aria-label="the text and its surprise">
<label for="text" class="note">Text (the model reads it as you type)</label>
<textarea id="text" rows="4" spellcheck="false" placeholder="Type here"></textarea>
<div id="error" role="alert"></div>
<div id="busy" class="note" role="status" hidden>computing&hellip;</div>
<h2><span id="striptitle">Surprise of each character</span> <span class="note" id="total" aria-live="polite"></span> <span class="note" id="lensnote"
  aria-live="polite"></span></h2>
<div class="note"><span id="legendtext">Colour = &minus;log&#8322; p(character | what the model sees)</span>,
  <span id="legendlow">0</span> <span id="legend"></span> <span id="legendhigh">10+ bits</span>.
  Hover a character for what the model expected there; click it to see its attention.</div>
<div id="strip" tabindex="0" role="group" aria-label="the text, coloured; arrow keys move the chosen character"></div>
<div id="card" class="note" tabindex="0" role="status" aria-live="polite"></div>
<div class="controls" style="margin-top:10px">
  <label>temperature <input id="temperature" type="range" min="0" max="2" step="0.05" value="0.8"> <span id="tval">0.80</span></label>
  <label>top-k <input id="top_k" type="number" min="0" value="40"></label>
  <label>top-p <input id="top_p" type="range" min="0.05" max="1" step="0.01" value="0.95"> <span id="pval">0.95</span></label>
  <span id="genbox"><label>characters <input id="n" type="number" min="1" max="2000" value="200"></label>
  <label>seed <input id="seed" type="number" min="0" value="1"></label>
  <button id="generate">Generate</button> <button id="stop" disabled>Stop</button></span>
  <span id="fillbox" hidden><button id="fill">Fill the blanks (_)</button></span>
</div>
<h2>Next character <span class="note" id="nextnote"></span></h2>
<div class="note">grey: the model's probabilities; blue: what a sample is drawn from after temperature, top-k, top-p</div>
<div id="bars" role="list" aria-label="the most likely next characters"></div>
</section>
<section id="attnpanel" aria-label="attention">
    <h2 id="attntitle">Attention</h2>
    <div class="note">Each strip: one head's weights from the chosen character to every key (left = first character);
      grey = masked. Hover a head to read it on the text, click it to keep it there and see its full map.</div>
    <div class="controls" role="radiogroup" aria-label="what colours the text">colour the text by:
      <label><input type="radio" name="lens" value="surprise" checked> surprise</label>
      <label><input type="radio" name="lens" value="from"> the head's attention from the chosen character</label>
      <label><input type="radio" name="lens" value="to"> to it</label>
      <label><input type="checkbox" id="maxheads"> max over all heads</label></div>
    <table id="heads"></table>
    <h2>Whole patterns</h2>
    <div class="note">Each head over the whole window (rows = queries, columns = keys) and the lab's head scores on
      this text: prev = previous-token, ind = induction, dup = duplicate-token, sink = weight on the first character.</div>
    <div id="thumbs"></div>
    <h2 id="maptitle"></h2>
    <div class="note" id="mapnote"></div>
    <canvas id="map" width="0" height="0" tabindex="0" role="img" aria-label="the chosen head's full map: arrow keys move along it"></canvas>
    <div class="note" id="mapread" aria-live="polite"></div>
</section>
</main>
<main id="interp" aria-label="the run and the model's inside">
<section id="runpanel" aria-label="the training run">
  <h2>The run <span class="note" id="runnote"></span></h2>
  <div class="note">Training (grey) and validation (black) loss against step, from metrics.csv; each snapshot's best
    induction score per layer (coloured, right axis 0 to 1) on a probe of repeated random characters. Drag the slider,
    click the plot or use the arrow keys: every panel moves to that snapshot.</div>
  <canvas id="timeline" width="600" height="200" role="img" aria-label="loss and induction score against step"></canvas><br>
  <input id="scrub" type="range" min="0" max="0" step="1" value="0" aria-label="snapshot" disabled>
  <div class="note" id="scrubread" aria-live="polite"></div>
  <h2>Knock heads out <span class="note" id="abltotal" aria-live="polite"></span></h2>
  <div class="note">Click heads to remove them (again to put them back); the text is then coloured by the change in
    surprise: <span style="background:rgb(190,40,30);color:#fff">&nbsp;harder&nbsp;</span> or
    <span style="background:rgb(40,90,200);color:#fff">&nbsp;easier&nbsp;</span> than with every head.
    <label>how <select id="ablhow"><option value="zero">zero (the head adds nothing)</option>
    <option value="mean">mean (its average over the text)</option></select></label></div>
  <div id="knock" role="group" aria-label="heads to knock out"></div>
</section>
<section id="lenspanel" aria-label="the logit lens">
  <details id="lensbox"><summary><h2 style="display:inline">Logit lens <span class="note" id="lensread"></span></h2></summary>
  <div class="note">At the chosen character: what each layer would predict if the model stopped there (the final norm
    and unembedding applied to the residual stream), and p of the character that actually comes next.</div>
  <table id="lenstable"></table>
  <h2>Direct logit attribution <span class="note" id="dlanote"></span></h2>
  <div class="note">What each head and each MLP adds to the logit of the actual next character, through the final
    LayerNorm with its scale frozen at the full residual's (so the parts add up to the logit).</div>
  <div id="dla" role="list" aria-label="each part's share of the logit"></div>
  </details>
  <details id="stepbox"><summary><h2 style="display:inline">One head, step by step <span class="note" id="stepread"></span></h2></summary>
  <div class="note">The chosen head (click one in the attention panel) at the chosen character: its query q against
    every key k, the scale, the mask, the weights and the weighted sum of the values, each step named with the
    textbook function that computes it (docs/tour.md's table), and the model's own weights and output beside them.
    A recurrent layer shows its kind's own steps instead (how its state decays, what it erases, what it writes and
    how it is read) and the head's output recomputed from them.</div>
  <ol id="steplist" class="note"></ol>
  <table id="steptable"></table>
  <div class="note" id="stepout"></div>
  </details>
</section>
</main>
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
  lens: 'surprise',   // what colours the text: surprise, or attention 'from' / 'to' the chosen character
  maxHeads: false,    // attention lens: the largest weight over every layer's heads instead of one head's
  preview: null,      // {l, h} of the head under the pointer (read on the text until the pointer leaves)
  A: null, aw: null, w: null,  // the last attention answer, its window, the scored text
  map: false,         // whether that map is asked for (a head was clicked): at T = 1000 it is a million numbers
  seq: 0,             // refresh counter: an answer to an older refresh is dropped
  tab: Math.random().toString(36).slice(2),  // names this page to the server, which skips its superseded refreshes
  refreshing: null,   // AbortController of the refresh in flight: a newer refresh cancels it
  generating: null,   // AbortController of the running generation
  typedAt: 0,         // performance.now() of the last key not yet answered by a refresh
  filled: [],         // positions in the box that Fill wrote (underlined until the text is edited)
  mapKey: 0,          // the key the map's keyboard cursor reads
  forwards: 0,        // forward passes the last refresh cost (the server counts them)
};

// ---- the API: parameters as a form body, JSON back; a non-2xx answer becomes an Error with the server's message.
async function api(path, params, signal) {
  let r, j;
  try {
    r = await fetch(path, { method: 'POST', body: new URLSearchParams(params), signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new Error('the server is not answering (is ./inspect serve still running?)');
  }
  try { j = await r.json(); } catch (e) { throw new Error('HTTP ' + r.status + ': the server\'s answer is not JSON'); }
  if (!r.ok) throw new Error(j.error || ('HTTP ' + r.status));
  return j;
}
function showError(e) { $('error').textContent = e ? String(e.message || e) : ''; }

// A character as it can be seen: space, newline and tab get a visible sign.
const visible = c => c === ' ' ? '\u2423' : c === '\n' ? '\u21b5' : c === '\t' ? '\u21e5' : c;
document.addEventListener('touchstart', e => { if (!(e.target instanceof HTMLSpanElement)) hideTip(true); }, { passive: true });
const debounce = (f, ms) => { let t; return () => { clearTimeout(t); t = setTimeout(f, ms); }; };

// A click pins the tooltip (it stays while the pointer moves on) until the next click elsewhere or Escape.
let pinned = false;
function showTip(e, text, pin) {
  if (pinned && !pin) return;
  pinned = !!pin;
  tip.textContent = text;
  tip.style.display = 'block';
  // Beside the pointer, but never past the window's right edge (a phone is 390 px wide).
  const room = document.documentElement.clientWidth + window.scrollX - tip.offsetWidth - 4;
  tip.style.left = Math.max(window.scrollX + 2, Math.min(e.pageX + 14, room)) + 'px';
  tip.style.top = (e.pageY + 14) + 'px';
}
function hideTip(force) {
  if (pinned && force !== true) return;
  pinned = false;
  tip.style.display = 'none';
}
document.addEventListener('click', e => { if (!(e.target instanceof HTMLSpanElement)) hideTip(true); }, true);
document.addEventListener('keydown', e => { if (e.key === 'Escape') hideTip(true); });

// ---- the text box. A next-token model's score reads the whole text (sliding windows of block_size characters,
// as ./sample --score); a masked LM's the last block_size. Attention reads the block_size characters that end at
// the chosen one (a masked LM's: around it; the server says where they start), the next character the last
// block_size.
function windowText() {
  const chars = Array.from(box.value);  // code points, as the tokenizer counts them
  const B = S.model ? S.model.block_size : chars.length;
  const start = S.model && S.model.masked_lm ? Math.max(0, chars.length - B) : 0;
  return { chars, B, text: chars.slice(start).join(''), start, total: chars.length,
           last: chars.slice(Math.max(0, chars.length - B)).join('') };
}
function samplingParams() {
  return { temperature: $('temperature').value, top_k: $('top_k').value, top_p: $('top_p').value };
}

// One refresh: one request, /api/refresh, whose score, attention and next come from one forward pass when the
// text fits the block; drawn together, so the panels never disagree. "busy" shows after 300 ms. An error leaves
// no stale panel behind, and stays until a refresh succeeds.
// The first half of a character left alone in the text (an unpaired UTF-16 surrogate, e.g. one half of an emoji
// deleted), as "U+D83D at character 3", or ''. It cannot be sent as UTF-8: encodeURIComponent throws on it, and
// the page stopped there without a word.
function unpairedSurrogate(text) {
  let chars = 0;
  for (let i = 0; i < text.length; i++, chars++) {
    const u = text.charCodeAt(i);
    if (u >= 0xd800 && u <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++;
      continue;
    }
    if (u >= 0xd800 && u <= 0xdfff) return 'U+' + u.toString(16).toUpperCase() + ' at character ' + chars;
  }
  return '';
}
async function refresh() {
  const seq = ++S.seq;
  const w = windowText();
  const broken = unpairedSurrogate(box.value);
  if (broken) {
    showError('the text holds half of a character (an unpaired UTF-16 surrogate, ' + broken + '): delete it or ' +
              'complete the character');
    clearPanels('');
    document.body.dataset.status = 'ok';
    return;
  }
  history.replaceState(null, '', '#text=' + encodeURIComponent(box.value) + '&ckpt=' + encodeURIComponent(S.ckpt));
  const n = Array.from(w.text).length;
  $('busy').textContent = 'computing\u2026' + (S.model && S.model.masked_lm && n > 64 ? ' (a masked LM scores each of the ' +
      n + ' characters with a forward pass of its own over the whole text: this takes a while)' : '');
  const busy = setTimeout(() => { if (seq === S.seq) $('busy').hidden = false; }, 300);
  try {
    if (!S.model) return;
    if (!w.text || (S.model.masked_lm && w.text.includes('_'))) {
      showError(null);
      clearPanels(w.text ? 'the text has blanks: press "Fill the blanks"' : '');
    } else {
      const T = Array.from(w.text).length;
      if (S.pos >= T) S.pos = -1;
      const pos = S.pos < 0 ? T - 1 : S.pos;
      // The refresh before this one, if still in flight, is cancelled: its connection closes and the server, told
      // this page's newest seq, does not compute it if it has not begun.
      if (S.refreshing) S.refreshing.abort();
      const ctrl = S.refreshing = new AbortController();
      const R = await api('/api/refresh', Object.assign({ ckpt: S.ckpt, text: w.text, position: pos, layer: S.layer,
                                                          head: S.head, map: S.map ? 1 : 0, tab: S.tab, seq,
                                                          top_from: Math.max(0, pos - w.B), top_to: pos + w.B },
                                                        samplingParams()), ctrl.signal);
      if (S.refreshing === ctrl) S.refreshing = null;
      if (seq !== S.seq) return;
      showError(null);
      S.w = w;
      S.forwards = R.forwards;
      drawStrip(R.score, w);
      drawAttention(R.attention, { start: w.start + R.window_start, position: pos - R.window_start });
      paintStrip();
      drawNext(R.next, w.last);
      afterRefresh(w, pos);
    }
    if (seq !== S.seq) return;
    document.body.dataset.refreshes = +document.body.dataset.refreshes + 1;
    if (S.typedAt) document.body.dataset.latency = Math.round(performance.now() - S.typedAt);  // key → every panel, ms
    S.typedAt = 0;
    if (!document.body.dataset.status.startsWith('error')) document.body.dataset.status = 'ok';
  } catch (e) {
    if (seq === S.seq) { showError(e); clearPanels(''); document.body.dataset.status = 'ok'; }
  } finally {
    clearTimeout(busy);
    if (seq === S.seq) $('busy').hidden = true;
  }
}
const refreshSoon = debounce(refresh, 120);

function clearPanels(note) {
  for (const id of ['strip', 'bars', 'heads', 'thumbs', 'card']) $(id).replaceChildren();
  $('attntitle').textContent = 'Attention';
  $('nextnote').textContent = '';
  $('total').textContent = note;
  $('map').width = $('map').height = 0;
  $('maptitle').textContent = $('mapnote').textContent = $('lensnote').textContent = '';
  S.A = null;
  drawLegend();
}

// ---- surprisal: white (0 bits) through yellow to red (10 bits and more).
function heat(bits) {
  const t = Math.max(0, Math.min(1, bits / 10));
  const mix = (a, b, u) => Math.round(a + (b - a) * u);
  return t < 0.5 ? 'rgb(255,' + mix(255, 215, 2 * t) + ',' + mix(255, 90, 2 * t) + ')'
                 : 'rgb(' + mix(255, 225, 2 * t - 1) + ',' + mix(215, 60, 2 * t - 1) + ',' + mix(90, 40, 2 * t - 1) + ')';
}
// Black or white text, whichever reads better on a background "rgb(r,g,b)" (WCAG contrast: black on the reddest
// surprise colour is 4.9:1, on attention's darkest blue white is 11:1).
function ink(rgb) {
  const m = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(rgb);
  if (!m) return '#000';
  const lin = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  const L = 0.2126 * lin(+m[1]) + 0.7152 * lin(+m[2]) + 0.0722 * lin(+m[3]);
  return (L + 0.05) / 0.05 >= 1.05 / (L + 0.05) ? '#000' : '#fff';
}
// What the model expected at character t of the last score: its top 10, the actual character marked ▶ (and added
// below with its rank when it is not among them).
function predictionText(score, t) {
  const c = score.chars[t], bits = score.bits[t];
  if (bits === null) return '\u00ab' + visible(c) + '\u00bb  first character: nothing to predict it from';
  if (score.top[t] === null) {  // far from the chosen character of a long text: asked for now
    askTop(score, t);
    return '\u00ab' + visible(c) + '\u00bb  ' + bits.toFixed(2) + ' bits: p = ' + (100 * score.p[t]).toFixed(1) +
           '%, rank ' + score.rank[t] + ' of ' + S.model.vocab_size + '\nthe model expected: (asking the server\u2026)';
  }
  const line = (ch, p) => (ch === c ? '\u25b6 ' : '  ') + visible(ch).padEnd(3) + (100 * p).toFixed(1).padStart(5) + '%';
  const lines = score.top[t].map(([ch, p]) => line(ch, p));
  if (score.rank[t] > score.top[t].length) lines.push('  \u2026', line(c, score.p[t]) + '  rank ' + score.rank[t]);
  return '\u00ab' + visible(c) + '\u00bb  ' + bits.toFixed(2) + ' bits: p = ' + (100 * score.p[t]).toFixed(1) +
         '%, rank ' + score.rank[t] + ' of ' + S.model.vocab_size + '\nthe model expected:\n' + lines.join('\n');
}
// A refresh lists what the model expected only near the chosen character (at 10,000 characters the lists were 2 MB
// of every answer); another character's list is asked for when it is pointed at, and the tooltip redrawn.
let asking = -1;
function askTop(score, t) {
  if (asking === t) return;
  asking = t;
  api('/api/score', { ckpt: S.ckpt, text: S.w.text, top_from: t, top_to: t }).then(j => {
    asking = -1;
    if (S.score !== score) return;
    score.top[t] = j.top[t];
    if (tip.style.display === 'block' && S.tipAt === t) tip.textContent = predictionText(score, t);
  }).catch(e => {
    asking = -1;
    showError(e);
  });
}
// The strip's spans are kept from one refresh to the next and only what changed is written (a key changes one
// character of a long text: 10,000 new spans, each with its own listeners, took ~180 ms to build); the pointer is
// followed by the strip's own listeners (below), which find the character under it by the span's _t.
function drawStrip(score, w) {
  const strip = $('strip'), T = score.chars.length;
  S.score = score;
  while (strip.children.length > T) strip.lastChild.remove();
  while (strip.children.length < T) strip.appendChild(document.createElement('span'));
  const spans = strip.children, chosen = S.pos < 0 ? T - 1 : S.pos;
  for (let t = 0; t < T; t++) {
    const span = spans[t], c = score.chars[t], bits = score.bits[t];
    const shown = c === '\n' ? '\u21b5\n' : c, b = bits === null ? '' : bits.toFixed(3);
    if (span.textContent !== shown) span.textContent = shown;
    if (span.dataset.bits !== b) span.dataset.bits = b;
    span._t = t;
    span.classList.toggle('sel', t === chosen);
    span.classList.toggle('filled', S.filled.includes(w.start + t));
  }
  // The chosen character's prediction as text, for the keyboard and screen readers (the tooltip follows the
  // pointer only): a live region, so moving the chosen character with the arrows reads it out, and Tab reaches it.
  $('card').textContent = 'character ' + (w.start + chosen) + ' (chosen): ' + predictionText(score, chosen);
  $('total').textContent = score.bits_per_char === null ? '' :
      score.bits_per_char.toFixed(3) + ' bits/char over ' + score.predicted + ' predicted characters' +
      (w.start > 0 ? ' (the last ' + T + ' of ' + w.total + ' characters: a masked LM reads ' + T + ')' :
       T > w.B ? ' (windows of ' + w.B + ' characters, each character predicted once, as ./sample --score)' : '') +
      (score.method === 'masked' ? ', each predicted with [MASK] in its place' : '');
}

// The text coloured by attention: one head's weights from the chosen character to every character of the window
// attention read (or to it from every one), or the largest over all heads (a signed head's |weight| over its
// scale). Characters outside that window are left white. dataset.w holds the weight drawn (tests read it).
// A span's colours, written only when they change (10,000 spans restyled at every key took ~200 ms).
const inkOf = new Map();
function paint(sp, background) {
  if (sp._bg === background) return;
  sp._bg = background;
  sp.style.background = background;
  if (!inkOf.has(background)) inkOf.set(background, ink(background));
  sp.style.color = inkOf.get(background);
}
function paintStrip() {
  const spans = $('strip').children, A = S.A, aw = S.aw, w = S.w, from = S.lens === 'from';
  const values = A && (from ? A.rows : A.cols), allowed = A && (from ? A.mask_rows : A.mask_cols);
  const head = S.preview || { l: S.layer, h: S.head };
  // A signed head's scale on the text: its row's (or column's) largest |weight|; in "max over all heads", each
  // weight's share of its row's total |weight|, which like a probability sums to 1 over the row, so a signed head
  // is not always at its darkest beside a softmax one (each head at its own largest, hybrids were all dark).
  const scale = A && S.lens !== 'surprise' ? rowScale(values[head.l][head.h], allowed[head.l]) : 0;
  const total = A && S.lens !== 'surprise' && S.maxHeads ?
      values.map((heads, l) => heads.map(row => row.reduce((sum, v, k) => sum + (allowed[l][k] ? Math.abs(v) : 0), 0))) : null;
  for (let t = 0; t < spans.length; t++) {
    const sp = spans[t], bits = sp.dataset.bits;
    if (S.lens === 'surprise' || !A || !w) {
      paint(sp, bits === '' ? '#eeeeee' : heat(+bits));
      if (sp.dataset.w !== undefined) delete sp.dataset.w;
      continue;
    }
    const k = w.start + t - aw.start;
    if (k < 0 || k >= A.T) {
      paint(sp, '#ffffff');
      sp.dataset.w = '';
      continue;
    }
    if (S.maxHeads) {
      let best = -1;
      for (let l = 0; l < A.n_layer; l++)
        for (let h = 0; h < A.n_head; h++) {
          if (!allowed[l][k]) continue;
          const v = values[l][h][k];
          best = Math.max(best, A.mixers[l].probabilities ? v : (total[l][h] > 0 ? Math.abs(v) / total[l][h] : 0));
        }
      paint(sp, best < 0 ? '#c8c8c8' : weightColor(best));
      sp.dataset.w = best < 0 ? '' : best.toFixed(6);
    } else {
      const ok = allowed[head.l][k], v = values[head.l][head.h][k];
      paint(sp, ok ? headColor(A, head.l, v, scale) : '#c8c8c8');
      sp.dataset.w = ok ? v.toFixed(6) : '';
    }
  }
  drawLegend();
  paintAblation();
  const signed = A && A.mixers.some(m => !m.probabilities);
  $('lensnote').textContent = S.lens === 'surprise' || !A ? '' : S.maxHeads ?
      'the text: the largest weight over every head, ' + (S.lens === 'from' ? 'from' : 'to') + ' the chosen character' +
      (signed ? ' (a signed head: the weight\u2019s share of its row\u2019s total |weight|)' : '') :
      'the text: layer ' + head.l + ', head ' + head.h + (S.preview ? ' (preview)' : '') + ', weights ' +
      (S.lens === 'from' ? 'from' : 'to') + ' the chosen character';
}

// The strip's heading and legend say what colours the text now: surprise, or attention (one head's, signed or a
// probability, or the largest over every head). They said "surprise" whatever the text was coloured by.
function drawLegend() {
  const A = S.A, head = S.preview || { l: S.layer, h: S.head };
  const direction = S.lens === 'from' ? 'from' : 'to';
  let text, low, high, stops;
  if (S.lens === 'surprise' || !A) {
    text = 'Colour = \u2212log\u2082 p(character | what the model sees)';
    low = '0';
    high = '10+ bits';
    stops = [0, 2.5, 5, 7.5, 10].map(heat);
  } else if (!S.maxHeads && !A.mixers[head.l].probabilities) {
    text = 'Colour = layer ' + head.l + ', head ' + head.h + '\u2019s signed weight ' + direction +
           ' the chosen character, over its largest |weight| there';
    low = '\u2212largest';
    high = '+largest';
    stops = [negativeColor(1), negativeColor(0.25), '#ffffff', weightColor(0.25), weightColor(1)];
  } else {
    text = 'Colour = ' + (S.maxHeads ? 'the largest attention weight over every head' :
                          'layer ' + head.l + ', head ' + head.h + '\u2019s attention weight') + ' ' + direction +
           ' the chosen character';
    low = '0';
    high = '1';
    stops = [0, 0.25, 0.5, 0.75, 1].map(weightColor);
  }
  $('striptitle').textContent = S.lens === 'surprise' || !A ? 'Surprise of each character' : 'Attention on each character';
  $('legendtext').textContent = text;
  $('legendlow').textContent = low;
  $('legendhigh').textContent = high;
  $('legend').style.background = 'linear-gradient(to right,' + stops.join(',') + ')';
}

// ---- attention: one strip per head (the chosen query's row), one full map on request.
function weightRGB(p) {  // white → dark blue
  const a = Math.sqrt(Math.max(0, Math.min(1, p)));
  return [Math.round(255 - 247 * a), Math.round(255 - 207 * a), Math.round(255 - 148 * a)];
}
function negativeRGB(p) {  // white → dark red
  const a = Math.sqrt(Math.max(0, Math.min(1, p)));
  return [Math.round(255 - 90 * a), Math.round(255 - 230 * a), Math.round(255 - 220 * a)];
}
function cssColor(rgb) { return 'rgb(' + rgb.join(',') + ')'; }
function weightColor(p) { return cssColor(weightRGB(p)); }
function negativeColor(p) { return cssColor(negativeRGB(p)); }
// A weight's colour. A layer whose weights are probabilities: 0 white to 1 dark blue. One whose weights are signed
// and not normalised (a recurrence's implied M): divided by s, the largest |weight| of the row it is drawn in (a
// strip, one row of the map or of a thumbnail), positive blue, negative red. Scaled by the head's largest
// |weight| over its whole map, as ./inspect attention's page does, a recurrent layer 0's row peaked at 6-14% of it
// (almost white) while the decay's early rows took the scale (issue 48).
function headRGB(A, l, v, s) {
  if (A.mixers[l].probabilities) return weightRGB(v);
  const w = s > 0 ? v / s : 0;
  return w < 0 ? negativeRGB(-w) : weightRGB(w);
}
function headColor(A, l, v, s) { return cssColor(headRGB(A, l, v, s)); }
// The largest |weight| of a row (the allowed entries only, when a 0/1 mask row is given).
function rowScale(row, allowed) {
  let s = 0;
  for (let k = 0; k < row.length; k++) if (!allowed || allowed[k]) s = Math.max(s, Math.abs(row[k]));
  return s;
}
const kSignedScale = 'signed, each row scaled to its own largest |weight|';
function kindNote(A, l) {
  const m = A.mixers[l];
  return m.about + (m.probabilities ? '' : '; its weights are signed and not normalised: blue positive, red negative, ' +
                    'here each row (a strip, a row of the map or of a thumbnail) is scaled by its own largest ' +
                    '|weight|, not the whole head\u2019s');
}
function drawAttention(A, aw) {
  const T = A.T, pos = aw.position;
  S.A = A; S.aw = aw; S.preview = null;
  $('attntitle').textContent = 'Attention of character ' + (aw.start + pos) + ' \u00ab' + visible(A.chars[pos]) + '\u00bb' +
      (aw.start > 0 ? ' (reading characters ' + aw.start + '\u2013' + (aw.start + T - 1) + ')' : '');
  const table = $('heads'), cell = Math.max(1, Math.min(8, Math.floor(160 / T)));
  table.replaceChildren();
  for (let l = 0; l < A.n_layer; l++) {
    const tr = document.createElement('tr'), th = document.createElement('th');
    th.textContent = 'layer ' + l + ' \u00b7 ' + A.masks[l] + ' \u00b7 ' + A.mixers[l].kind +
        (A.mixers[l].probabilities ? '' : ' \u00b7 ' + kSignedScale);
    th.title = kindNote(A, l);
    tr.appendChild(th);
    for (let h = 0; h < A.n_head; h++) {
      const td = document.createElement('td'), c = document.createElement('canvas'), label = document.createElement('div');
      c.width = T * cell; c.height = 12;
      c.style.width = Math.min(T * cell, 240) + 'px'; c.style.height = '12px';
      c.dataset.layer = l; c.dataset.head = h;
      const ctx = c.getContext('2d'), scale = rowScale(A.rows[l][h], A.mask_rows[l]);
      for (let k = 0; k < T; k++) {
        ctx.fillStyle = A.mask_rows[l][k] ? headColor(A, l, A.rows[l][h][k], scale) : '#c8c8c8';
        ctx.fillRect(k * cell, 0, cell, 12);
      }
      if (l === A.layer && h === A.head) c.classList.add('sel');
      c.addEventListener('mousemove', e => {
        const k = Math.floor((e.offsetX / c.clientWidth) * T);
        if (k >= 0 && k < T) showTip(e, 'L' + l + 'H' + h + ': \u00ab' + visible(A.chars[pos]) + '\u00bb \u2192 key ' + k +
            ' \u00ab' + visible(A.chars[k]) + '\u00bb ' + (A.mask_rows[l][k] ? A.rows[l][h][k].toFixed(3) : 'masked'));
      });
      const button = document.createElement('button');
      button.className = 'head';
      button.setAttribute('aria-label', 'layer ' + l + ' head ' + h + ': read it on the text and show its map');
      button.setAttribute('aria-pressed', l === A.layer && h === A.head ? 'true' : 'false');
      button.addEventListener('mouseenter', () => { S.preview = { l, h }; paintStrip(); });
      button.addEventListener('focus', () => { S.preview = { l, h }; paintStrip(); });
      button.addEventListener('mouseleave', () => { hideTip(); S.preview = null; paintStrip(); });
      button.addEventListener('blur', () => { S.preview = null; paintStrip(); });
      button.addEventListener('click', () => openMap(l, h));
      label.className = 'hl';
      label.textContent = 'H' + h;
      button.appendChild(c);
      td.appendChild(button); td.appendChild(label);
      tr.appendChild(td);
    }
    table.appendChild(tr);
  }
  drawThumbs(A);
  if (A.map) drawMap(A, pos);
  else {
    $('map').width = $('map').height = 0;
    $('maptitle').textContent = '';
    $('mapnote').textContent = 'Click a strip for that head\u2019s full map.';
  }
}
// A head chosen (its strip or its thumbnail clicked): its map is asked for and drawn. Enter or Space on the button
// moves the focus to the map, which the redrawn panel would otherwise drop to the page body, about 30 Tabs away.
let keyedHead = false;  // Enter or Space went down on a head's button: the click that follows is the keyboard's
document.addEventListener('keydown', e => {
  keyedHead = (e.key === 'Enter' || e.key === ' ') && !!e.target.closest && !!e.target.closest('#heads, #thumbs');
});
function openMap(l, h) {
  S.layer = l;
  S.head = h;
  S.map = true;
  const byKeyboard = keyedHead;
  keyedHead = false;
  refresh().then(() => { if (byKeyboard && $('map').width > 0) $('map').focus(); });
}
// Every head's whole pattern, small, with its head scores; a click chooses the head as a strip's click does.
function drawThumbs(A) {
  const grid = $('thumbs'), S0 = A.thumb_size;
  grid.replaceChildren();
  const f = v => v === null || v === undefined ? '-' : v.toFixed(2);
  for (let l = 0; l < A.n_layer; l++)
    for (let h = 0; h < A.n_head; h++) {
      const fig = document.createElement('figure'), b = document.createElement('button'), c = document.createElement('canvas');
      const cap = document.createElement('figcaption');
      c.width = c.height = S0;
      const ctx = c.getContext('2d');
      for (let r = 0; r < S0; r++) {
        const row = A.thumbs[l][h].slice(r * S0, (r + 1) * S0), scale = rowScale(row);
        row.forEach((v, i) => {
          ctx.fillStyle = headColor(A, l, v, scale);
          ctx.fillRect(i, r, 1, 1);
        });
      }
      const sc = A.head_scores[l][h];
      cap.textContent = 'L' + l + 'H' + h + (sc ? ' prev ' + f(sc.previous_token) + ' ind ' + f(sc.induction) +
          ' dup ' + f(sc.duplicate_token) + ' sink ' + f(sc.sink) : ' (signed)');
      b.setAttribute('aria-label', 'layer ' + l + ' head ' + h + ', whole pattern: show its map');
      b.setAttribute('aria-pressed', l === A.layer && h === A.head && A.map ? 'true' : 'false');
      b.addEventListener('click', () => openMap(l, h));
      b.appendChild(c); fig.appendChild(b); fig.appendChild(cap); grid.appendChild(fig);
    }
}

// The map's weight of query q on key k, or null where the mask forbids it (the answer holds each query's allowed
// run of keys only, from map_begin[q]).
function mapAt(A, q, k) {
  const i = k - A.map_begin[q];
  return i >= 0 && i < A.map[q].length ? A.map[q][i] : null;
}
// The full T × T map of the chosen head: rows are queries, columns keys, grey = masked, the chosen row outlined.
// By keyboard (it takes the focus): up and down choose the query (the chosen character), left and right a key,
// read out below it.
function drawMap(A, pos) {
  const T = A.T, l = A.layer, h = A.head, cell = Math.max(3, Math.min(14, Math.floor(330 / T))), pad = cell >= 9 ? 14 : 0;
  const c = $('map');
  c.width = c.height = T * cell + pad;
  c.style.width = c.style.height = Math.min(c.width, 330) + 'px';  // a long text's map is shrunk, never wider
  const ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  ctx.font = '10px monospace';
  ctx.fillStyle = '#444';
  ctx.textAlign = 'center';
  if (pad) for (let i = 0; i < T; i++) {  // the characters along the top (keys) and the left (queries)
    ctx.fillText(visible(A.chars[i]), pad + i * cell + cell / 2, 10);
    ctx.fillText(visible(A.chars[i]), 6, pad + i * cell + cell / 2 + 4);
  }
  // The cells as pixels written at once: a block-1024 map of 1000 characters is a million cells, and with one
  // fillRect each a key took 1.1 s to every panel with the map open, 0.49 s so (make explore-latency, issue 48).
  const side = T * cell, image = ctx.createImageData(side, side), px = image.data;
  for (let q = 0; q < T; q++) {
    const scale = rowScale(A.map[q]);  // the allowed keys only: the answer holds no others
    for (let k = 0; k < T; k++) {
      const v = mapAt(A, q, k);
      const rgb = v === null ? [200, 200, 200] : headRGB(A, l, v, scale);
      for (let y = q * cell; y < (q + 1) * cell; y++)
        for (let x = k * cell; x < (k + 1) * cell; x++) {
          const i = 4 * (y * side + x);
          px[i] = rgb[0];
          px[i + 1] = rgb[1];
          px[i + 2] = rgb[2];
          px[i + 3] = 255;
        }
    }
  }
  ctx.putImageData(image, pad, pad);
  ctx.strokeStyle = '#e08000'; ctx.lineWidth = 2;
  ctx.strokeRect(pad + 1, pad + pos * cell + 1, T * cell - 2, cell - 2);
  $('maptitle').textContent = 'Layer ' + l + ', head ' + h;
  $('mapnote').textContent = 'mask ' + A.masks[l] + '; ' + kindNote(A, l) + '; rows = queries, columns = keys';
  c.onmousemove = e => {
    const zoom = c.width / c.clientWidth;
    const k = Math.floor((e.offsetX * zoom - pad) / cell), q = Math.floor((e.offsetY * zoom - pad) / cell);
    if (q < 0 || k < 0 || q >= T || k >= T) return hideTip();
    showTip(e, mapReading(A, q, k));
  };
  c.onmouseleave = hideTip;
  S.mapKey = Math.min(S.mapKey, T - 1);
  c.onkeydown = e => {
    const step = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[e.key];
    if (!step) return;
    e.preventDefault();
    S.mapKey = Math.max(0, Math.min(T - 1, S.mapKey + step[1]));
    $('mapread').textContent = mapReading(A, Math.max(0, Math.min(T - 1, pos + step[0])), S.mapKey);
    if (step[0] && pos + step[0] >= 0 && pos + step[0] < T) {
      S.pos = S.aw.start - S.w.start + pos + step[0];
      refresh().then(() => $('map').focus());
    }
  };
}

function mapReading(A, q, k) {
  const v = mapAt(A, q, k);
  return 'query ' + q + ' \u00ab' + visible(A.chars[q]) + '\u00bb \u2192 key ' + k + ' \u00ab' + visible(A.chars[k]) +
         '\u00bb: ' + (v === null ? 'masked' : v.toFixed(4));
}

// ---- the next character: the 16 most likely, before (grey) and after (blue) temperature, top-k and top-p.
function drawNext(N, text) {
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
  if (!w.text || !S.model || (S.model.masked_lm && w.text.includes('_'))) return;
  const seq = S.seq;
  api('/api/next', Object.assign({ ckpt: S.ckpt, text: w.last }, samplingParams()))
      .then(N => { if (seq === S.seq) { showError(null); drawNext(N, w.last); } }).catch(showError);
}, 120);

// ---- generation, streamed: one JSON line per token; Stop (or leaving the page) closes the connection.
async function generate() {
  const ctrl = new AbortController();
  let failed = null;
  S.generating = ctrl;
  $('generate').disabled = true; $('stop').disabled = false; box.readOnly = true;
  try {
    const params = Object.assign({ ckpt: S.ckpt, text: windowText().last, n: $('n').value, seed: $('seed').value },
                                 samplingParams());
    let r;
    try {
      r = await fetch('/api/generate', { method: 'POST', body: new URLSearchParams(params), signal: ctrl.signal });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new Error('the server is not answering (is ./inspect serve still running?)');
    }
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
    if (e.name !== 'AbortError') failed = e;
  } finally {
    S.generating = null;
    $('generate').disabled = false; $('stop').disabled = true; box.readOnly = false;
    S.pos = -1;
    await refresh();
    if (failed) showError(failed);  // after the refresh, which clears the errors of the text
  }
}

// ---- fill-in-the-blank, for a masked-LM checkpoint: each '_' becomes the model's most confident character.
async function fill() {
  try {
    const w = windowText();
    const F = await api('/api/fill', { ckpt: S.ckpt, text: w.text, blank: '_' });
    box.value = Array.from(box.value).slice(0, w.start).join('') + F.text;
    S.filled = F.filled.map(t => w.start + t);
    await refresh();
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
  const gone = !L.checkpoints.some(c => c.name === S.ckpt);
  if (gone) S.ckpt = L.default;
  select.value = S.ckpt;
  return gone;
}
async function openCheckpoint(name) {
  S.ckpt = name;
  try {
    S.model = await api('/api/model', { ckpt: name });
  } catch (e) {
    // Nothing of the model shown before stays on the page under the name that failed.
    S.model = null;
    $('info').textContent = '';
    clearPanels('');
    throw new Error(name + ' could not be opened: ' + e.message);
  }
  const M = S.model;
  $('info').textContent = M.n_layer + ' layers \u00d7 ' + M.n_head + ' heads, ' + M.n_embd + ' wide, block ' +
      M.block_size + ', ' + M.objective + ', masks ' + Array.from(new Set(M.masks)).join('/') + ', ' +
      'mixers ' + Array.from(new Set(M.mixers.map(m => m.kind))).join('/') + (M.step !== null ? ', step ' + M.step : '') +
      ', ' + M.chars.length + ' characters';
  $('genbox').hidden = M.masked_lm;
  $('fillbox').hidden = !M.masked_lm;
  $('top_k').max = M.vocab_size;
  S.layer = Math.min(S.layer, M.n_layer - 1); S.head = Math.min(S.head, M.n_head - 1);
  modelOpened(M);
  await refresh();
}

box.addEventListener('input', () => { S.pos = -1; S.filled = []; S.typedAt = performance.now(); refreshSoon(); });
$('temperature').addEventListener('input', () => { $('tval').textContent = (+$('temperature').value).toFixed(2); nextSoon(); });
$('top_p').addEventListener('input', () => { $('pval').textContent = (+$('top_p').value).toFixed(2); nextSoon(); });
$('top_k').addEventListener('input', nextSoon);
for (const r of document.querySelectorAll('input[name=lens]'))
  r.addEventListener('change', () => { S.lens = r.value; paintStrip(); });
$('maxheads').addEventListener('change', () => { S.maxHeads = $('maxheads').checked; paintStrip(); });
// The strip's characters under the pointer: what the model expected there; a click chooses the character.
$('strip').addEventListener('mousemove', e => {
  if (e.target._t === undefined || !S.score) return;
  S.tipAt = e.target._t;
  showTip(e, predictionText(S.score, e.target._t));
});
$('strip').addEventListener('mouseout', e => { if (e.target._t !== undefined) hideTip(); });
$('strip').addEventListener('click', e => {
  const t = e.target._t;
  if (t === undefined || !S.score) return;
  S.pos = t;
  S.tipAt = t;
  showTip(e, predictionText(S.score, t), true);
  refresh();
});
// The strip by keyboard: arrows move the chosen character, Home and End go to the ends.
$('strip').addEventListener('keydown', e => {
  const T = $('strip').children.length, now = S.pos < 0 ? T - 1 : S.pos;
  const to = { ArrowLeft: now - 1, ArrowRight: now + 1, Home: 0, End: T - 1 }[e.key];
  if (to === undefined || T === 0) return;
  e.preventDefault();
  S.pos = Math.max(0, Math.min(T - 1, to));
  refresh();
});
$('generate').addEventListener('click', generate);
$('stop').addEventListener('click', () => { if (S.generating) S.generating.abort(); });
$('fill').addEventListener('click', fill);
$('ckpt').addEventListener('change', () => openCheckpoint($('ckpt').value).catch(showError));
// ↻: if the chosen checkpoint is gone, the default one opens (and the info line describes it).
$('relist').addEventListener('click', () =>
  listCheckpoints().then(gone => gone ? openCheckpoint(S.ckpt) : refresh()).catch(showError));
// A #text=…&ckpt=… link followed in this tab (the page itself only replaces its address, which fires nothing).
window.addEventListener('hashchange', () => {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has('text')) box.value = hash.get('text');
  S.pos = -1; S.filled = [];
  const name = hash.get('ckpt');
  (name && name !== S.ckpt ? openCheckpoint(name) : refresh()).catch(showError);
});
drawLegend();

// ---- Explorer III: the run's timeline and its scrubber, heads knocked out, the logit lens (docs/explore.md).
// Each asks its own endpoint after a refresh has drawn (afterRefresh), so typing costs what it did; an answer for
// an older refresh is dropped. data-ablations, data-lenses and data-timeline count what was drawn (tests read them).
const X = {
  off: [],           // heads knocked out, as "L.H"
  how: 'zero',
  abl: null,         // the last /api/ablate answer, for the text it was asked for (abl.forText)
  timeline: null,    // /api/timeline's answer
  at: -1,            // the snapshot the scrubber is on (−1: none chosen)
};
function bump(name) { document.body.dataset[name] = +(document.body.dataset[name] || 0) + 1; }

// The change in surprise, in two colours: red harder (delta > 0), blue easier; white no change (4 bits = full).
function deltaColor(d) {
  const a = Math.sqrt(Math.min(1, Math.abs(d) / 4));
  return d > 0 ? 'rgb(255,' + Math.round(255 - 195 * a) + ',' + Math.round(255 - 215 * a) + ')'
               : 'rgb(' + Math.round(255 - 215 * a) + ',' + Math.round(255 - 165 * a) + ',' + Math.round(255 - 55 * a) + ')';
}
function paintAblation() {
  const spans = $('strip').children, A = X.abl, on = A && X.off.length && S.lens === 'surprise' && S.w &&
      A.forText === S.w.text && A.delta.length === spans.length;
  for (let t = 0; t < spans.length; t++) {
    if (!on) {
      delete spans[t].dataset.delta;
      continue;
    }
    const d = A.delta[t];
    spans[t].dataset.delta = d === null ? '' : d.toFixed(4);
    paint(spans[t], d === null ? '#eeeeee' : deltaColor(d));  // through paint(), whose memory of each span's colour must stay true
  }
  $('abltotal').textContent = on && A.delta_bits_per_char !== null ? 'without ' + X.off.join(', ') + ' (' + A.how +
      '): ' + A.bits_per_char.toFixed(3) + ' bits/char, ' + (A.delta_bits_per_char >= 0 ? '+' : '') +
      A.delta_bits_per_char.toFixed(3) + ' against ' + A.intact_bits_per_char.toFixed(3) : '';
}
async function refreshAblation() {
  const w = S.w, seq = S.seq;
  if (!w || !X.off.length) {
    X.abl = null;
    paintStrip();
    return;
  }
  try {
    const A = await api('/api/ablate', { ckpt: S.ckpt, text: w.text, heads: X.off.join(','), how: X.how });
    if (seq !== S.seq || S.w !== w) return;
    A.forText = w.text;
    X.abl = A;
    paintStrip();
    bump('ablations');
  } catch (e) { showError(e); }
}
function drawKnock(M) {
  const box3 = $('knock');
  box3.replaceChildren();
  for (let l = 0; l < M.n_layer; l++)
    for (let h = 0; h < M.n_head; h++) {
      const b = document.createElement('button'), name = l + '.' + h;
      b.textContent = 'L' + l + 'H' + h;
      b.dataset.head = name;
      b.setAttribute('aria-pressed', X.off.includes(name) ? 'true' : 'false');
      b.setAttribute('aria-label', 'knock out layer ' + l + ' head ' + h);
      b.addEventListener('click', () => {
        X.off = X.off.includes(name) ? X.off.filter(n => n !== name) : X.off.concat([name]);
        b.setAttribute('aria-pressed', X.off.includes(name) ? 'true' : 'false');
        refreshAblation();
      });
      box3.appendChild(b);
    }
}

// The lens at the chosen character: the block_size characters that hold it and the next one.
async function refreshLens(w, pos) {
  const seq = S.seq;
  if (!S.model || S.model.masked_lm) {
    $('lenstable').replaceChildren();
    $('dla').replaceChildren();
    return;
  }
  const chars = Array.from(w.text), B = S.model.block_size;
  const start = Math.max(0, Math.min(pos + 2 - B, chars.length - B));
  try {
    const J = await api('/api/lens', { ckpt: S.ckpt, text: chars.slice(start, start + B).join(''), pos: pos - start });
    if (seq !== S.seq) return;
    drawLens(J);
    bump('lenses');
  } catch (e) { showError(e); }
}
function drawLens(J) {
  const table = $('lenstable'), c = J.chars[J.position];
  table.replaceChildren();
  $('lensread').textContent = 'after \u00ab' + visible(c) + '\u00bb' + (J.target === null ? ' (the last character: ' +
      'nothing comes next)' : ', next \u00ab' + visible(J.target) + '\u00bb');
  table.appendChild(tableRow(['after', 'p(next)', 'its top five'], 'th'));
  for (const L of J.layers) {
    const cells = [L.name, L.p_target === null ? '-' : (100 * L.p_target).toFixed(1) + '%',
                   L.top.map(([ch, p]) => visible(ch) + ' ' + (100 * p).toFixed(0) + '%').join('  ')];
    table.appendChild(tableRow(cells, 'td'));
  }
  const dla = $('dla');
  dla.replaceChildren();
  if (!J.attribution) {
    $('dlanote').textContent = '';
    return;
  }
  const D = J.attribution, parts = D.parts.slice().sort((a, b) => Math.abs(b.value) - Math.abs(a.value));
  const most = Math.max(1e-9, ...parts.map(x => Math.abs(x.value)));
  $('dlanote').textContent = 'logit of \u00ab' + visible(D.target) + '\u00bb ' + D.logit.toFixed(3) + ' = parts ' +
      (D.sum - D.final_norm_bias).toFixed(3) + ' + final norm bias ' + D.final_norm_bias.toFixed(3);
  for (const x of parts) {
    const row = document.createElement('div'), name = document.createElement('span'), track = document.createElement('span');
    const bar = document.createElement('span'), num = document.createElement('span');
    row.className = 'bar';
    row.setAttribute('role', 'listitem');
    name.className = 'ch';
    track.className = 'track';
    bar.className = x.value >= 0 ? 'p' : 'n';
    name.textContent = x.head !== null ? 'L' + x.layer + 'H' + x.head : x.name;
    bar.style.width = (50 * Math.abs(x.value) / most) + '%';
    if (x.value >= 0) bar.style.left = '50%';
    num.textContent = (x.value >= 0 ? '+' : '') + x.value.toFixed(3);
    track.appendChild(bar);
    row.appendChild(name);
    row.appendChild(track);
    row.appendChild(num);
    dla.appendChild(row);
  }
}

// The lens is asked only while its panel is open, so that a key costs one request when it is closed (the default).
function afterRefresh(w, pos) {
  X.lensAt = { w, pos };
  if (X.off.length) refreshAblation();
  if ($('lensbox').open) refreshLens(w, pos);
  if ($('stepbox').open) refreshSteps();
}
// One head step by step (/api/head): the attention panel's window, its chosen character and head.
async function refreshSteps() {
  const seq = S.seq, A = S.A, aw = S.aw;
  if (!A || !aw || !S.w) return;
  try {
    const H = await api('/api/head', { ckpt: S.ckpt, text: A.chars.join(''), position: aw.position, layer: S.layer,
                                       head: S.head });
    if (seq !== S.seq) return;
    drawSteps(H);
    bump('steps');
  } catch (e) {
    $('steptable').replaceChildren();
    $('steplist').replaceChildren();
    $('stepread').textContent = '';
    $('stepout').textContent = String(e.message || e);
  }
}
function tableRow(cells, tag) {
  const tr = document.createElement('tr');
  for (const c of cells) {
    const td = document.createElement(tag);
    td.textContent = String(c);
    tr.appendChild(td);
  }
  return tr;
}
// A step's numbers: a scalar as it is, a vector's first eight and an ellipsis.
function shortList(v) {
  if (v.length === 1) return v[0].toPrecision(4);
  return '[' + v.slice(0, 8).map(x => x.toFixed(3)).join(', ') + (v.length > 8 ? ', …' : '') + ']';
}
function drawSteps(H) {
  $('stepread').textContent = 'layer ' + H.layer + ', head ' + H.head + ' (' + H.kind + ') at «' +
      visible(H.chars[H.position]) + '»';
  const list = $('steplist');
  list.replaceChildren();
  for (const st of H.steps) {
    const li = document.createElement('li');
    li.textContent = st.name + ': ' + st.math + ' — ' + st.textbook + ' in ' + st.file;
    list.appendChild(li);
  }
  const table = $('steptable');
  table.replaceChildren();
  const most = Math.max(...H.output.map((o, d) => Math.abs(o - H.model_output[d])));
  if (H.recurrent) {
    // A recurrence's own steps (MixerLab::head_steps): each value the step gives at this character.
    table.appendChild(tableRow(['step', 'value', 'at this character'], 'th'));
    for (const st of H.steps)
      for (const v of st.values) table.appendChild(tableRow([st.name, v.name, shortList(v.values)], 'td'));
    $('stepout').textContent = 'out = ' + shortList(H.output) + ', the head’s share recomputed from these steps; ' +
        'the model’s own within ' + most.toExponential(1) + '. ' + H.about;
    return;
  }
  table.appendChild(tableRow(['key', 'char', 'q·k', 's·q·k', 'mask', 'weight', 'model’s'], 'th'));
  H.dot.forEach((d, j) => {
    const cells = [j, visible(H.chars[j]), d.toFixed(3), H.scaled[j].toFixed(3), H.allowed[j] ? 'yes' : 'no',
                   H.weights[j].toFixed(4), H.model_weights[j].toFixed(4)];
    table.appendChild(tableRow(cells, 'td'));
  });
  $('stepout').textContent = 'O = Σ weight · v = [' + H.output.slice(0, 4).map(o => o.toFixed(3)).join(', ') +
      (H.output.length > 4 ? ', …' : '') + '], the model’s own head output within ' + most.toExponential(1) +
      (H.from_scores ? '' : '; ' + H.about);
}
$('stepbox').addEventListener('toggle', () => { if ($('stepbox').open) refreshSteps(); });
$('lensbox').addEventListener('toggle', () => { if ($('lensbox').open && X.lensAt) refreshLens(X.lensAt.w, X.lensAt.pos); });
function modelOpened(M) {
  X.off = X.off.filter(n => {
    const [l, h] = n.split('.').map(Number);
    return l < M.n_layer && h < M.n_head;
  });
  X.abl = null;
  drawKnock(M);
  const i = X.timeline ? X.timeline.snapshots.findIndex(s => s.name === S.ckpt) : -1;
  if (i < 0) return;
  X.at = i;
  $('scrub').value = i;
  drawTimeline();
}

// ---- the timeline: losses against step, each snapshot marked, the best induction score per layer.
async function loadTimeline() {
  try {
    X.timeline = await api('/api/timeline', {});
  } catch (e) {
    $('runnote').textContent = String(e.message || e);
    return;
  }
  const T = X.timeline, n = T.snapshots.length;
  $('scrub').max = Math.max(0, n - 1);
  $('scrub').disabled = n === 0;
  $('runnote').textContent = n ? n + ' snapshots, steps ' + T.snapshots[0].step + '\u2013' + T.snapshots[n - 1].step :
      'no snapshots in this folder (train with ./train --snapshot-every N, or make induction)';
  X.at = T.snapshots.findIndex(s => s.name === S.ckpt);
  if (X.at >= 0) $('scrub').value = X.at;
  drawTimeline();
  bump('timeline');
}
function bestInduction(snap, l) {
  let best = null;
  for (const h of snap.scores[l] || []) if (h.induction !== null && (best === null || h.induction > best)) best = h.induction;
  return best;
}
function scoreText(score) { return score === null ? '-' : score.toFixed(2); }
const layerColors = ['#e08000', '#1f4fa0', '#2a9d3a', '#a02f9f', '#7a5a00', '#00838f'];
function drawTimeline() {
  const T = X.timeline, c = $('timeline'), ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  if (!T) return;
  const steps = T.metrics.step.concat(T.snapshots.map(s => s.step));
  const maxStep = Math.max(1, ...steps);
  const losses = T.metrics.train_loss.concat(T.metrics.val_loss).filter(v => v !== null);
  const top = losses.length ? Math.max(...losses) * 1.05 : 1;
  const left = 36, right = c.width - 30, y0 = c.height - 18, y1 = 8;
  const x = step => left + (right - left) * step / maxStep;
  const yl = v => y0 - (y0 - y1) * v / top, ys = v => y0 - (y0 - y1) * v;
  ctx.font = '10px sans-serif';
  ctx.fillStyle = '#444';
  ctx.fillText(top.toFixed(1), 2, y1 + 8);
  ctx.fillText('0', 2, y0);
  ctx.fillText('1', right + 6, y1 + 8);
  ctx.fillText(String(maxStep), right - 20, c.height - 4);
  ctx.fillText('0', left, c.height - 4);
  const line = (xs, ys_, color) => {
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let on = false;
    xs.forEach((s, i) => {
      const v = ys_[i];
      if (v === null) return;
      if (on) ctx.lineTo(x(s), v);
      else ctx.moveTo(x(s), v);
      on = true;
    });
    ctx.stroke();
  };
  line(T.metrics.step, T.metrics.train_loss.map(v => v === null ? null : yl(v)), '#999');
  line(T.metrics.step, T.metrics.val_loss.map(v => v === null ? null : yl(v)), '#000');
  const L = T.snapshots.length ? T.snapshots[0].scores.length : 0;
  for (let l = 0; l < L; l++)
    line(T.snapshots.map(s => s.step), T.snapshots.map(s => bestInduction(s, l)).map(b => b === null ? null : ys(b)),
         layerColors[l % layerColors.length]);
  ctx.fillStyle = '#666';
  for (const s of T.snapshots) ctx.fillRect(x(s.step) - 0.5, y0, 1, 4);  // each snapshot marked on the axis
  if (X.at >= 0 && T.snapshots[X.at]) {
    const s = T.snapshots[X.at];
    ctx.strokeStyle = '#e08000';
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(x(s.step), y1);
    ctx.lineTo(x(s.step), y0);
    ctx.stroke();
    const i = T.metrics.step.findIndex(v => v >= s.step);
    const loss = i >= 0 && T.metrics.val_loss[i] !== null ? ', val loss ' + T.metrics.val_loss[i].toFixed(3) + ' (step ' + T.metrics.step[i] + ')' : '';
    const ind = Array.from({ length: L }, (_, l) => 'L' + l + ' ' + scoreText(bestInduction(s, l)));
    $('scrubread').textContent = 'snapshot at step ' + s.step + loss + '; best induction score ' + ind.join(', ');
  }
}
// Scrubbing opens that snapshot: the checkpoint picker, the info line and every panel move to it.
async function scrubTo(i) {
  const T = X.timeline;
  if (!T || !T.snapshots[i]) return;
  X.at = i;
  $('scrub').value = i;
  drawTimeline();
  const name = T.snapshots[i].name;
  if (name === S.ckpt) return;
  $('ckpt').value = name;
  try {
    await openCheckpoint(name);
  } catch (e) {
    showError(e);
  }
  bump('scrubs');
}
$('scrub').addEventListener('input', () => scrubTo(+$('scrub').value));
$('timeline').addEventListener('click', e => {
  const T = X.timeline;
  if (!T || !T.snapshots.length) return;
  const c = $('timeline'), zoom = c.width / c.clientWidth, steps = T.snapshots.map(s => s.step);
  const maxStep = Math.max(1, ...T.metrics.step.concat(steps));
  const step = (e.offsetX * zoom - 36) / (c.width - 66) * maxStep;
  let best = 0;
  steps.forEach((s, i) => {
    if (Math.abs(s - step) < Math.abs(steps[best] - step)) best = i;
  });
  scrubTo(best);
});
$('ablhow').addEventListener('change', () => {
  X.how = $('ablhow').value;
  refreshAblation();
});

// Start: the address's #text=…&ckpt=… if any, else a first sentence.
(async function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  box.value = hash.has('text') ? hash.get('text') : 'Once upon a time';
  S.ckpt = hash.get('ckpt') || '';
  try {
    await listCheckpoints();
    await openCheckpoint(S.ckpt);
    loadTimeline();
  } catch (e) {
    showError(e);
    document.body.dataset.status = 'ok';
  }
})();
</script>
</body></html>
)PAGE";
