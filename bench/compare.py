#!/usr/bin/env python3
"""bench/compare.py — plaingpt against its PyTorch twin (bench/torch_twin.py): `make bench-compare`.

1. Training speed, A/B alternated: for each target (tiny at 2 threads, tiny at 1 thread, small at 2 threads) the two
   programs (ours with ./train's default --threads-split auto; on the tiny 2-thread target also ours with idle
   threads spinning and ours split by ops, as diagnostics) run one after the other for several rounds, the order flipping every round (A B, B A, ...), each run a
   fresh process timing full training steps after warm-up. Per run we keep the median ms/step; the table shows the
   median over rounds, tokens/s, the ratio of medians (PyTorch ms / ours ms = how many times faster we are), and the
   largest peak RSS seen.
   PyTorch is measured at its best: before the rounds, each variant (OMP_WAIT_POLICY unset or PASSIVE; and for a
   2-thread budget torch.set_num_threads 1 or 2) runs once on the tiny preset and the fastest is kept.
   OpenBLAS gets the same thread budget (OPENBLAS_NUM_THREADS) so that neither side uses more cores than stated.
2. Sampling: ours through the KV-cache Decoder vs the twin twice: nanoGPT's generate() (full recompute, context
   cropped to block_size) and the twin with a KV cache (torch_twin.py --cache kv, which slides its window as ours
   does); 500 tokens, tiny model, the three alternated.
3. Checkpoint agreement: ./train a tiny model for a few steps (causal, and a window mask), then `./sample --score`
   and `torch_twin.py --score` on the same text; fails (exit 1) if they differ by more than 1e-4 nats.

Without torch (for /usr/bin/python3) only our side runs, with the command that installs it. Results also go to
bench/compare.json. Run from the repository root with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the make target
does both). Our programs then choose their OpenBLAS kernels as a user's would (src/base/runtime.h: on a CPU that
OpenBLAS does not know, a better core than OpenBLAS's own); the twin is given the same core (OPENBLAS_CORETYPE), so
both sides run the same kernels, and every table names them.

The AVX2 proxy (`make bench-compare BENCH_ISA=avx2`, which passes `--isa avx2 --bin build/avx2/bin`): ours are the
programs built for x86-64-v3 (AVX2 and FMA, no AVX-512) and both sides get OpenBLAS's Haswell kernels
(OPENBLAS_CORETYPE=Haswell); the twin's own ATen kernels are held to AVX2 (ATEN_CPU_CAPABILITY=avx2) and oneDNN to
AVX2 (DNNL_MAX_CPU_ISA=AVX2). On an AVX-512 machine this runs what an AVX2 laptop runs, at this machine's clock,
caches and memory (docs/performance.md, "The AVX2 proxy").
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Our programs: build/bench/bench, ./train and ./sample, or those of --bin DIR (the AVX2 proxy's build/avx2/bin).
OURS = os.path.join(ROOT, "build", "bench", "bench")
TRAIN = os.path.join(ROOT, "train")
SAMPLE = os.path.join(ROOT, "sample")
# What --isa sets for both sides (ISA_ENV) and for the twin alone (ISA_TWIN_ENV); empty without --isa.
ISA_ENV = {}
ISA_TWIN_ENV = {}
AVX2_ENV = {"OPENBLAS_CORETYPE": "Haswell"}
AVX2_TWIN_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2"}
# Debian's python3-torch is for the system python; `python3` on PATH may be another one without torch.
TWIN_PY = os.environ.get("BENCH_PY") or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
TWIN = [TWIN_PY, os.path.join(HERE, "torch_twin.py")]
TOLERANCE = 1e-4  # nats


def choose_programs(bin_dir, isa):
    """Our programs from bin_dir (None: build/bench/bench, ./train, ./sample), and with isa "avx2" the AVX2 proxy's
    environments; compare.py's --bin and --isa, and frontier.py's."""
    global OURS, TRAIN, SAMPLE
    if bin_dir:
        OURS = os.path.join(os.path.abspath(bin_dir), "bench")
        TRAIN = os.path.join(os.path.abspath(bin_dir), "train")
        SAMPLE = os.path.join(os.path.abspath(bin_dir), "sample")
    if isa == "avx2":
        ISA_ENV.update(AVX2_ENV)
        ISA_TWIN_ENV.update(AVX2_TWIN_ENV)


def clean_env(extra=None):
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                "OMP_NUM_THREADS"):
        env.pop(var, None)
    env.update(ISA_ENV)
    env.update(extra or {})
    return env


_kernel = None


def kernel_choice():
    """What our programs run, as `build/bench/bench --blas` reports it from a clean environment: {"core": "SkylakeX",
    "chosen_by": "plaingpt" | "OpenBLAS", "openblas_own_choice": "Prescott", ...}. Asked once."""
    global _kernel
    if _kernel is None:
        _kernel = run_json([OURS, "--blas"])
    return _kernel


def twin_env(extra=None):
    """The twin's environment: clean, plus the OpenBLAS kernels our programs chose for themselves at start-up
    (src/base/runtime.h), so that both sides run the same kernels. Our programs get clean_env() and choose alone."""
    env = clean_env(extra)
    env.update(ISA_TWIN_ENV)
    if kernel_choice().get("chosen_by") == "plaingpt":
        env["OPENBLAS_CORETYPE"] = kernel_choice()["core"]
    return env


def kernels_line(ours_core, twin_core):
    return (f"OpenBLAS kernels: ours {ours_core or '?'}, PyTorch {twin_core or '?'}"
            + ("" if ours_core == twin_core else "   WARNING: not the same kernels"))


def run_json(cmd, env=None, timeout=1800):
    out = subprocess.run(cmd, env=env or clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=timeout, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def torch_available():
    r = subprocess.run(TWIN[:1] + ["-c", "import torch, numpy"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


# ---- the two programs --------------------------------------------------------------------------------------------

def ours_step(preset, threads, warmup, repeats, env=None, split="auto"):
    return run_json([OURS, "--step", preset, "--threads", str(threads), "--threads-split", split, "--warmup",
                     str(warmup), "--repeats", str(repeats)], env=clean_env(env))


def twin_step(preset, variant, warmup, repeats):
    env = twin_env(variant["env"])
    return run_json(TWIN + ["--bench", "--preset", preset, "--threads", str(variant["torch_threads"]), "--bench-warmup",
                            str(warmup), "--repeats", str(repeats)], env=env)


def variants_for(budget):
    """PyTorch configurations that use at most `budget` cores."""
    out = []
    for torch_threads in sorted({1, budget}):
        for passive in (False, True):
            env = {"OPENBLAS_NUM_THREADS": str(budget)}
            if passive:
                env["OMP_WAIT_POLICY"] = "PASSIVE"
            out.append({"torch_threads": torch_threads, "env": env,
                        "name": f"torch threads {torch_threads}, OpenBLAS {budget}"
                                + (", OMP_WAIT_POLICY=PASSIVE" if passive else "")})
    return out


def pick_best_variant(budget, quick, log):
    best, best_ms, probes = None, float("inf"), []
    for v in variants_for(budget):
        r = twin_step("tiny", v, 2 if quick else 3, 6 if quick else 10)
        probes.append({"variant": v["name"], "median_ms": r["median_ms"]})
        log(f"    probe {v['name']:<55} {r['median_ms']:9.2f} ms/step")
        if r["median_ms"] < best_ms:
            best, best_ms = v, r["median_ms"]
    return best, probes


# ---- tables ------------------------------------------------------------------------------------------------------

def ab_rounds(label, preset, threads, rounds, warmup, repeats, variant, have_torch, log, ours_spin=False):
    """Rounds of ours / PyTorch (/ ours with OMP_WAIT_POLICY=ACTIVE, a diagnostic), the order rotating per round.
    Our programs wait passively unless told otherwise (src/base/runtime.h), so "ours" is what a user runs."""
    runs = {"ours": [], "pytorch": [], "ours_spin": [], "ours_ops": []}
    contenders = (["ours"] + (["pytorch"] if have_torch else []) + (["ours_spin"] if ours_spin else [])
                  + (["ours_ops"] if ours_spin else []))
    for r in range(rounds):
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        if r % 2:
            order.reverse()
        for who in order:
            if who == "ours":
                runs[who].append(ours_step(preset, threads, warmup, repeats))
            elif who == "ours_spin":
                runs[who].append(ours_step(preset, threads, warmup, repeats, {"OMP_WAIT_POLICY": "ACTIVE"}))
            elif who == "ours_ops":
                runs[who].append(ours_step(preset, threads, warmup, repeats, split="ops"))
            else:
                runs[who].append(twin_step(preset, variant, warmup, repeats))
        line = ", ".join(f"{who} {runs[who][-1]['median_ms']:9.2f} ms" for who in contenders)
        log(f"    {label} round {r + 1}/{rounds}: {line}  (load {load_average():.1f})")

    def summary(runs):
        if not runs:
            return None
        meds = [x["median_ms"] for x in runs]
        med = statistics.median(meds)
        return {"median_ms": med, "round_medians_ms": meds, "min_ms": min(min(x["ms"]) for x in runs),
                "spread": max(meds) / min(meds),
                "median_cpu_ms": statistics.median(x["median_cpu_ms"] for x in runs),
                "tokens_per_s": runs[0]["batch"] * runs[0]["block_size"] / (med / 1000),
                "peak_rss_mb": max(x["peak_rss_mb"] for x in runs),
                "blas_core": runs[0].get("blas_core", ""),
                "estimate_mb": runs[0].get("estimate_mb")}

    res = {"target": label, "preset": preset, "threads": threads, "rounds": rounds, "warmup": warmup,
           "repeats": repeats, "ours": summary(runs["ours"]), "pytorch": summary(runs["pytorch"]),
           "ours_spin": summary(runs["ours_spin"]), "ours_ops": summary(runs["ours_ops"]),
           "ours_split": runs["ours"][0].get("threads_split") if runs["ours"] else None,
           "gflop_per_step": runs["ours"][0]["gflop_per_step"],
           "pytorch_variant": variant["name"] if (variant and have_torch) else None}
    if res["pytorch"]:
        res["speedup"] = res["pytorch"]["median_ms"] / res["ours"]["median_ms"]
        res["speedup_of_minima"] = res["pytorch"]["min_ms"] / res["ours"]["min_ms"]
    return res


def sampling_rounds(threads, rounds, variant, have_torch, log):
    """Ours (the Decoder: KV cache, the shadow at the slide) against the twin twice: nanoGPT's generate (the whole
    window recomputed for every token) and the twin with a KV cache (torch_twin.py --cache kv), the order rotating
    per round. The cached twin also reports how far its logits are from its full forward's (a check of the cache)."""
    runs = {"ours": [], "twin": [], "twin_kv": []}
    contenders = ["ours"] + (["twin", "twin_kv"] if have_torch else [])
    cores = {"ours": "", "twin": ""}
    cache_diff = 0.0
    for r in range(rounds):
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        for who in order:
            if who == "ours":
                o = run_json([OURS, "--sample", "--threads", str(threads), "--repeats", "3"])
                runs["ours"].append(o["tokens_per_s"])
                cores["ours"] = o.get("blas_core", "")
                continue
            cache = "kv" if who == "twin_kv" else "none"
            t = run_json(TWIN + ["--sample-bench", "--cache", cache, "--threads", str(variant["torch_threads"]),
                                 "--repeats", "2"], env=twin_env(variant["env"]))
            runs[who].append(t["tokens_per_s"])
            cores["twin"] = t.get("blas_core", "")
            cache_diff = max(cache_diff, t.get("cache_max_abs_logit_diff", 0.0))
    ours = statistics.median(runs["ours"])
    res = {"threads": threads, "ours_tokens_per_s": ours, "ours_runs": runs["ours"], "ours_blas_core": cores["ours"]}
    if have_torch:
        twin = statistics.median(runs["twin"])
        twin_kv = statistics.median(runs["twin_kv"])
        res.update(pytorch_tokens_per_s=twin, pytorch_runs=runs["twin"], speedup=ours / twin,
                   pytorch_kv_tokens_per_s=twin_kv, pytorch_kv_runs=runs["twin_kv"], speedup_kv=ours / twin_kv,
                   pytorch_kv_max_abs_logit_diff=cache_diff, pytorch_blas_core=cores["twin"])
    log(f"    sampling {threads} thread(s): ours {ours:8.0f} tok/s"
        + (f", pytorch {res['pytorch_tokens_per_s']:8.0f} tok/s (recompute), {res['pytorch_kv_tokens_per_s']:8.0f}"
           f" tok/s (KV cache)" if have_torch else ""))
    return res


def score_check(data, steps, log):
    """Train briefly with ./train, then score the same text with ./sample --score and the twin."""
    rows, ok = [], True
    tmp = tempfile.mkdtemp(prefix="plaingpt-compare-")
    try:
        with open(os.path.join(ROOT, data), encoding="utf-8", newline="") as f:
            text = f.read()
        score_file = os.path.join(tmp, "score.txt")
        with open(score_file, "w", encoding="utf-8", newline="") as f:
            f.write(text[len(text) // 2: len(text) // 2 + 20000])  # 20,000 characters from the middle
        for mask in ("causal", "window:16"):
            out = os.path.join(tmp, mask.replace(":", "_"))
            subprocess.run([TRAIN, "--preset", "tiny", "--data", data, "--out", out, "--steps", str(steps),
                            "--eval-every", "0", "--eval-iters", "1", "--mask", mask, "--threads", "2"],
                           cwd=ROOT, env=clean_env(), check=True, stdout=subprocess.DEVNULL)
            s = subprocess.run([SAMPLE, "--ckpt", out, "--score", score_file, "--threads", "2"], cwd=ROOT,
                               env=clean_env(), check=True, stdout=subprocess.PIPE, text=True).stdout
            m = re.search(r"([0-9.]+) nats/char", s)
            if not m:
                raise RuntimeError(f"./sample --score printed no nats/char line:\n{s}")
            ours = float(m.group(1))
            twin = run_json(TWIN + ["--score", out, score_file], env=twin_env({"OPENBLAS_NUM_THREADS": "2"}))
            diff = abs(ours - twin["nats_per_char"])
            good = diff <= TOLERANCE
            ok &= good
            rows.append({"mask": mask, "steps": steps, "ours_nats": ours, "pytorch_nats": twin["nats_per_char"],
                         "difference": diff, "ok": good, "predictions": twin["predictions"]})
            log(f"    {mask:<10} ./sample --score {ours:.4f}   torch_twin --score {twin['nats_per_char']:.6f}   "
                f"|diff| {diff:.2e}  {'ok' if good else 'FAIL (> %.0e)' % TOLERANCE}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    ap.add_argument("--rounds", type=int, default=None, help="A/B rounds for the tiny targets (default 5, quick 3)")
    ap.add_argument("--small-rounds", type=int, default=None, help="A/B rounds for the small preset (default 2)")
    ap.add_argument("--skip-small", action="store_true", help="leave out the small preset (it takes minutes)")
    ap.add_argument("--data", default="data/stories.txt", help="text for the checkpoint agreement check")
    ap.add_argument("--score-steps", type=int, default=40, help="./train steps before the agreement check")
    ap.add_argument("--json", help="where the results go (default bench/compare.json; with --isa avx2, "
                                   "bench/compare_avx2.json)")
    ap.add_argument("--bin", help="the folder of our bench, train and sample programs (default: build/bench/bench, "
                                  "./train and ./sample)")
    ap.add_argument("--isa", choices=["avx2"], help="avx2: the AVX2 proxy (with --bin build/avx2/bin): OpenBLAS's "
                                                    "Haswell kernels on both sides, the twin's ATen and oneDNN at AVX2")
    args = ap.parse_args()
    choose_programs(args.bin, args.isa)
    args.json = args.json or os.path.join(HERE, "compare_avx2.json" if args.isa else "compare.json")
    rounds = args.rounds or (3 if args.quick else 5)
    small_rounds = args.small_rounds or (1 if args.quick else 2)
    start = time.time()

    def log(msg):
        print(msg, flush=True)

    if not os.path.exists(OURS):
        sys.exit(f"compare: {OURS} is missing; run `make bench-compare` (it builds it)")
    have_torch = torch_available()
    if not have_torch:
        log("compare: PyTorch is not installed for /usr/bin/python3 — showing plaingpt only. To compare, install it:\n"
            "           apt-get install -y python3-torch python3-numpy")
    results = {"load_average_start": load_average(), "have_torch": have_torch, "targets": [], "sampling": [],
               "kernel_choice": kernel_choice(), "isa": args.isa or "native", "ours": OURS}
    if args.isa:
        log(f"the AVX2 proxy: ours from {os.path.relpath(os.path.dirname(OURS), ROOT)} (built for x86-64-v3); "
            + " ".join(f"{k}={v}" for k, v in {**ISA_ENV, **ISA_TWIN_ENV}.items()) + " for the twin, "
            + " ".join(f"{k}={v}" for k, v in ISA_ENV.items()) + " for ours")
    log(f"our programs run {kernel_choice()['blas']}; the twin gets "
        + (f"OPENBLAS_CORETYPE={twin_env()['OPENBLAS_CORETYPE']}, the same" if "OPENBLAS_CORETYPE" in twin_env()
           else "OpenBLAS's own choice, as ours"))

    log("1. training speed, A/B alternated (each run a fresh process; ms/step = median of its timed steps)")
    best = {}
    if have_torch:
        for budget in (2, 1):
            log(f"  choosing PyTorch's best configuration for {budget} core(s) (tiny preset):")
            best[budget], probes = pick_best_variant(budget, args.quick, log)
            results[f"pytorch_probes_{budget}"] = probes
            log(f"    -> {best[budget]['name']}")
    log("  the machine's sgemm rate (bench --sgemm-rate: OpenBLAS on the small preset's MLP product, as ours call it)")
    rates = {}
    for threads in (1, 2):
        rates[threads] = run_json([OURS, "--sgemm-rate", "--threads", str(threads)])["gflops"]
        log(f"    {threads} thread(s): {rates[threads]:.1f} GFLOP/s")
    results["sgemm_rate_gflops"] = rates
    targets = [("tiny, 2 threads", "tiny", 2, rounds, 3 if args.quick else 5, 10 if args.quick else 20),
               ("tiny, 1 thread", "tiny", 1, rounds, 3 if args.quick else 5, 10 if args.quick else 20)]
    if not args.skip_small:
        targets.append(("small, 2 threads", "small", 2, small_rounds, 1, 1 if args.quick else 2))
    for label, preset, threads, n, warmup, repeats in targets:
        log(f"  {label}: {n} rounds of {warmup} warm-up + {repeats} timed steps")
        target = ab_rounds(label, preset, threads, n, warmup, repeats, best.get(threads), have_torch, log,
                           ours_spin=(preset == "tiny" and threads > 1))
        # The step's share of the sgemm rate: its model FLOPs (the same for both sides) per second over the rate
        for impl in ("ours", "pytorch", "ours_spin", "ours_ops"):
            if target.get(impl):
                gflops = target["gflop_per_step"] / (target[impl]["median_ms"] / 1000)
                target[impl]["share_of_sgemm_rate"] = gflops / rates[threads]
        results["targets"].append(target)

    log("2. sampling, 500 tokens, tiny model: ours = KV cache; PyTorch = full recompute (nanoGPT generate) and KV cache")
    for threads in (1, 2):
        results["sampling"].append(sampling_rounds(threads, 2 if args.quick else 3, best.get(threads), have_torch,
                                                   log))

    ok = True
    if have_torch:
        log(f"3. checkpoint agreement: ./train {args.score_steps} steps on {args.data}, score 20,000 characters")
        results["score_check"], ok = score_check(args.data, args.score_steps, log)
    else:
        log("3. checkpoint agreement: skipped (no PyTorch)")

    # ---- the summary table ----
    log("")
    log("(%sgemm: the step's model FLOPs, 6N + 12LCT a token, per second over the machine's sgemm rate at as many "
        "threads; spread: the slowest round's median over the fastest's)")
    log(f"{'target':<18} {'impl':<9} {'ms/step':>10} {'spread':>7} {'CPU ms':>9} {'tokens/s':>10} {'%sgemm':>7} "
        f"{'peak RSS MB':>12} {'est. MB':>9}   ours/PyTorch speed")
    for t in results["targets"]:
        for impl in ("ours", "pytorch", "ours_spin", "ours_ops"):
            s = t.get(impl)
            if not s:
                continue
            est = f"{s['estimate_mb']:9.1f}" if s.get("estimate_mb") else f"{'':9}"
            extra = ""
            if impl == "ours_spin":
                extra = "   (diagnostic: ours with OMP_WAIT_POLICY=ACTIVE, idle threads spin)"
            if impl == "ours" and t["threads"] > 1:
                extra = f"   (--threads-split {t['ours_split']})"
            if impl == "ours_ops":
                extra = (f"   (--threads-split ops: every op split between the threads; batch-split is "
                         f"{s['median_ms'] / t['ours']['median_ms']:.2f}x faster)")
            if impl == "pytorch":
                extra = (f"   {t['speedup']:.2f}x (fastest steps {t['speedup_of_minima']:.2f}x); "
                         f"PyTorch RSS / ours {t['pytorch']['peak_rss_mb'] / t['ours']['peak_rss_mb']:.1f}x")
            name = {"ours_spin": "ours (A)", "ours_ops": "ours (ops)"}.get(impl, impl)
            log(f"{t['target'] if impl == 'ours' else '':<18} {name:<9} {s['median_ms']:10.2f} {s['spread']:6.2f}x "
                f"{s['median_cpu_ms']:9.1f} {s['tokens_per_s']:10.0f} {100 * s['share_of_sgemm_rate']:6.1f}% "
                f"{s['peak_rss_mb']:12.1f} {est}{extra}")
        if t["pytorch_variant"]:
            log(f"{'':<18} (PyTorch: {t['pytorch_variant']})")
            log(f"{'':<18} ({kernels_line(t['ours']['blas_core'], t['pytorch']['blas_core'])})")
    by_target = {t["target"]: t for t in results["targets"]}
    if "tiny, 2 threads" in by_target and "tiny, 1 thread" in by_target:
        two, one = by_target["tiny, 2 threads"]["ours"]["median_ms"], by_target["tiny, 1 thread"]["ours"]["median_ms"]
        results["tiny_two_threads_over_one"] = one / two
        log(f"tiny, ours: 2 threads {one / two:.2f}x faster than 1 ({two:.2f} against {one:.2f} ms/step)")
    for s in results["sampling"]:
        line = f"sampling, {s['threads']} thr    ours {s['ours_tokens_per_s']:8.0f} tok/s (KV cache)"
        if "pytorch_tokens_per_s" in s:
            line += (f"   pytorch {s['pytorch_kv_tokens_per_s']:8.0f} tok/s with a KV cache: {s['speedup_kv']:.1f}x,"
                     f" {s['pytorch_tokens_per_s']:8.0f} tok/s recomputing: {s['speedup']:.1f}x   "
                     f"({kernels_line(s['ours_blas_core'], s['pytorch_blas_core'])}; the cached twin's logits within "
                     f"{s['pytorch_kv_max_abs_logit_diff']:.1e} of its full forward's)")
        log(line)
    for r in results.get("score_check", []):
        log(f"score ({r['mask']:<9})  ours {r['ours_nats']:.4f}  pytorch {r['pytorch_nats']:.6f} nats/char  "
            f"|diff| {r['difference']:.1e} {'ok' if r['ok'] else 'FAIL'}")
    results["load_average_end"] = load_average()
    results["wall_s"] = time.time() - start
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    log(f"wrote {os.path.relpath(args.json, ROOT)} in {results['wall_s']:.0f} s "
        f"(load average {results['load_average_start']:.1f} at start, {results['load_average_end']:.1f} at end)")
    if not ok:
        log(f"compare: FAILED: the two implementations disagree by more than {TOLERANCE} nats")
        sys.exit(1)


if __name__ == "__main__":
    main()
