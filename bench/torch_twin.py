#!/usr/bin/env python3
"""bench/torch_twin.py — plaingpt's GPT written in PyTorch, nanoGPT-style, to compare speed and to check answers.

The same model as src/: learned token + position embeddings, pre-LayerNorm blocks (fused c_attn with bias, scale
1/sqrt(head_size), c_proj; MLP 4C with tanh-GELU), final LayerNorm, LM head tied to wte, no dropout. Init N(0, 0.02),
residual projections N(0, 0.02/sqrt(2L)), zero biases. AdamW betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on 2-D
weights only (wte and wpe included, as in src/model/params.cpp), global-norm gradient clip 1.0, linear warm-up then
cosine decay from lr to min_lr (src/optim/adamw.cpp). The numbers (model shape, batch, schedule, optimizer settings,
evaluation cadence) are not copied here: they are ./train's own, read from `./train --preset P [flags]
--print-settings`, so a preset changed in src/train/train_config.cpp changes the twin's recipe too.

  /usr/bin/python3 bench/torch_twin.py --bench --preset tiny --threads 2      ms/step, tokens/s, peak RSS (one JSON line)
  /usr/bin/python3 bench/torch_twin.py --sample-bench --threads 1            nanoGPT generate(): full recompute per token
  /usr/bin/python3 bench/torch_twin.py --sample-bench --cache kv --threads 1   the same with a KV cache
  /usr/bin/python3 bench/torch_twin.py --score CKPT TEXT                     mean next-char loss, as ./sample --score
  /usr/bin/python3 bench/torch_twin.py --train DATA --threads 2 [--preset P --lr …]   as ./train --preset P --lr …

Any flag the twin does not know is one of ./train's (--lr, --steps, --block, …) and goes to ./train --print-settings.

Needs Debian's python3-torch and python3-numpy (apt-get install -y python3-torch) for /usr/bin/python3. Benchmarks
should run with OPENBLAS_L2_SIZE unset and OPENBLAS_CORETYPE set as plaingpt's programs choose it (bench/compare.py
and bench/frontier.py do both: docs/performance.md, "Kernel choice"); every JSON line names the kernels that ran.
"""
import argparse
import json
import math
import os
import resource
import struct
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the twin is optional: say how to get it, with a distinct exit code
    print(f"torch_twin: {e}. Install PyTorch for the system python: apt-get install -y python3-torch python3-numpy,"
          " then run this script with /usr/bin/python3", file=sys.stderr)
    sys.exit(3)

TRAIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "train")


def recipe(preset, train_flags=()):
    """./train's settings for `--preset preset train_flags…`, as its checkpoints store them (src/train/train_config.cpp:
    n_layer, block_size, batch, steps, lr, min_lr, warmup_steps, beta1, weight_decay, grad_clip, eval_every, …)."""
    cmd = [TRAIN, "--preset", preset, *train_flags, "--print-settings"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"torch_twin: cannot run {TRAIN} ({e}); build it first: make programs")
    if done.returncode != 0:
        sys.exit(f"torch_twin: {' '.join(cmd)} failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


# ---- masks (src/ops/mask.cpp): query i sees keys [begin, end) -------------------------------------------------------

def parse_mask(text):
    if text == "causal":
        return ("causal", 0)
    if text == "bidirectional":
        return ("bidirectional", 0)
    for kind in ("prefix", "window"):
        if text.startswith(kind + ":"):
            return (kind, int(text[len(kind) + 1:]))
    raise ValueError(f"unknown mask '{text}'")


def parse_layer_masks(text, n_layer):
    masks = [parse_mask(t) for t in text.split(",")]
    if len(masks) == 1:
        masks = masks * n_layer
    if len(masks) != n_layer:
        raise ValueError(f"mask list '{text}' has {len(masks)} entries for {n_layer} layers")
    return masks


def keys_for(mask, i, T):
    kind, size = mask
    if kind == "causal":
        return 0, i + 1
    if kind == "bidirectional":
        return 0, T
    if kind == "prefix":
        return 0, min(T, max(size, i + 1))
    return max(0, i + 1 - size), i + 1  # window


def allowed_matrix(mask, T):
    """(T, T) bool: True where query i may see key j."""
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    kind, size = mask
    if kind == "causal":
        return j <= i
    if kind == "bidirectional":
        return torch.ones(T, T, dtype=torch.bool)
    if kind == "prefix":
        return j < torch.clamp(torch.clamp(i + 1, min=size), max=T)
    return (j <= i) & (j > i - size)  # window


def sees_future(mask, T):
    return any(keys_for(mask, i, T)[1] > i + 1 for i in range(T))


# ---- the model --------------------------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, C, NH, mask):
        super().__init__()
        self.n_head = NH
        self.mask = mask
        self.ln_1 = nn.LayerNorm(C)  # eps 1e-5 = kLayerNormEps
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.gelu = nn.GELU(approximate="tanh")
        self._bias_cache = {}

    def attn_bias(self, T, device):
        # Additive mask: 0 where allowed, -inf elsewhere (as nanoGPT's masked_fill on its causal buffer).
        if T not in self._bias_cache:
            allowed = allowed_matrix(self.mask, T)
            self._bias_cache[T] = torch.zeros(T, T).masked_fill(~allowed, float("-inf")).to(device)
        return self._bias_cache[T]

    def heads(self, x):
        """q, k, v of x (B, T, C), each (B, NH, T, C / NH)."""
        B, T, C = x.shape
        NH = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        return [t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v)]

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.heads(x)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att + self.attn_bias(T, x.device)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))
        return x

    def attention_cached(self, x, cache):
        """Causal attention of x's t new positions over the cached keys and values and their own: the KV cache as
        PyTorch users add one to nanoGPT (each layer's k and v grow by torch.cat). cache is None for a new window."""
        B, T, C = x.shape
        q, k, v = self.heads(x)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if T > 1:  # a window's first positions: causal among themselves (a new window has no cache before them)
            att = att + self.attn_bias(T, x.device)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_proj(y), (k, v)

    def forward_cached(self, x, cache):
        a, cache = self.attention_cached(self.ln_1(x), cache)
        x = x + a
        x = x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))
        return x, cache


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, masks=None):
        super().__init__()
        self.block_size = block_size
        self.vocab_size = vocab_size
        masks = masks or [("causal", 0)] * n_layer
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, m) for m in masks])
        self.ln_f = nn.LayerNorm(n_embd)
        # init: N(0, 0.02) everywhere, zero biases, residual projections N(0, 0.02/sqrt(2L))
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("attn_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets=None, last_only=False):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if last_only:  # nanoGPT's inference path: the LM head on the last position only
            return F.linear(x[:, [-1], :], self.wte.weight), None
        logits = F.linear(x, self.wte.weight)  # tied LM head
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def forward_cached(self, idx, caches, pos):
        """The last position's logits for idx (B, t) at positions pos … pos+t−1, after the cached ones; returns them
        with the layers' new caches. caches None: a new window (idx its first t tokens, pos 0). Causal masks only."""
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(pos, pos + t, device=idx.device))
        new_caches = []
        for i, block in enumerate(self.h):
            x, cache = block.forward_cached(x, None if caches is None else caches[i])
            new_caches.append(cache)
        x = self.ln_f(x[:, [-1], :])
        return F.linear(x, self.wte.weight), new_caches


class Muon:
    """src/optim/muon.h in PyTorch: for the blocks' 2-D weights, B ← μB + G, U = G + μB, O = NS5(U),
    W ← W − η·λ·W − η·√max(1, fan_out/fan_in)·O, with η on the schedule of --lr. nn.Linear stores [out, in]."""
    def __init__(self, params, r):
        self.params, self.r = params, r
        self.buffers = [torch.zeros_like(p) for p in params]

    @staticmethod
    def newton_schulz5(u):
        a, b, c = 3.4445, -4.7750, 2.0315
        x = u / (u.norm() + 1e-7)
        tall = x.size(0) > x.size(1)
        if tall:
            x = x.t()
        for _ in range(5):
            gram = x @ x.t()
            x = a * x + (b * gram + c * gram @ gram) @ x
        return x.t() if tall else x

    @torch.no_grad()
    def step(self, adamw_lr):
        eta = self.r["muon_lr"] * adamw_lr / self.r["lr"]
        mu = self.r["muon_momentum"]
        for w, buf in zip(self.params, self.buffers):
            buf.mul_(mu).add_(w.grad)
            o = self.newton_schulz5(w.grad + mu * buf)
            fan_out, fan_in = w.shape
            w.mul_(1 - eta * self.r["weight_decay"]).add_(o, alpha=-eta * math.sqrt(max(1.0, fan_out / fan_in)))


class Optimizer:
    """./train's optimizer: AdamW on every tensor, or (--optimizer muon) Muon on the blocks' 2-D weights and AdamW
    on the rest. step(lr) takes the AdamW learning rate of this step."""
    def __init__(self, model, r, foreach):
        muon = r["optimizer"] == "muon"
        in_muon = lambda name, p: muon and name.startswith("h.") and p.dim() == 2
        self.muon = Muon([p for n, p in model.named_parameters() if in_muon(n, p)], r) if muon else None
        rest = [(n, p) for n, p in model.named_parameters() if not in_muon(n, p)]
        decay = [p for n, p in rest if p.dim() >= 2]  # wte, wpe and (AdamW only) the linear weights
        no_decay = [p for n, p in rest if p.dim() < 2]  # biases, LayerNorm
        groups = [{"params": decay, "weight_decay": r["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
        kwargs = {"foreach": foreach} if foreach is not None else {}
        self.adamw = torch.optim.AdamW(groups, lr=r["lr"], betas=(r["beta1"], r["beta2"]), eps=r["eps"], **kwargs)

    def step(self, lr):
        for g in self.adamw.param_groups:
            g["lr"] = lr
        self.adamw.step()
        if self.muon:
            self.muon.step(lr)


def learning_rate(step, total, lr, min_lr, warmup):  # src/optim/adamw.cpp learning_rate
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


def train_step(model, opt, r, x, y, step):
    _, loss = model(x, y)
    model.zero_grad(set_to_none=True)
    loss.backward()
    if r["grad_clip"] > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
    opt.step(learning_rate(step, r["steps"], r["lr"], r["min_lr"], r["warmup_steps"]))
    return loss


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def blas_core():
    """The OpenBLAS kernels this process runs, or "" when no OpenBLAS is loaded. Debian's torch calls sgemm through
    libblas.so.3, which is OpenBLAS's when OpenBLAS is the chosen BLAS; it then reads OPENBLAS_CORETYPE as ours do."""
    import ctypes
    for name in ("libopenblas.so.0", "libopenblas.so", "libopenblas.dylib"):
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD if hasattr(os, "RTLD_NOLOAD") else 0)
        except OSError:
            continue
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    return ""


def runtime_info(threads):
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads(), "threads": threads,
            "blas_core": blas_core(), "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", ""),
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "")}


# ---- modes ------------------------------------------------------------------------------------------------------

def bench(args):
    # The step of `bench --step` (bench/bench.cpp): forward, backward, clipping and AdamW, whatever the preset's
    # optimizer (a flag given here still wins)
    p = recipe(args.preset, ["--optimizer", "adamw", *args.train_flags])
    torch.manual_seed(1337)
    model = GPT(p["n_layer"], p["n_head"], p["n_embd"], p["block_size"], 65)
    opt = Optimizer(model, p, args.foreach)
    B, T = p["batch"], p["block_size"]
    warmup = args.bench_warmup if args.bench_warmup >= 0 else (1 if args.preset == "small" else 5)
    repeats = args.repeats if args.repeats > 0 else (3 if args.preset == "small" else 30)
    g = torch.Generator().manual_seed(42)
    x = torch.randint(0, 65, (B, T), generator=g)
    y = torch.randint(0, 65, (B, T), generator=g)
    times, cpu = [], []
    for i in range(warmup + repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        train_step(model, opt, p, x, y, i)
        ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        if i >= warmup:
            times.append(ms)
            cpu.append(cpu_ms)
    med = median(times)
    n_params = sum(p.numel() for p in model.parameters())
    out = {"impl": "pytorch", "preset": args.preset, "batch": B, "block_size": T, "warmup": warmup, "ms": times,
           "median_ms": med, "min_ms": min(times), "cpu_ms": cpu, "median_cpu_ms": median(cpu),
           "tokens_per_s": B * T / (med / 1000), "peak_rss_mb": peak_rss_mb(), "params": n_params,
           "foreach": args.foreach}
    if args.profile:
        out["ops_self_cpu_ms_per_step"] = profile_ops(lambda i: train_step(model, opt, p, x, y, i), warmup + repeats,
                                                      repeats)
    out.update(runtime_info(args.threads))
    print(json.dumps(out))


def profile_ops(step, first, repeats):
    """--bench --profile: the step's time per PyTorch op, `repeats` more steps under torch.profiler (CPU): each
    op's self CPU time (what it spends outside the ops it calls) in ms per step, the largest first. Beside the
    same step's perf samples of ours, op by op (docs/performance_log.md, "Per op against the twin"). The profiler
    itself adds a few µs to every op it records, so the per-step total is above the timed steps'."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(first, first + repeats):
            step(i)
    ops = {e.key: e.self_cpu_time_total / 1000 / repeats for e in prof.key_averages()}
    return dict(sorted(ops.items(), key=lambda kv: -kv[1]))


def next_token(logits, temperature=0.8, top_k=40):
    logits = logits[:, -1, :] / temperature
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    logits[logits < v[:, [-1]]] = -float("inf")
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)


@torch.no_grad()
def generate(model, idx, n, temperature=0.8, top_k=40):
    """nanoGPT's GPT.generate: crop the context to block_size and run the whole model for every new token."""
    for _ in range(n):
        idx_cond = idx if idx.size(1) <= model.block_size else idx[:, -model.block_size:]
        logits, _ = model(idx_cond, last_only=True)
        idx = torch.cat((idx, next_token(logits, temperature, top_k)), dim=1)
    return idx


@torch.no_grad()
def generate_cached(model, idx, n, check=None):
    """generate() with a KV cache: a new token runs the model on its own position only, reading the layers' cached
    keys and values. When the window is full (block_size positions cached), the newest ⌊block_size/2⌋ tokens start
    a new one, run as a prompt in one forward: the slide of plaingpt's Decoder (src/model/decoder.h), whose shadow
    makes the same states without that forward. check: a list that gets, for every token, the largest |difference|
    between the cached logits and the full forward's on the same window (nanoGPT's path)."""
    half = model.block_size // 2
    logits, caches = model.forward_cached(idx, None, 0)
    pos = idx.size(1)
    window = idx
    for _ in range(n):
        if check is not None:
            full, _ = model(window, last_only=True)
            check.append((logits - full).abs().max().item())
        token = next_token(logits)
        idx = torch.cat((idx, token), dim=1)
        if pos == model.block_size:
            window = idx[:, -half:]
            logits, caches = model.forward_cached(window, None, 0)
            pos = window.size(1)
        else:
            if check is not None:  # the full forward's input, kept only when checking (not in the timed runs)
                window = torch.cat((window, token), dim=1)
            logits, caches = model.forward_cached(token, caches, pos)
            pos += 1
    return idx


def sample_bench(args):
    p = recipe("tiny")
    torch.manual_seed(1337)
    model = GPT(p["n_layer"], p["n_head"], p["n_embd"], p["block_size"], 65)
    model.eval()
    rates = []
    check = []
    if args.cache == "kv":  # the cache's answers against the full forward's, once, before the timed runs
        generate_cached(model, torch.zeros((1, 1), dtype=torch.long), args.n, check)
    for r in range(args.repeats if args.repeats > 0 else 3):
        idx = torch.zeros((1, 1), dtype=torch.long)
        t0 = time.perf_counter()
        if args.cache == "kv":
            generate_cached(model, idx, args.n)
        else:
            generate(model, idx, args.n)
        rates.append(args.n / (time.perf_counter() - t0))
    method = "KV cache (generate_cached)" if args.cache == "kv" else "full recompute (nanoGPT generate)"
    out = {"impl": "pytorch", "tokens": args.n, "tokens_per_s": median(rates), "method": method,
           "peak_rss_mb": peak_rss_mb()}
    if check:
        out["cache_max_abs_logit_diff"] = max(check)
    out.update(runtime_info(args.threads))
    print(json.dumps(out))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"]).copy()
    return meta, tensors


def load_checkpoint(path):
    if os.path.isdir(path):
        path = os.path.join(path, "ckpt.safetensors")
    meta, t = read_safetensors(path)
    if meta.get("format") != "plaingpt":
        raise ValueError(f"{path}: not a plaingpt checkpoint")
    L, NH, C = int(meta["n_layer"]), int(meta["n_head"]), int(meta["n_embd"])
    block, V = int(meta["block_size"]), int(meta["vocab_size"])
    masks = parse_layer_masks(meta["mask"], L)
    model = GPT(L, NH, C, block, V, masks)
    sd = {"wte.weight": t["wte.weight"], "wpe.weight": t["wpe.weight"],
          "ln_f.weight": t["ln_f.weight"], "ln_f.bias": t["ln_f.bias"]}
    ours_to_twin = {"ln_1": "ln_1", "ln_2": "ln_2", "attn.c_attn": "c_attn", "attn.c_proj": "attn_proj",
                    "mlp.c_fc": "c_fc", "mlp.c_proj": "mlp_proj"}
    for l in range(L):
        for ours, twin in ours_to_twin.items():
            w = t[f"h.{l}.{ours}.weight"]
            sd[f"h.{l}.{twin}.weight"] = w if w.ndim == 1 else w.T  # linear weights are stored [in, out]
            sd[f"h.{l}.{twin}.bias"] = t[f"h.{l}.{ours}.bias"]
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}, strict=True)
    model.eval()
    vocab = meta["vocab"]  # the characters in id order
    return model, vocab, meta, masks


@torch.no_grad()
def score(args):
    model, vocab, meta, masks = load_checkpoint(args.score[0])
    if meta.get("objective", "clm") == "mlm":
        raise SystemExit("torch_twin: --score: masked-LM checkpoints are not next-character models")
    # ./sample --score sets prefix length 0 first: a prefix-LM scored left to right is causal
    masks = [("causal", 0) if kind == "prefix" else (kind, size) for kind, size in masks]
    if any(sees_future(m, model.block_size) for m in masks):
        raise SystemExit("torch_twin: --score: this checkpoint's mask sees the future; ./sample prints no next-char "
                         "score for it either")
    for block, m in zip(model.h, masks):
        block.mask, block._bias_cache = m, {}
    with open(args.score[1], encoding="utf-8", newline="") as f:  # newline="": keep \r as ours does
        text = f.read()
    ids = {ch: i for i, ch in enumerate(vocab)}
    try:
        tokens = [ids[ch] for ch in text]
    except KeyError as e:
        raise SystemExit(f"torch_twin: character {e} of {args.score[1]} is not in the checkpoint's vocabulary")
    # src/train/evaluate.cpp score_text: windows of T = min(block_size, n-1) start every T/2 (and one flush with the end);
    # each window scores only the predictions the previous windows did not make.
    n = len(tokens)
    if n < 2:
        raise SystemExit("torch_twin: need at least 2 characters to score")
    T = min(model.block_size, n - 1)
    stride = max(1, T // 2)
    starts = list(range(0, n - T, stride))
    if starts[-1] + T < n - 1:
        starts.append(n - 1 - T)
    toks = torch.tensor(tokens, dtype=torch.long)
    total, count, scored_until, batch = 0.0, 0, 0, 16
    for w0 in range(0, len(starts), batch):
        chunk = starts[w0:w0 + batch]
        x = torch.stack([toks[s:s + T] for s in chunk])
        y = torch.stack([toks[s + 1:s + T + 1] for s in chunk]).clone()
        for b, s in enumerate(chunk):
            first = max(0, scored_until - s)  # positions s+t < scored_until were predicted already
            y[b, :first] = -1
            scored_until = s + T
        logits, _ = model(x)
        logp = F.log_softmax(logits.double(), dim=-1)
        keep = y >= 0
        total += -logp[keep].gather(1, y[keep].view(-1, 1)).sum().item()
        count += int(keep.sum())
    nats = total / count
    print(json.dumps({"nats_per_char": nats, "bits_per_char": nats / math.log(2), "predictions": count}))


@torch.no_grad()
def estimate_loss(model, data, B, T, iters, g):
    model.eval()
    total = 0.0
    for _ in range(iters):
        ix = torch.randint(0, len(data) - T, (B,), generator=g)
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + T + 1] for i in ix])
        total += model(x, y)[1].item()
    model.train()
    return total / iters


def train(args):
    """./train --preset P [flags] in PyTorch: the same split, batches drawn the same way, the same schedule, the same
    evaluation cadence (at 0, every --eval-every steps and at the end, --eval-iters batches per split, the same
    batches every time). --time-limit stops after an evaluation once that many seconds have passed (for a
    frontier: the loss reached in a wall-clock budget)."""
    r = recipe(args.preset, args.train_flags)
    with open(args.train, encoding="utf-8", newline="") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_train = int(0.9 * len(data))
    train_data, val_data = data[:n_train], data[n_train:]
    B, T, steps = r["batch"], r["block_size"], r["steps"]
    torch.manual_seed(1337)
    model = GPT(r["n_layer"], r["n_head"], r["n_embd"], T, len(chars))
    opt = Optimizer(model, r, args.foreach)
    g = torch.Generator().manual_seed(1337 ^ 0x5EED)
    t_start = time.perf_counter()
    val = float("nan")
    for step in range(steps + 1):
        out_of_time = args.time_limit > 0 and time.perf_counter() - t_start >= args.time_limit
        if (r["eval_every"] > 0 and step % r["eval_every"] == 0) or step == 0 or step == steps or out_of_time:
            eg = torch.Generator().manual_seed(1338)
            tr = estimate_loss(model, train_data, B, T, r["eval_iters"], eg)
            val = estimate_loss(model, val_data, B, T, r["eval_iters"], eg)
            print(f"step {step}: train loss {tr:.4f}, val loss {val:.4f} ({time.perf_counter() - t_start:.1f} s)",
                  flush=True)
        if step == steps or out_of_time:
            break
        ix = torch.randint(0, len(train_data) - T, (B,), generator=g)
        x = torch.stack([train_data[i:i + T] for i in ix])
        y = torch.stack([train_data[i + 1:i + T + 1] for i in ix])
        train_step(model, opt, r, x, y, step)
    wall = time.perf_counter() - t_start
    out = {"impl": "pytorch", "preset": args.preset, "recipe": r, "steps_run": step, "wall_s": wall,
           "val_loss": val, "peak_rss_mb": peak_rss_mb()}
    out.update(runtime_info(args.threads))
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--bench", action="store_true", help="time full training steps")
    mode.add_argument("--sample-bench", action="store_true",
                      help="time generation: nanoGPT's generate (full recompute) or, with --cache kv, a KV cache")
    mode.add_argument("--score", nargs=2, metavar=("CKPT", "TEXT"), help="mean next-char loss of a plaingpt checkpoint")
    mode.add_argument("--train", metavar="DATA", help="train from scratch on a text file (time-to-quality)")
    ap.add_argument("--preset", default="tiny", help="one of ./train's presets (./train --help lists them)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--bench-warmup", type=int, default=-1, help="--bench: untimed steps first")
    ap.add_argument("--repeats", type=int, default=-1)
    ap.add_argument("-n", type=int, default=500, help="tokens to generate for --sample-bench")
    ap.add_argument("--cache", choices=("none", "kv"), default="none",
                    help="--sample-bench: none = recompute the window for every token, kv = keys and values cached")
    ap.add_argument("--time-limit", type=float, default=0, help="--train: stop after this many seconds (0 = never)")
    ap.add_argument("--profile", action="store_true",
                    help="--bench: then profile as many steps again, each op's self CPU ms per step in the JSON")
    ap.add_argument("--foreach", type=int, choices=(0, 1), default=None,
                    help="AdamW foreach implementation (default: PyTorch's choice)")
    args, args.train_flags = ap.parse_known_args()  # the rest are ./train's recipe flags (--lr, --steps, --block …)
    if args.train_flags and (args.score or args.sample_bench):
        ap.error(f"unrecognized arguments: {' '.join(args.train_flags)}")
    if args.foreach is not None:
        args.foreach = bool(args.foreach)
    torch.set_num_threads(args.threads)
    # As ./train (src/base/threads.cpp): denormal floats flushed to zero, or a high learning rate's denormals slow
    # steps (PyTorch's own switch; without it the twin's first 1000 tiny-preset steps ran 15–35% slower here).
    torch.set_flush_denormal(True)
    if args.bench:
        bench(args)
    elif args.sample_bench:
        sample_bench(args)
    elif args.score:
        score(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
