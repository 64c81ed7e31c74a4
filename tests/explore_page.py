#!/usr/bin/env python3
"""Drives the explorer's page (./inspect serve) in headless Chromium through the DevTools protocol, as a user
would: types a prompt key by key, waits for the page, and checks what it drew. Used by `make test-explore`.

  tests/explore_page.py --chromium chromium --url http://127.0.0.1:PORT/ --prompt 'Tom <b>' \
                        --hostile-ckpt '<img ...>.safetensors' --screenshot build/test-explore/page.png

Checks, in order (each failure is printed and makes the exit status 1):
  negative control  a text with a character outside the vocabulary: the page must show the server's error and draw
                    no strip, so the checks below can fail at all
  typing            Input.insertText per character (real input events, through the page's debounce)
  surprisal         one coloured span per character (the first has no prediction), a bits/char total, a tooltip
  heads             one strip per layer × head, no full map until a strip is clicked, then that head's map
  signed            (--signed-ckpt, --signed-kind) a layer's signed weights drawn blue and red, and its own note
  bars              the next-character bars; temperature 0 leaves one bar at 100%
  generate          streams 30 characters into the text box
  hostile text      the prompt and a checkpoint file name holding HTML render as text: no <img> in the page, its
                    onerror never ran, the picker shows the name verbatim
Then a screenshot. Standard library only (a minimal WebSocket client), so CI needs nothing beyond python3.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


class DevTools:
    """One WebSocket connection to a page target: send a command, wait for its answer (events are dropped)."""

    def __init__(self, ws_url):
        u = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("DevTools refused the WebSocket: " + head.decode(errors="replace"))
        self.next_id = 0

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise RuntimeError("DevTools closed the connection")
            data += chunk
        return data

    def _send_text(self, text):
        payload = text.encode()
        header = bytes([0x81])  # FIN, text frame
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)  # a client must mask what it sends (RFC 6455)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _receive(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            if b0 & 0x0F == 0x9:  # ping: answer nothing, DevTools does not need it
                continue
            message += payload
            if b0 & 0x80:
                return json.loads(message)

    def call(self, method, **params):
        self.next_id += 1
        self._send_text(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = self._receive()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})

    def js(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("script failed: " + json.dumps(r["exceptionDetails"])[:500])
        return r["result"].get("value")

    def wait_for(self, expression, seconds=30):
        end = time.time() + seconds
        while time.time() < end:
            if self.js(expression):
                return True
            time.sleep(0.1)
        return False


def visible(c):
    """The page's visible(): space, newline and tab as signs."""
    return {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}.get(c, c)


def start_chromium(chromium, profile):
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile, "--remote-debugging-port=0",
            "--window-size=1400,1000", "about:blank"]
    log = open(os.path.join(profile, "..", "chromium.log"), "ab")
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    port_file = os.path.join(profile, "DevToolsActivePort")
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
            port = int(open(port_file).read().split("\n")[0])
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
            pages = [t for t in targets if t["type"] == "page"]
            if pages:
                return proc, DevTools(pages[0]["webSocketDebuggerUrl"])
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("Chromium did not start (see chromium.log)")


def attention_on_text_checks(dt, n, check):
    """Attention read on the text, both directions, a preview on hover, the max over heads; the keyboard; a link."""
    def lens(value):
        dt.js(f"(() => {{ const r = document.querySelector('input[name=lens][value={value}]'); r.checked = true;"
              " r.dispatchEvent(new Event('change')); return 1; })()")
    legend = ("[document.getElementById('striptitle').textContent, document.getElementById('legendtext').textContent,"
              " document.getElementById('legendhigh').textContent, document.getElementById('legend').style.background]")
    before = dt.js(legend)
    check(before[0].startswith("Surprise") and "log" in before[1] and "bits" in before[2],
          f"coloured by surprise, the heading and legend say so ({before[:3]})")
    # The chosen head's weights from the chosen (last) character, on each character of the text.
    lens("from")
    after = dt.js(legend)
    check(after[0].startswith("Attention") and "weight from the chosen character" in after[1] and after[2] == "1" and
          "rgb(8, 48, 107)" in after[3] and "surprise" not in (after[0] + after[1]).lower(),
          f"coloured by attention, the heading and legend say so, with attention's colours ({after})")
    got = dt.js("""(() => { const A = S.A, out = [];
      Array.from(document.querySelectorAll('#strip span')).forEach((sp, t) => {
        const k = S.w.start + t - S.aw.start;
        out.push([sp.dataset.w, A.mask_rows[S.layer][k] ? A.rows[S.layer][S.head][k].toFixed(6) : '']); });
      return out; })()""")
    check(len(got) == n and all(a == b for a, b in got) and any(a not in ("", "0.000000") for a, _ in got),
          "the text is coloured by the chosen head's weights from the chosen character")
    lens("to")
    got = dt.js("""Array.from(document.querySelectorAll('#strip span')).map((sp, t) =>
      [sp.dataset.w, S.A.mask_cols[S.layer][t] ? S.A.cols[S.layer][S.head][t].toFixed(6) : ''])""")
    check(all(a == b for a, b in got), "and by the weights to it from every character")
    dt.js("(() => { const b = document.querySelectorAll('#heads button.head')[1];"
          " b.dispatchEvent(new MouseEvent('mouseenter')); return 1; })()")
    note = dt.js("document.getElementById('lensnote').textContent")
    check("head 1 (preview)" in note, "hovering a head previews it on the text: " + note)
    dt.js("document.querySelectorAll('#heads button.head')[1].dispatchEvent(new MouseEvent('mouseleave')); 1")
    dt.js("(() => { const m = document.getElementById('maxheads'); m.checked = true; m.dispatchEvent(new Event('change')); return 1; })()")
    got = dt.js("""Array.from(document.querySelectorAll('#strip span')).map((sp, t) => {
      let best = -1; for (let l = 0; l < S.A.n_layer; l++) for (let h = 0; h < S.A.n_head; h++)
        if (S.A.mask_cols[l][t]) best = Math.max(best, S.A.cols[l][h][t]);
      return [sp.dataset.w, best < 0 ? '' : best.toFixed(6)]; })""")
    check(all(a == b for a, b in got), "max over heads: each character's largest weight over every head")
    dt.js("(() => { const m = document.getElementById('maxheads'); m.checked = false; m.dispatchEvent(new Event('change'));"
          " return 1; })()")
    lens("surprise")
    # Keyboard: the strip takes the focus and ← moves the chosen character.
    refreshes = dt.js("+document.body.dataset.refreshes")
    dt.js("(() => { const s = document.getElementById('strip'); s.focus();"
          " s.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowLeft', bubbles: true})); return 1; })()")
    check(dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && S.pos === {n - 2} && "
                      f"document.querySelectorAll('#strip span')[{n - 2}].classList.contains('sel')", 10),
          "the left arrow moves the chosen character")
    dt.js("S.pos = -1; 1")


def key(dt, name, code, text=None):
    """A real key press (DevTools Input.dispatchKeyEvent): the browser's own default actions run, as for a user."""
    params = dict(key=name, code=name, windowsVirtualKeyCode=code)
    if text:
        dt.call("Input.dispatchKeyEvent", type="keyDown", text=text, **params)
    else:
        dt.call("Input.dispatchKeyEvent", type="rawKeyDown", **params)
    dt.call("Input.dispatchKeyEvent", type="keyUp", **params)


def refreshed(dt, condition="true", seconds=30):
    """Wait for a refresh after the one counted now and for `condition` (a JavaScript expression)."""
    return f"+document.body.dataset.refreshes > {dt.js('+document.body.dataset.refreshes')} && ({condition})", seconds


def set_text(dt, text):
    """The box's text replaced at once and an input event sent (as a paste would)."""
    dt.js(f"(() => {{ const b = document.getElementById('text'); b.value = {json.dumps(text)};"
          " b.dispatchEvent(new Event('input')); return 1; })()")


def one_request_per_key_checks(dt, check):
    """A key costs one request, and the server says that request cost one forward pass (a text within the block)."""
    wait = refreshed(dt)
    set_text(dt, "Tom")
    dt.wait_for(*wait)
    dt.js("window.__fetches = []; if (!window.__fetch) { window.__fetch = window.fetch;"
          " window.fetch = (u, o) => { window.__fetches.push(String(u)); return window.__fetch(u, o); }; } 1")
    wait = refreshed(dt)
    dt.call("Input.insertText", text=" ")
    check(dt.wait_for(*wait), "a key refreshes the page")
    fetches, forwards = dt.js("window.__fetches"), dt.js("S.forwards")
    check(fetches == ["/api/refresh"] and forwards == 1,
          f"one key: one request ({fetches}) and one forward pass on the server ({forwards})")
    dt.js("window.fetch = window.__fetch; delete window.__fetch; 1")


def superseded_checks(dt, check):
    """Two refreshes in a row: the first one's request is cancelled (its fetch aborted), both carry the page's tab and
    their seq, and the page ends drawn by the second."""
    dt.js("window.__calls = []; if (!window.__fetch) { window.__fetch = window.fetch;"
          " window.fetch = (u, o) => { window.__calls.push({u: String(u), body: String(o && o.body), signal: o && o.signal});"
          " return window.__fetch(u, o); }; } 1")
    wait = refreshed(dt, "document.body.dataset.status === 'ok'")
    dt.js("refresh(); refresh(); 1")
    check(dt.wait_for(*wait), "two refreshes in a row end in a drawn page")
    calls = dt.js("window.__calls.filter(c => c.u === '/api/refresh').map(c => [c.signal.aborted, c.body])")
    check(len(calls) == 2 and calls[0][0] is True and calls[1][0] is False,
          f"the superseded refresh's request is cancelled ({[c[0] for c in calls]})")
    check(all("tab=" in c[1] and "seq=" in c[1] for c in calls), "each refresh names its page (tab) and its number (seq)")
    dt.js("window.fetch = window.__fetch; delete window.__fetch; 1")


def layout_checks(dt, check):
    """Wide: the attention panel beside the text and its strip; a phone: stacked, nothing wider than the screen."""
    def boxes():
        return dt.js("""(() => { const r = id => { const b = document.getElementById(id).getBoundingClientRect();
            return {left: b.left, right: b.right, top: b.top, bottom: b.bottom}; };
          return {reading: r('reading'), attn: r('attnpanel'), strip: r('strip'), heads: r('heads'),
                  W: document.documentElement.clientWidth, scroll: document.documentElement.scrollWidth}; })()""")
    for width in (1280, 1920):
        dt.call("Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False)
        time.sleep(0.3)
        b = boxes()
        check(b["strip"]["right"] <= b["attn"]["left"] and b["heads"]["left"] >= b["strip"]["right"] and
              b["attn"]["top"] < b["strip"]["bottom"] and b["scroll"] <= width,
              f"at {width} px the attention panel is beside the strip (strip ends at {b['strip']['right']:.0f}, "
              f"attention starts at {b['attn']['left']:.0f}, top {b['attn']['top']:.0f} < {b['strip']['bottom']:.0f})")
    dt.call("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1, mobile=True)
    time.sleep(0.3)
    b = boxes()
    check(b["attn"]["top"] >= b["reading"]["bottom"] - 1, "at 390 px the attention panel is under the text")
    dt.call("Emulation.clearDeviceMetricsOverride")
    time.sleep(0.3)


# WCAG 2 contrast of every element's own text against the first opaque background behind it, computed from the
# CSS colours the browser resolved (disabled controls and placeholders are exempt, as WCAG exempts them).
CONTRAST_JS = """(() => {
  const rgb = s => { const m = /rgba?\(([\d.]+), ([\d.]+), ([\d.]+)(?:, ([\d.]+))?\)/.exec(s);
                     return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : null; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const background = e => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor);
                              if (c && c[3] >= 0.99) return c; } return [255, 255, 255, 1]; };
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    const own = Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim() !== '');
    const r = e.getBoundingClientRect();
    if (!own || r.width === 0 || e.closest('[hidden]') || e.disabled || getComputedStyle(e).visibility === 'hidden') continue;
    const fg = rgb(getComputedStyle(e).color), bg = background(e);
    const a = lum(fg), b = lum(bg), ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    out.push([ratio, e.tagName + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '') + ' ' +
              e.textContent.trim().slice(0, 20)]);
  }
  out.sort((x, y) => x[0] - y[0]);
  return {count: out.length, worst: out.slice(0, 3)}; })()"""


def accessibility_checks(dt, check):
    """Contrast of every text (the strip coloured by surprise and by attention included), labels, live regions, heads
    as labelled buttons."""
    # The "to" lens on the first character: every query's weight on it, up to 1 (the darkest blue) in a causal head.
    wait = refreshed(dt, "S.pos === 0")
    dt.js("document.querySelectorAll('#strip span')[0].click(); document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'})); 1")
    dt.wait_for(*wait)
    for lens in ("surprise", "from", "to"):
        dt.js(f"(() => {{ const r = document.querySelector('input[name=lens][value={lens}]'); r.checked = true;"
              " r.dispatchEvent(new Event('change')); return 1; })()")
        c = dt.js(CONTRAST_JS)
        check(c["count"] > 20 and c["worst"][0][0] >= 4.5,
              f"text contrast at least 4.5:1 ({lens} lens, {c['count']} texts; lowest {c['worst'][:2]})")
    dt.js("S.pos = -1; 1")
    dt.js("(() => { const r = document.querySelector('input[name=lens][value=surprise]'); r.checked = true;"
          " r.dispatchEvent(new Event('change')); return 1; })()")
    unnamed = dt.js("""Array.from(document.querySelectorAll('input, select, textarea, button, canvas[tabindex], [tabindex="0"]'))
      .filter(e => !(e.getAttribute('aria-label') || (e.labels && e.labels.length) || e.textContent.trim()))
      .map(e => e.tagName + '#' + e.id)""")
    check(unnamed == [], f"every control has a label ({unnamed[:5]} have none)")
    live = dt.js("['error', 'busy', 'total', 'lensnote', 'mapread'].filter(id => { const e = document.getElementById(id);"
                 " return !(e.getAttribute('aria-live') || ['alert', 'status'].includes(e.getAttribute('role'))); })")
    check(live == [], f"errors, the busy sign, the total and the readouts are live regions ({live} are not)")
    heads = dt.js("""(() => { const b = Array.from(document.querySelectorAll('#heads button.head'));
      return {n: b.length, all: S.model.n_layer * S.model.n_head,
              labelled: b.filter(x => /layer \\d+ head \\d+/.test(x.getAttribute('aria-label'))).length}; })()""")
    check(heads["n"] == heads["all"] and heads["labelled"] == heads["all"],
          f"every head is a button labelled with its layer and head ({heads})")


def keyboard_checks(dt, n, check):
    """Heads and the map by keyboard: Enter on a head's button opens its map; the map takes the focus, left and right
    read a key out, up moves the chosen character."""
    dt.js("document.querySelectorAll('#heads button.head')[1].focus(); 1")
    wait = refreshed(dt, "document.getElementById('maptitle').textContent === 'Layer 0, head 1'")
    key(dt, "Enter", 13, "\r")
    check(dt.wait_for(*wait), "Enter on the second head's button opens its map")
    check(dt.wait_for("document.activeElement === document.getElementById('map')", 5),
          "and moves the keyboard focus to the map (now on " + str(dt.js("document.activeElement.id || document.activeElement.tagName")) + ")")
    dt.js("document.querySelectorAll('#heads button.head')[0].focus(); 1")
    wait = refreshed(dt, "document.getElementById('maptitle').textContent === 'Layer 0, head 0'")
    key(dt, " ", 32, " ")
    check(dt.wait_for(*wait) and dt.wait_for("document.activeElement === document.getElementById('map')", 5),
          "Space on the first head's button opens its map and moves the focus there")
    dt.js("S.mapKey = 0; 1")
    key(dt, "ArrowRight", 39)
    read = dt.js("document.getElementById('mapread').textContent")
    check("key 1 " in read, "→ on the map reads the next key out: " + read)
    before = dt.js("S.pos < 0 ? document.querySelectorAll('#strip span').length - 1 : S.pos")
    wait = refreshed(dt, f"S.pos === {before - 1}")
    key(dt, "ArrowUp", 38)
    check(dt.wait_for(*wait), f"↑ on the map chooses the character before ({before} to {dt.js('S.pos')})")
    dt.js("S.pos = -1; 1")


def card_checks(dt, prompt, check):
    """The prediction card: what the model expected at the chosen character, as text in a live region that Tab
    reaches, following the chosen character when the arrows move it (the tooltip follows the pointer only)."""
    card = dt.js("(() => { const c = document.getElementById('card'); return {tab: c.tabIndex, role: c.getAttribute('role'),"
                 " live: c.getAttribute('aria-live')}; })()")
    check(card == {"tab": 0, "role": "status", "live": "polite"}, f"the prediction card is focusable and a live region ({card})")
    wait = refreshed(dt, f"document.querySelectorAll('#strip span').length === {len(prompt)}")
    set_text(dt, prompt)
    dt.wait_for(*wait)
    dt.js("document.getElementById('strip').focus(); 1")
    key(dt, "End", 35)
    dt.wait_for("S.pos === -1 || S.pos === document.querySelectorAll('#strip span').length - 1", 5)
    wait = refreshed(dt, f"S.pos === {len(prompt) - 2}")
    key(dt, "ArrowLeft", 37)
    dt.wait_for(*wait)
    t = len(prompt) - 2
    j = dt.js("api('/api/score', {ckpt: S.ckpt, text: windowText().text})")
    actual = prompt[t]
    expected = [("\u25b6 " if c == actual else "") + visible(c).ljust(3) + f"{100 * p:.1f}".rjust(5) + "%" for c, p in j["top"][t]]
    text = dt.js("document.getElementById('card').textContent")
    shown = [line.strip() for line in text.split("\n")[2:]]
    check(text.startswith(f"character {t} (chosen):") and shown[:len(expected)] == [e.strip() for e in expected],
          "← on the strip moves the card to the character before, with the API's predictions there: " +
          text.replace("\n", " | ")[:120])
    key(dt, "Tab", 9)
    check(dt.js("document.activeElement.id") == "card", "Tab from the strip reaches the card")
    dt.js("S.pos = -1; 1")


def small_bug_checks(dt, a, n, check):
    """The issue's list of small bugs, one check each (docs/testing.md names the break that turns each red)."""
    err = lambda: dt.js("document.getElementById('error').textContent")
    panels = "['strip', 'bars', 'heads', 'thumbs'].map(id => document.getElementById(id).children.length)"
    # An error of a control goes once the control is fixed.
    dt.js("(() => { const k = document.getElementById('top_k'); k.value = -1; k.dispatchEvent(new Event('input')); return 1; })()")
    check(dt.wait_for("document.getElementById('error').textContent.includes('top_k must be')", 10),
          "a bad top-k shows the server's error: " + err())
    dt.js("(() => { const k = document.getElementById('top_k'); k.value = 40; k.dispatchEvent(new Event('input')); return 1; })()")
    check(dt.wait_for("document.getElementById('error').textContent === ''", 10), "and the error goes when it is fixed")
    # Generate's error stays after the refresh that follows it.
    dt.js("document.getElementById('n').value = 5000; 1")
    wait = refreshed(dt, "S.generating === null")
    dt.js("document.getElementById('generate').click(); 1")
    dt.wait_for(*wait)
    time.sleep(0.3)
    check("n must be a whole number" in err(), "Generate's error stays after the refresh: " + err())
    dt.js("document.getElementById('n').value = 30; 1")
    # No stale panel after an error or an empty box.
    wait = refreshed(dt)
    set_text(dt, a.prompt[:3] + a.outside)
    dt.wait_for(*wait)
    check(dt.js(panels) == [0, 0, 0, 0] and "not in the model's vocabulary" in err(),
          f"after an error no panel is left from before ({dt.js(panels)})")
    wait = refreshed(dt, "document.querySelectorAll('#strip span').length > 0")
    set_text(dt, a.prompt)
    dt.wait_for(*wait)
    wait = refreshed(dt)
    set_text(dt, "")
    dt.wait_for(*wait)
    check(dt.js(panels) == [0, 0, 0, 0] and err() == "", f"an empty box leaves no panel and no error ({dt.js(panels)})")
    # Half of a character (an unpaired UTF-16 surrogate): a message, no stale panel, and the page still answers.
    set_text(dt, "ab")
    dt.js("(() => { const b = document.getElementById('text'); b.value = 'ab\\ud83d'; b.dispatchEvent(new Event('input'));"
          " return 1; })()")
    ok = dt.wait_for("document.getElementById('error').textContent.includes('unpaired UTF-16 surrogate')", 10)
    check(ok and "U+D83D at character 2" in err() and dt.js(panels) == [0, 0, 0, 0],
          f"an unpaired surrogate is answered with a message, no panel left ({dt.js(panels)}): " + err())
    wait = refreshed(dt, "document.querySelectorAll('#strip span').length === 3")
    set_text(dt, a.prompt[:3])
    check(dt.wait_for(*wait) and err() == "", "and the page answers the next text")
    # A #text= link followed in the same tab.
    wait = refreshed(dt, f"document.querySelectorAll('#strip span').length === 4")
    dt.js(f"location.hash = '#text=' + encodeURIComponent({json.dumps(a.prompt[:4])}); 1")
    check(dt.wait_for(*wait) and dt.js("document.getElementById('text').value") == a.prompt[:4],
          "a #text= link followed in the same tab opens its text")
    # "the server is not answering", not the browser's "Failed to fetch".
    msg = dt.js("""(async () => { const f0 = window.fetch; window.fetch = () => Promise.reject(new TypeError('Failed to fetch'));
      try { await api('/api/model', {}); return 'no error'; } catch (e) { return e.message; } finally { window.fetch = f0; } })()""")
    check("the server is not answering" in msg, "a server that went away is named: " + msg)
    # A long text: the page no wider than the window, and a key answered in seconds, not ~25 s.
    word = "".join(c for c in a.prompt if c.isalpha())  # one 1000-letter word: only the strip's break-all wraps it
    long_text = (word * (1000 // len(word) + 1))[:1000]
    wait = refreshed(dt, "document.querySelectorAll('#strip span').length === 1000")
    start = time.time()
    set_text(dt, long_text)
    ok = dt.wait_for(*wait)
    seconds = time.time() - start
    wide = dt.js("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    check(ok and seconds < 5 and wide[0] <= wide[1],
          f"1000 characters: answered in {seconds:.1f} s, the page {wide[0]} px wide in a {wide[1]} px window")
    # Far from the chosen (last) character the refresh lists no predictions; pointing at one asks for its list.
    far = dt.js("S.score.top[10] === null")
    dt.js("""(() => { const sp = document.querySelectorAll('#strip span')[10], r = sp.getBoundingClientRect();
             sp.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + 2, clientY: r.top + 2}));
             return 1; })()""")
    got = dt.wait_for("document.getElementById('tip').textContent.split('\\n').length >= 12", 10)
    j = dt.js("api('/api/score', {ckpt: S.ckpt, text: windowText().text})")
    lines = dt.js("document.getElementById('tip').textContent").split("\n")[2:]
    expected = [visible(c) + f"{100 * p:.1f}".rjust(5) + "%" for c, p in j["top"][10]]
    check(far and got and [l.replace("\u25b6", "").replace(" ", "") for l in lines[:10]] ==
          [e.replace(" ", "") for e in expected],
          "a long text's far character: its predictions are asked for when it is pointed at, and shown")
    dt.js("hideTip(true); 1")
    wait = refreshed(dt)
    set_text(dt, a.prompt)
    dt.wait_for(*wait)


def phone_checks(dt, prompt, check):
    """At 390 px: nothing wider than the screen, the bars do not overlap, the tooltip stays on the screen and goes
    with a tap elsewhere."""
    wait = refreshed(dt)
    set_text(dt, prompt)
    dt.wait_for(*wait)
    dt.call("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1, mobile=True)
    time.sleep(0.5)
    wide = dt.js("""(() => { const W = document.documentElement.clientWidth, out = [];
      for (const e of document.querySelectorAll('body *')) { const r = e.getBoundingClientRect();
        if (r.width > 0 && r.right > W + 1 && getComputedStyle(e).position !== 'absolute') out.push(e.tagName + '#' + e.id + ' ' + Math.round(r.right)); }
      return {scroll: document.documentElement.scrollWidth, W, out: out.slice(0, 5)}; })()""")
    check(wide["scroll"] <= 390 and not wide["out"], f"at 390 px the page is {wide['scroll']} px wide: {wide['out']}")
    overlap = dt.js("""(() => { const rows = Array.from(document.querySelectorAll('#bars .bar')), W = document.documentElement.clientWidth, bad = [];
      rows.forEach((row, i) => { const [ch, track, num] = Array.from(row.children).map(c => c.getBoundingClientRect());
        if (ch.right > track.left + 0.5 || track.right > num.left + 0.5 || num.right > W) bad.push('row ' + i + ' across');
        const bottom = Math.max(row.getBoundingClientRect().bottom, ch.bottom, track.bottom, num.bottom);
        if (i + 1 < rows.length && bottom > rows[i + 1].getBoundingClientRect().top + 0.5) bad.push('row ' + i + ' down'); });
      return [rows.length, bad.slice(0, 3)]; })()""")
    check(overlap[0] >= 5 and overlap[1] == [], f"at 390 px the bars do not overlap ({overlap})")
    tip = dt.js("""(() => { const spans = Array.from(document.querySelectorAll('#strip span'));
      const sp = spans.reduce((a, b) => b.getBoundingClientRect().right > a.getBoundingClientRect().right ? b : a), r = sp.getBoundingClientRect();
      sp.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.right - 1, clientY: r.top + 2}));
      const t = document.getElementById('tip').getBoundingClientRect();
      return [t.left, t.right, document.documentElement.clientWidth, document.getElementById('tip').style.display]; })()""")
    check(tip[3] == "block" and tip[0] >= 0 and tip[1] <= tip[2], f"at 390 px the tooltip stays on the screen ({tip})")
    dt.js("document.querySelector('h1').dispatchEvent(new Event('touchstart', {bubbles: true})); 1")
    check(dt.js("document.getElementById('tip').style.display") == "none", "a tap elsewhere hides the tooltip")
    dt.call("Emulation.clearDeviceMetricsOverride")
    time.sleep(0.3)


def open_ckpt(dt, name):
    wait = refreshed(dt, f"S.ckpt === {json.dumps(name)} && document.body.dataset.status === 'ok'")
    dt.js(f"(() => {{ const s = document.getElementById('ckpt'); s.value = {json.dumps(name)};"
          " s.dispatchEvent(new Event('change')); return 1; })()")
    return dt.wait_for(*wait)


def vanished_checks(dt, folder, check):
    """↻ after the chosen checkpoint vanished opens the default one, and the info line describes it."""
    default = dt.js("S.ckpt")
    default_info = dt.js("document.getElementById('info').textContent")
    gone = os.path.join(folder, "gone.safetensors")
    shutil.copy(os.path.join(folder, "signed.safetensors"), gone)
    wait = refreshed(dt)
    dt.js("document.getElementById('relist').click(); 1")
    dt.wait_for(*wait)
    check(open_ckpt(dt, "gone.safetensors"), "a new checkpoint in the folder opens after ↻")
    other_info = dt.js("document.getElementById('info').textContent")
    os.remove(gone)
    wait = refreshed(dt, f"S.ckpt === {json.dumps(default)}")
    dt.js("document.getElementById('relist').click(); 1")
    ok = dt.wait_for(*wait)
    info = dt.js("document.getElementById('info').textContent")
    check(ok and info == default_info and info != other_info,
          "↻ after it vanished opens the default, and the info line describes the default: " + info)


def broken_checks(dt, folder, check):
    """A checkpoint that cannot be loaded: the previous model's info line and panels go, and the error names the file
    and says what is wrong with it."""
    panels = "['strip', 'bars', 'heads', 'thumbs'].map(id => document.getElementById(id).children.length)"
    check(dt.js(panels)[0] > 0 and dt.js("document.getElementById('info').textContent") != "",
          "before: a model's info line and panels are shown")
    broken = os.path.join(folder, "broken.safetensors")
    with open(broken, "wb") as f:
        f.write(b"this is not a checkpoint" * 10)
    wait = refreshed(dt)
    dt.js("document.getElementById('relist').click(); 1")
    dt.wait_for(*wait)
    dt.js("(() => { const s = document.getElementById('ckpt'); s.value = 'broken.safetensors';"
          " s.dispatchEvent(new Event('change')); return 1; })()")
    ok = dt.wait_for("document.getElementById('error').textContent.includes('broken.safetensors could not be opened')", 10)
    err = dt.js("document.getElementById('error').textContent")
    info = dt.js("document.getElementById('info').textContent")
    check(ok and info == "" and dt.js(panels) == [0, 0, 0, 0] and len(err) > len("broken.safetensors could not be opened: "),
          f"a broken checkpoint clears the old model's info ({info!r}) and panels ({dt.js(panels)}) and says: {err}")
    os.remove(broken)
    wait = refreshed(dt, "S.ckpt === 'ckpt.safetensors' && S.model !== null")
    dt.js("document.getElementById('relist').click(); 1")
    check(dt.wait_for(*wait), "↻ after the broken file went opens the default again")


def mlm_checks(dt, name, prompt, check):
    """A masked LM: Fill underlines what it filled, and the underlines stay when a character is clicked."""
    check(open_ckpt(dt, name), "the masked-LM checkpoint opens")
    text = prompt[:2] + "_" + prompt[3:6] + "_" + prompt[7:10]
    wait = refreshed(dt)
    set_text(dt, text)
    dt.wait_for(*wait)
    wait = refreshed(dt, "document.querySelectorAll('#strip span.filled').length === 2")
    dt.js("document.getElementById('fill').click(); 1")
    check(dt.wait_for(*wait), "Fill underlines the two filled characters")
    wait = refreshed(dt)
    dt.js("document.querySelectorAll('#strip span')[0].click(); 1")
    dt.wait_for(*wait)
    check(dt.js("document.querySelectorAll('#strip span.filled').length") == 2, "the underlines stay after a click")


def signed_checks(dt, name, kind, check):
    """A checkpoint whose layer 1 is of a kind with signed implied weights (--signed-kind): that layer's weights are
    drawn (red where negative), not blank, its label names its kind, and its map's note is the layer's own (the
    server's description of that mixer) with the signed scale's explanation."""
    refreshes = dt.js("+document.body.dataset.refreshes")
    dt.js(f"(() => {{ const s = document.getElementById('ckpt'); s.value = {json.dumps(name)};"
          " s.dispatchEvent(new Event('change')); return 1; })()")
    check(dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && S.ckpt === {json.dumps(name)} && "
                      "document.body.dataset.status === 'ok'"), "the signed checkpoint opens")
    # Every pixel of every strip of layer 1: how many are white, bluish, reddish.
    px = dt.js("""(() => {
      const out = {white: 0, blue: 0, red: 0, all: 0};
      for (const c of document.querySelectorAll('#heads canvas[data-layer="1"]')) {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4) {
          out.all++;
          if (d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250) out.white++;
          else if (d[i] > d[i + 2] + 30) out.red++;
          else if (d[i + 2] > d[i] + 30) out.blue++;
        }
      }
      return out; })()""")
    check(px["all"] > 0 and px["white"] < px["all"] / 2,
          f"the {kind} layer's strips are not blank ({px['white']} of {px['all']} pixels white)")
    check(px["red"] > 0, f"its negative weights are drawn red ({px['red']} red, {px['blue']} blue pixels)")
    label = dt.js("document.querySelector('#heads tr:nth-child(2) th').textContent")
    check(kind in label, "the layer's label names its kind: " + label)
    about = dt.js("S.A.mixers[1].about")
    check(not dt.js("S.A.mixers[1].probabilities"), f"the server says the {kind} layer's weights are not probabilities")
    # Each signed strip is scaled by its own row: its largest |weight| is drawn at the darkest blue (positive) or red.
    full = "(v, d) => v < 0 ? d[0] === 165 && d[1] === 25 && d[2] === 35 : d[0] === 8 && d[1] === 48 && d[2] === 107"
    peaks = dt.js(f"""(() => {{ const full = {full}, out = [];
      for (const c of document.querySelectorAll('#heads canvas[data-layer="1"]')) {{
        const row = S.A.rows[1][+c.dataset.head], ok = S.A.mask_rows[1];
        let k = -1; for (let i = 0; i < row.length; i++) if (ok[i] && (k < 0 || Math.abs(row[i]) > Math.abs(row[k]))) k = i;
        const cell = c.width / S.A.T, d = c.getContext('2d').getImageData(Math.floor(k * cell + cell / 2), 6, 1, 1).data;
        out.push(full(row[k], d)); }}
      return out; }})()""")
    check(len(peaks) >= 1 and all(peaks), f"each {kind} strip reaches its darkest colour at its row's largest |weight| ({peaks})")
    check("each row scaled" in label, "the layer's label says what the signed scale is: " + label)
    # "max over all heads" on a hybrid: a signed head's weight counts as its share of its row's total |weight|.
    dt.js("(() => { const r = document.querySelector('input[name=lens][value=from]'); r.checked = true;"
          " r.dispatchEvent(new Event('change')); const m = document.getElementById('maxheads'); m.checked = true;"
          " m.dispatchEvent(new Event('change')); return 1; })()")
    got = dt.js("""(() => { const A = S.A, out = [];
      Array.from(document.querySelectorAll('#strip span')).forEach((sp, t) => {
        const k = S.w.start + t - S.aw.start; let best = -1;
        for (let l = 0; l < A.n_layer; l++) for (let h = 0; h < A.n_head; h++) {
          if (!A.mask_rows[l][k]) continue;
          let sum = 0; A.rows[l][h].forEach((v, j) => { if (A.mask_rows[l][j]) sum += Math.abs(v); });
          best = Math.max(best, A.mixers[l].probabilities ? A.rows[l][h][k] : Math.abs(A.rows[l][h][k]) / sum); }
        out.push([sp.dataset.w, best < 0 ? '' : best.toFixed(6)]); });
      return out; })()""")
    check(len(got) > 0 and all(a == b for a, b in got), "max over all heads: a signed head counts its share of its row's "
          "total |weight| " + str([g for g in got if g[0] != g[1]][:3]))
    dt.js("(() => { const m = document.getElementById('maxheads'); m.checked = false; m.dispatchEvent(new Event('change'));"
          " const r = document.querySelector('input[name=lens][value=surprise]'); r.checked = true;"
          " r.dispatchEvent(new Event('change')); return 1; })()")
    refreshes = dt.js("+document.body.dataset.refreshes")
    dt.js("document.querySelector('#heads canvas[data-layer=\"1\"]').click(); 1")
    dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && document.getElementById('map').width > 0")
    note = dt.js("document.getElementById('mapnote').textContent")
    check(about and about in note and "signed" in note and "own largest" in note,
          f"the map's note is the layer's own ({about!r}) and says what the scale is: " + note)
    rows = dt.js(f"""(() => {{ const full = {full}, A = S.A, c = document.getElementById('map'), T = A.T;
      const cell = Math.floor(c.width / T), pad = c.width - T * cell, ctx = c.getContext('2d');
      let drawn = 0, rows = 0;
      for (let q = 0; q < T; q++) {{
        const m = A.map[q]; let i = -1;
        for (let j = 0; j < m.length; j++) if (i < 0 || Math.abs(m[j]) > Math.abs(m[i])) i = j;
        if (i < 0 || m[i] === 0) continue;
        rows++;
        const x = pad + (A.map_begin[q] + i) * cell + Math.floor(cell / 2), y = pad + q * cell + Math.floor(cell / 2);
        if (full(m[i], ctx.getImageData(x, y, 1, 1).data)) drawn++; }}
      return [drawn, rows]; }})()""")
    check(rows[1] > 0 and rows[0] == rows[1], f"every row of the {kind} map reaches its darkest colour at its own largest "
          f"|weight| ({rows[0]} of {rows[1]} rows)")
    # One head of the recurrent layer step by step (its head chosen above): the kind's own steps, a table row for
    # each value they give, and the head's output recomputed from them within float rounding of the model's own.
    count = dt.js("+(document.body.dataset.steps || 0)")
    dt.js("(() => { const b = document.getElementById('stepbox'); if (!b.open) b.querySelector('summary').click(); return 1; })()")
    check(dt.wait_for(f"+(document.body.dataset.steps || 0) > {count} || "
                      f"document.getElementById('stepread').textContent.includes('({kind})')", 30),
          f"the step-by-step panel answers for the {kind} layer")
    H = dt.js("api('/api/head', {ckpt: S.ckpt, text: S.A.chars.join(''), position: S.aw.position, layer: S.layer,"
              " head: S.head})")
    values = sum(len(st["values"]) for st in H["steps"])
    shown = dt.js("document.getElementById('steptable').rows.length - 1")
    worst = max(abs(a - b) for a, b in zip(H["output"], H["model_output"]))
    check(H.get("recurrent") and H["kind"] == kind and shown == values and worst < 1e-4,
          f"the {kind} head's own steps ({[st['name'] for st in H['steps']]}): {shown} of {values} values shown, "
          f"the output recomputed within {worst:.1e} of the model's")


def interp_checks(dt, check):
    """Explorer III: the run's timeline and its scrubber (mouse and keyboard), a head knocked out and put back (the
    strip restored exactly), the logit lens (its last layer is the model's own prediction, from /api/score)."""
    check(dt.wait_for("+(document.body.dataset.timeline || 0) >= 1", 60), "the timeline is drawn")
    snaps = dt.js("X.timeline.snapshots.map(s => s.name)")
    check(len(snaps) >= 3, f"the timeline lists the run's snapshots ({snaps})")
    if len(snaps) < 3:
        return
    check(dt.js("X.timeline.metrics.step.length") >= 2, "the timeline has the run's losses")
    # The scrubber by mouse: the slider moved to snapshot 1 opens it, and every panel is redrawn from it.
    wait = refreshed(dt, f"S.ckpt === {json.dumps(snaps[1])} && document.body.dataset.status === 'ok'")
    dt.js("(() => { const r = document.getElementById('scrub'); r.value = 1; r.dispatchEvent(new Event('input')); return 1; })()")
    check(dt.wait_for(*wait), "moving the scrubber to the second snapshot opens it: " + snaps[1])
    picked = dt.js("document.getElementById('ckpt').value")
    j = dt.js("api('/api/score', {ckpt: S.ckpt, text: windowText().text})")
    shown = dt.js("Array.from(document.querySelectorAll('#strip span')).map(s => s.dataset.bits)")
    check(picked == snaps[1] and shown[1:] == [f"{b:.3f}" for b in j["bits"][1:]],
          "the picker and the strip show the snapshot's own numbers")
    # By keyboard: → on the slider moves to the next snapshot.
    wait = refreshed(dt, f"S.ckpt === {json.dumps(snaps[2])} && document.body.dataset.status === 'ok'")
    dt.js("document.getElementById('scrub').focus(); 1")
    key(dt, "ArrowRight", 39)
    check(dt.wait_for(*wait), "→ on the scrubber moves to the next snapshot: " + snaps[2])
    check("step" in dt.js("document.getElementById('scrubread').textContent"), "the scrubber reads out its step")
    # Click the plot near its left edge: the first snapshot.
    wait = refreshed(dt, f"S.ckpt === {json.dumps(snaps[0])}")
    dt.js("""(() => { const c = document.getElementById('timeline'), r = c.getBoundingClientRect();
             c.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: r.left + 37, clientY: r.top + 50})); return 1; })()""")
    check(dt.wait_for(*wait), "clicking the plot at its start opens the first snapshot")
    open_ckpt(dt, "ckpt.safetensors")
    dt.wait_for("document.body.dataset.status === 'ok'")

    # A head knocked out: the strip shows the change in two colours; put back, the strip is what it was.
    strip = "Array.from(document.querySelectorAll('#strip span')).map(s => s.style.background)"
    before = dt.js(strip)
    count = dt.js("+(document.body.dataset.ablations || 0)")
    dt.js("document.querySelector('#knock button[data-head=\"0.0\"]').click(); 1")
    check(dt.wait_for(f"+(document.body.dataset.ablations || 0) > {count} && "
                      "document.querySelectorAll('#strip span[data-delta]').length > 0", 30),
          "clicking L0H0 knocks it out and the strip is recoloured by the change")
    deltas = dt.js("Array.from(document.querySelectorAll('#strip span')).map(s => s.dataset.delta)")
    a = dt.js("api('/api/ablate', {ckpt: S.ckpt, text: windowText().text, heads: '0.0', how: 'zero'})")
    want = ["" if d is None else f"{d:.4f}" for d in a["delta"]]
    check(deltas == want, "each character's change is the API's delta")
    after = dt.js(strip)
    check(after != before and any(d not in ("", "0.0000") for d in deltas), "the knocked-out head changes the strip")
    pressed = dt.js("document.querySelector('#knock button[data-head=\"0.0\"]').getAttribute('aria-pressed')")
    check(pressed == "true", "the head's button says it is pressed")
    dt.js("document.querySelector('#knock button[data-head=\"0.0\"]').click(); 1")
    check(dt.wait_for(f"document.querySelectorAll('#strip span[data-delta]').length === 0 && "
                      f"JSON.stringify({strip}) === {json.dumps(json.dumps(before, separators=(',', ':')))}", 10),
          "clicking it again restores the strip exactly")
    check(dt.js("document.getElementById('abltotal').textContent") == "", "and clears the total")

    # The lens (asked only while its panel is open): one row per layer and the embedding; its last layer's p of the
    # next character is the model's own.
    wait_lens = "+(document.body.dataset.lenses || 0)"
    check(dt.js(wait_lens) == 0, "the lens is not asked while its panel is closed")
    dt.js("document.querySelector('#lensbox summary').click(); 1")
    check(dt.wait_for(f"{wait_lens} >= 1", 30), "opening the lens panel asks the lens")
    count = dt.js(wait_lens)
    refreshes = dt.js("+document.body.dataset.refreshes")
    dt.js("document.querySelectorAll('#strip span')[2].click(); 1")
    check(dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && {wait_lens} > {count}", 30),
          "choosing a character asks the lens")
    rows = dt.js("Array.from(document.querySelectorAll('#lenstable tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    L = dt.js("S.model.n_layer")
    check(len(rows) == L + 2 and rows[1][0] == "embedding", f"the lens shows every layer ({[r[0] for r in rows]})")
    j = dt.js("api('/api/score', {ckpt: S.ckpt, text: windowText().text})")
    check(rows[-1][1] == f"{100 * j['p'][3]:.1f}%",
          f"the lens's last layer gives the next character the model's own p ({rows[-1][1]} vs {100 * j['p'][3]:.1f}%)")
    # One head step by step (asked only while open): one row per key of the attention window, the weights the
    # attention panel's row of the chosen head.
    dt.js("document.querySelector('#stepbox summary').click(); 1")
    check(dt.wait_for("+(document.body.dataset.steps || 0) >= 1", 30), "opening the step-by-step panel asks /api/head")
    steps = dt.js("""(() => { const rows = Array.from(document.querySelectorAll('#steptable tr')).slice(1);
      return { n: rows.length, T: S.A.T, w: rows.map(r => +r.cells[5].textContent),
               row: S.A.rows[S.layer][S.head], items: document.querySelectorAll('#steplist li').length }; })()""")
    check(steps["n"] == steps["T"] and steps["items"] == 6 and
          all(abs(a - b) < 6e-5 for a, b in zip(steps["w"], steps["row"])),
          f"the head's steps: one row per key ({steps['n']} of {steps['T']}), six steps, the weights the attention row's")
    parts = dt.js("document.querySelectorAll('#dla .bar').length")
    heads = dt.js("S.model.n_layer * S.model.n_head")
    check(parts >= heads + 1, f"the attribution lists every head, the MLPs and the embedding ({parts} parts)")


def tools_latency(dt, n):
    """Explorer III's answers measured in the browser, as the key-to-panel figure is: from the user's action to its
    panel drawn (the page's counter for that panel bumped), n times each, the medians printed. The timeline is
    asked again (its scores cached by then); the scrubber moves to the next snapshot (a checkpoint opened and every
    panel redrawn); a head is knocked out (the strip recoloured; it is put back between rounds); a character is
    chosen with the lens panel open, then with the step-by-step panel open (the refresh of that character, then
    the panel's own request)."""
    def timed(action, counter, until="true"):
        return dt.js(f"""(async () => {{
          const before = +(document.body.dataset.{counter} || 0);
          const t0 = performance.now();
          {action};
          while (+(document.body.dataset.{counter} || 0) <= before || !({until})) await new Promise(r => setTimeout(r, 1));
          return performance.now() - t0; }})()""")

    def report(what, times):
        times = sorted(times)
        print(f"  {what}: median {times[len(times) // 2]:.0f} ms, min {times[0]:.0f}, max {times[-1]:.0f} over "
              f"{len(times)}")

    report("timeline (cached) -> drawn", [timed("await loadTimeline()", "timeline") for _ in range(n)])
    snaps = dt.js("X.timeline.snapshots.length")
    if snaps >= 2:
        moves = []
        for i in range(n):
            moves.append(timed(f"const r = document.getElementById('scrub'); r.value = {i % snaps}; "
                               "r.dispatchEvent(new Event('input'))", "refreshes",
                               f"S.ckpt === X.timeline.snapshots[{i % snaps}].name"))
        report("scrubber -> every panel", moves)
        open_ckpt(dt, "ckpt.safetensors")
        dt.wait_for("document.body.dataset.status === 'ok'")
    knocks = []
    for _ in range(n):
        knocks.append(timed("document.querySelector('#knock button[data-head=\"0.0\"]').click()", "ablations"))
        dt.js("document.querySelector('#knock button[data-head=\"0.0\"]').click(); 1")
        dt.wait_for("document.querySelectorAll('#strip span[data-delta]').length === 0", 10)
    report("head knocked out -> strip recoloured", knocks)
    chars = dt.js("document.querySelectorAll('#strip span').length")
    for box, counter, what in (("lensbox", "lenses", "character chosen -> lens and attribution drawn"),
                               ("stepbox", "steps", "character chosen -> head step by step drawn")):
        dt.js(f"(() => {{ const b = document.getElementById('{box}'); if (!b.open) b.querySelector('summary').click(); return 1; }})()")
        times = [timed(f"document.querySelectorAll('#strip span')[{2 + i % max(1, chars - 3)}].click()", counter)
                 for i in range(n)]
        report(what, times)
        dt.js(f"document.getElementById('{box}').open = false; 1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--prompt", required=True, help="typed into the page; every character in the vocabulary")
    ap.add_argument("--outside", default="\u00e9", help="a character outside the vocabulary (negative control)")
    ap.add_argument("--hostile-ckpt", default="", help="a checkpoint file name the picker must show verbatim")
    ap.add_argument("--signed-ckpt", default="", help="a checkpoint in the folder whose layer 1 has signed weights")
    ap.add_argument("--signed-kind", default="", help="the mixer kind of --signed-ckpt's layer 1")
    ap.add_argument("--mlm-ckpt", default="", help="a masked-LM checkpoint in the folder (fill)")
    ap.add_argument("--folder", default="", help="the served folder (a checkpoint is added to it and removed)")
    ap.add_argument("--screenshot", required=True)
    ap.add_argument("--skip-checks", action="store_true", help="only type the prompt and take the screenshot")
    ap.add_argument("--measure", type=int, default=0,
                    help="then type this many more characters one at a time, each after the page answered the last, "
                         "and print the milliseconds from each key to every panel redrawn (the page's data-latency)")
    ap.add_argument("--long", type=int, default=0,
                    help="before --measure and --burst: replace the text with this many characters (the prompt repeated)")
    ap.add_argument("--burst", type=int, default=0,
                    help="then type this many characters --interval ms apart without waiting for the page, and print "
                         "the milliseconds from the last key to every panel redrawn with the whole text")
    ap.add_argument("--interval", type=int, default=200, help="milliseconds between the keys of --burst")
    ap.add_argument("--open-map", action="store_true",
                    help="before --measure: click layer 0's first head, so that its map is redrawn with every key")
    ap.add_argument("--measure-tools", type=int, default=0,
                    help="then time Explorer III's answers in the page this many times each (tools_latency)")
    ap.add_argument("--pick", type=int, default=-1, help="for the screenshot: click this character (its attention)")
    ap.add_argument("--hover", type=int, default=-1, help="for the screenshot: rest the pointer on this character")
    a = ap.parse_args()

    failures = []

    def check(ok, what):
        print(("  ok    " if ok else "  FAIL  ") + what)
        if not ok:
            failures.append(what)

    workdir = tempfile.mkdtemp(prefix="explore_page_", dir=os.path.dirname(os.path.abspath(a.screenshot)))
    profile = os.path.join(workdir, "profile")
    os.makedirs(profile)
    proc, dt = start_chromium(a.chromium, profile)
    try:
        dt.call("Page.enable")
        dt.call("Runtime.enable")
        ready = "document.body && document.body.dataset.status === 'ok' && +document.body.dataset.refreshes >= 1"

        if not a.skip_checks:  # negative control: an unknown character leaves no strip and shows the error
            dt.call("Page.navigate", url=a.url + "#text=" + urllib.parse.quote("ab" + a.outside))
            dt.wait_for("document.body && document.body.dataset.status === 'ok'")
            dt.wait_for("document.getElementById('error').textContent !== ''", 10)
            err = dt.js("document.getElementById('error').textContent")
            check("not in the model's vocabulary" in err, "negative control: the page shows the server's error: " + err)
            check(dt.js("document.querySelectorAll('#strip span').length") == 0,
                  "negative control: no strip is drawn for a text the model cannot read")

        dt.call("Page.navigate", url=a.url)
        check(dt.wait_for(ready), "the page loads and finishes a first refresh")
        status = dt.js("document.body.dataset.status")
        check(status == "ok", "no script error (data-status: " + str(status) + ")")

        # Type the prompt: select the box's text (the first character typed replaces it), then one insertText per
        # character, as a keyboard would.
        refreshes = dt.js("+document.body.dataset.refreshes")
        dt.js("(() => { const b = document.getElementById('text'); b.focus(); b.select(); return 1; })()")
        for ch in a.prompt:
            dt.call("Input.insertText", text=ch)
        n = len(a.prompt)  # Python counts code points, as the page and the tokenizer do
        check(dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && "
                          f"document.querySelectorAll('#strip span').length === {n} && "
                          f"document.body.dataset.status === 'ok'"),
              f"typing '{a.prompt}' refreshes the page with {n} characters")
        if not a.skip_checks:
            s = dt.js("""(() => {
              const spans = Array.from(document.querySelectorAll('#strip span'));
              return { text: spans.map(s => s.textContent).join(''), scored: spans.filter(s => s.dataset.bits !== '').length,
                       colours: new Set(spans.map(s => s.style.background)).size,
                       total: document.getElementById('total').textContent,
                       bars: document.querySelectorAll('#bars .bar').length,
                       strips: document.querySelectorAll('#heads canvas').length,
                       heads: S.model.n_layer * S.model.n_head, map: document.getElementById('map').width,
                       imgs: document.querySelectorAll('img').length, pwned: window.__pwned === undefined ? 0 : 1,
                       options: Array.from(document.querySelectorAll('#ckpt option')).map(o => o.textContent) };
            })()""")
            check(s["text"] == a.prompt.replace("\n", "\u21b5\n"), "the strip shows the typed text as text: " + s["text"])
            check(s["scored"] == n - 1, f"every character but the first has a surprisal ({s['scored']} of {n})")
            check(s["colours"] >= 3, f"the strip is coloured by surprisal ({s['colours']} colours)")
            check("bits/char" in s["total"], "the total is shown: " + s["total"])
            check(s["bars"] >= 5, f"next-character bars are drawn ({s['bars']})")
            check(s["strips"] == s["heads"], f"one attention strip per layer × head ({s['strips']} of {s['heads']})")
            thumbs = dt.js("Array.from(document.querySelectorAll('#thumbs figcaption')).map(f => f.textContent)")
            check(len(thumbs) == s["heads"] and all(" prev " in t and " ind " in t for t in thumbs),
                  f"a whole-pattern thumbnail with head scores per head: {thumbs[:2]}")
            check(s["map"] == 0, "no full map before a head is clicked (it is asked for on a click only)")
            check(s["imgs"] == 0 and s["pwned"] == 0, "HTML in the text is not HTML in the page (no <img>, no onerror)")
            if a.hostile_ckpt:
                check(any(o.startswith(a.hostile_ckpt + "  (") for o in s["options"]),
                      "the picker shows a checkpoint named with HTML verbatim")

            # Hover a character: the tooltip lists what the model expected there.
            dt.js("""(() => { const sp = document.querySelectorAll('#strip span')[3], r = sp.getBoundingClientRect();
                     sp.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + 2, clientY: r.top + 2}));
                     return 1; })()""")
            tip = dt.js("document.getElementById('tip').textContent")
            j = dt.js("api('/api/score', {ckpt: S.ckpt, text: windowText().text})")
            actual = a.prompt[3]
            expected = [("\u25b6 " if c == actual else "") + visible(c).ljust(3) + f"{100 * p:.1f}".rjust(5) + "%"
                        for c, p in j["top"][3]]
            if j["rank"][3] > len(j["top"][3]):
                expected += ["\u2026", "\u25b6 " + visible(actual).ljust(3) + f"{100 * j['p'][3]:.1f}".rjust(5) +
                             f"%  rank {j['rank'][3]}"]
            shown = [line.strip() for line in tip.split("\n")[2:]]
            check(shown == [e.strip() for e in expected] and f"rank {j['rank'][3]} of" in tip.split("\n")[0],
                  "hovering character 3 shows the top-10 the API predicts there, the actual character marked with "
                  "its probability and rank: " + tip.replace("\n", " | "))

            # Click the last head's strip: its full map replaces the first.
            refreshes = dt.js("+document.body.dataset.refreshes")
            dt.js("Array.from(document.querySelectorAll('#heads canvas')).pop().click()")
            want = dt.js("'Layer ' + (S.model.n_layer - 1) + ', head ' + (S.model.n_head - 1)")
            check(dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && "
                              f"document.getElementById('maptitle').textContent === {json.dumps(want)} && "
                              f"document.getElementById('map').width > 0"),
                  "clicking a head's strip shows its full map, " + want)

            attention_on_text_checks(dt, n, check)

            # Temperature 0: the sample is the most likely character, one bar at 100%.
            dt.js("(() => { const t = document.getElementById('temperature'); t.value = 0;"
                  " t.dispatchEvent(new Event('input')); return 1; })()")
            check(dt.wait_for("Array.from(document.querySelectorAll('#bars .q')).filter(q => q.style.width === '100%').length === 1"
                              " && Array.from(document.querySelectorAll('#bars .q')).filter(q => q.style.width === '0%').length >= 4", 10),
                  "temperature 0 reshapes the bars to one at 100%")

            # Generate 30 characters (greedy now), streamed into the box.
            before = dt.js("Array.from(document.getElementById('text').value).length")
            refreshes = dt.js("+document.body.dataset.refreshes")
            dt.js("document.getElementById('n').value = 30; document.getElementById('generate').click(); 1")
            check(dt.wait_for(f"S.generating === null && +document.body.dataset.refreshes > {refreshes} && "
                              f"document.body.dataset.status === 'ok'", 60) and
                  dt.js("Array.from(document.getElementById('text').value).length") == before + 30,
                  "Generate streams 30 characters into the text box")
            check(dt.js("document.getElementById('error').textContent") == "", "no error shown after generating")
            check(dt.js("document.body.dataset.status") == "ok", "still no script error")

            one_request_per_key_checks(dt, check)
            superseded_checks(dt, check)
            layout_checks(dt, check)
            accessibility_checks(dt, check)
            keyboard_checks(dt, n, check)
            card_checks(dt, a.prompt, check)
            phone_checks(dt, a.prompt, check)
            small_bug_checks(dt, a, n, check)
            interp_checks(dt, check)

            if a.signed_ckpt:
                signed_checks(dt, a.signed_ckpt, a.signed_kind, check)
                if a.folder:
                    open_ckpt(dt, "ckpt.safetensors")
                    vanished_checks(dt, a.folder, check)
                    broken_checks(dt, a.folder, check)
            if a.mlm_ckpt:
                mlm_checks(dt, a.mlm_ckpt, a.prompt, check)

        if a.long:
            long_text = (a.prompt * (a.long // len(a.prompt) + 1))[:a.long]
            wait = refreshed(dt, f"document.querySelectorAll('#strip span').length === {a.long}", 120)
            start = time.time()
            set_text(dt, long_text)
            dt.wait_for(*wait)
            dt.js("document.getElementById('text').focus(); document.getElementById('text').setSelectionRange(1e9, 1e9); 1")
            print(f"  {a.long} characters pasted: drawn in {time.time() - start:.1f} s")
        if a.open_map:
            refreshes = dt.js("+document.body.dataset.refreshes")
            dt.js("document.querySelector('#heads canvas[data-layer=\"0\"]').click(); 1")
            dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && document.getElementById('map').width > 0", 60)
        if a.measure:
            times = []
            for i in range(a.measure):
                refreshes = dt.js("+document.body.dataset.refreshes")
                dt.call("Input.insertText", text=a.prompt[i % len(a.prompt)])
                dt.wait_for(f"+document.body.dataset.refreshes > {refreshes} && document.body.dataset.latency", 30)
                times.append(int(dt.js("+document.body.dataset.latency")))
            times.sort()
            print(f"  key -> every panel: median {times[len(times) // 2]} ms, max {times[-1]} ms over {len(times)} keys "
                  f"(the page's debounce included; min {times[0]} ms, quartiles {times[len(times) // 4]}-"
                  f"{times[3 * len(times) // 4]} ms)")
        if a.burst:
            # The keys of a typist who does not wait: the page may drop or cancel superseded refreshes, and what
            # counts is when the panels show the whole text.
            final = dt.js("Array.from(document.getElementById('text').value).length") + a.burst
            for i in range(a.burst):
                dt.call("Input.insertText", text=a.prompt[i % len(a.prompt)])
                last_key = time.time()
                if i + 1 < a.burst:
                    time.sleep(a.interval / 1000)
            done = dt.wait_for(f"document.querySelectorAll('#strip span').length === {final} && "
                               f"document.body.dataset.status === 'ok' && S.typedAt === 0", 120)
            print(f"  {a.burst} keys {a.interval} ms apart: every panel drawn {1000 * (time.time() - last_key):.0f} ms "
                  f"after the last key" + ("" if done else " (NOT drawn within 120 s)"))

        if a.measure_tools:
            tools_latency(dt, a.measure_tools)
        if a.pick >= 0:
            refreshes = dt.js("+document.body.dataset.refreshes")
            dt.js(f"document.querySelectorAll('#strip span')[{a.pick}].click(); 1")
            dt.wait_for(f"+document.body.dataset.refreshes > {refreshes}")
            dt.js("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'})); 1")  # unpin its tooltip
        if a.hover >= 0:
            dt.js(f"""(() => {{ const sp = document.querySelectorAll('#strip span')[{a.hover}], r = sp.getBoundingClientRect();
                     sp.dispatchEvent(new MouseEvent('mousemove', {{bubbles: true, clientX: r.left + 4, clientY: r.bottom - 2}}));
                     return 1; }})()""")
        height = dt.js("document.documentElement.scrollHeight")
        shot = dt.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                       clip={"x": 0, "y": 0, "width": 1400, "height": height, "scale": 1})
        with open(a.screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print("  wrote " + a.screenshot)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print(f"explore page: FAILED ({len(failures)} checks)")
        return 1
    print("explore page: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
