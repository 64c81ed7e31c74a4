#!/usr/bin/env python3
"""bench/frontier.py — validation loss against wall-clock time: `make bench-frontier`.

Trains on a text (Tiny Shakespeare by default, read where it lies, never copied into the repository) with three
recipes, each by ./train exactly as a user runs it and then by the PyTorch twin (bench/torch_twin.py --train) on the
same recipe, same thread budget, same evaluation cadence:

  nanogpt    ./train --preset nanogpt: the tiny model with nanoGPT's CPU recipe (lr 1e-3 → 1e-4, 100 warm-up steps,
             2000 steps of 12×64), the baseline the tiny preset is measured against
  tiny       ./train --preset tiny: the defaults every `make train` user gets (docs/performance.md says why)
  frontier   ./train --preset frontier: the best loss we found for 10 minutes of two cores

The twin runs each short recipe to its end, and the frontier recipe for as long as ours took (the same budget).
Every evaluation line is timed as it arrives, so a time includes everything before it (start-up, data, earlier
evaluations and checkpoints). It prints, for each run, the final validation loss and the time of the first
evaluation at or below 2.0, 1.88, 1.7, 1.6, 1.5 and 1.47, and the time-to-quality ratio: how long the twin's nanoGPT run takes
to reach its own final loss, against how long ./train --preset tiny takes to reach that same loss.
nanoGPT's estimator (200 random validation windows at every evaluation, rounded up to whole batches: ./train
--eval-windows 200, metrics.csv's val_windows beside wall_s) gives a second table. For the short recipes it comes
from a second run of ours with that flag (the same training: the windows have their own seed), so the first table
and the time-to-quality ratio time ./train as a user runs it; the estimator's cost (~75 ms an evaluation of the tiny
model) is inside the second run's times only. The frontier recipe runs once, with the flag: the twin is given that
run's wall time, so the estimator's cost is time the twin gets (a handicap of ours).
Results: bench/frontier.json; the chart: docs/frontier.svg (drawn by `build/bench/bench --plot`).

`--isa avx2 --bin build/avx2/bin` (make bench-frontier BENCH_ISA=avx2) runs the AVX2 proxy of bench/compare.py:
our ./train built for x86-64-v3, both sides on OpenBLAS's Haswell kernels, the twin's ATen and oneDNN at AVX2.

Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the make target does): ./train chooses its OpenBLAS kernels as
a user's would, and the twin is given the same (bench/compare.py, twin_env). Needs python3-torch for
/usr/bin/python3 for the twin's runs (without it: ours only). A long run: about 35 minutes on two cores.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import compare  # bench/compare.py: its TRAIN is ./train, or the AVX2 proxy's after choose_programs
from compare import (HERE, ROOT, TWIN_PY, clean_env, kernel_choice, kernels_line, load_average, torch_available,
                     twin_env)

THRESHOLDS = (2.0, 1.88, 1.7, 1.6, 1.5, 1.47)
WINDOWS = 200  # nanoGPT's estimator: ours also scores this many random validation windows at every evaluation

# name → (./train flags, the twin's wall-clock budget as a multiple of ours; 0 = run the whole recipe). The twin
# takes the same flags (torch_twin.py reads the recipe from ./train --print-settings). The frontier recipe is a
# 10-minute budget, so the twin gets the same wall time; the short recipes run to the end on both sides.
RECIPES = {
    "nanogpt": (["--preset", "nanogpt"], 0),
    "tiny": (["--preset", "tiny"], 0),
    "frontier": (["--preset", "frontier"], 1.0),
}


def run_timed(cmd, env, log):
    """Runs cmd; returns (evaluations as (seconds since start, step, val loss), wall seconds, last output line,
    the OpenBLAS kernels of ./train's "blas:" header line or "")."""
    evals, core = [], ""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = []
    for line in p.stdout:
        tail = (tail + [line])[-20:]
        k = re.match(r"blas: OpenBLAS \S+ with its (\S+) kernels", line)
        if k:
            core = k.group(1)
        m = re.match(r"step (\d+): train loss [0-9.]+, val loss ([0-9.]+)", line)
        if m:
            evals.append((time.perf_counter() - t0, int(m.group(1)), float(m.group(2))))
            log(f"      {line.rstrip()}  [{evals[-1][0]:.1f} s]")
    p.wait()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"frontier: {' '.join(cmd)} failed ({p.returncode}):\n{''.join(tail)}")
    return evals, wall, tail[-1].strip() if tail else "", core


def windows_evals(metrics_csv):
    """(wall_s, step, val_windows) of every evaluation row of our metrics.csv: ./train's own clock."""
    out = []
    with open(metrics_csv) as f:
        for row in csv.DictReader(f):
            if row.get("val_windows"):
                out.append((float(row["wall_s"]), int(row["step"]), float(row["val_windows"])))
    return out


def crossings(evals):
    """{threshold: seconds of the first evaluation at or below it, or None}, and the table's cells for them."""
    hits = {str(x): (first_at_or_below(evals, x) or (None,))[0] for x in THRESHOLDS}
    return hits, "".join(f"{(f'{t:.1f} s' if t is not None else '—'):>11}" for t in hits.values())


def first_at_or_below(evals, loss):
    """(seconds, step) of the first evaluation with val loss ≤ loss, or None."""
    return next(((t, step) for t, step, val in evals if val <= loss), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
    ap.add_argument("--data", default=default_data if os.path.exists(default_data) else "data/stories.txt")
    ap.add_argument("--recipes", default="nanogpt,tiny,frontier", help="comma-separated, from: " + ", ".join(RECIPES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-torch", action="store_true", help="ours only")
    ap.add_argument("--json", help="default bench/frontier.json (with --isa avx2: bench/frontier_avx2.json)")
    ap.add_argument("--svg", help="default docs/frontier.svg (with --isa avx2: docs/frontier_avx2.svg)")
    ap.add_argument("--plot-bin", default=os.path.join(ROOT, "build", "bench", "bench"))
    ap.add_argument("--bin", help="the folder of our train program (the AVX2 proxy's: build/avx2/bin)")
    ap.add_argument("--isa", choices=["avx2"], help="the AVX2 proxy, as bench/compare.py --isa")
    args = ap.parse_args()
    compare.choose_programs(args.bin, args.isa)
    suffix = "_avx2" if args.isa else ""
    args.json = args.json or os.path.join(HERE, f"frontier{suffix}.json")
    args.svg = args.svg or os.path.join(ROOT, "docs", f"frontier{suffix}.svg")
    if not os.path.exists(args.data):
        sys.exit(f"frontier: {args.data} does not exist; pass --data (make bench-frontier BENCH_DATA=...)")
    names = [n for n in args.recipes.split(",") if n]
    for n in names:
        if n not in RECIPES:
            sys.exit(f"frontier: unknown recipe '{n}' (expected {', '.join(RECIPES)})")
    have_torch = not args.no_torch and torch_available()
    if not args.no_torch and not have_torch:
        print("frontier: PyTorch is not installed for /usr/bin/python3 (apt-get install -y python3-torch "
              "python3-numpy): ours only")
    log = lambda s: print(s, flush=True)
    results = {"data": os.path.abspath(args.data), "threads": args.threads, "load_average_start": load_average(),
               "machine": os.uname().machine, "isa": args.isa or "native", "ours": compare.TRAIN, "runs": []}
    try:
        with open("/proc/cpuinfo") as f:
            results["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass

    with tempfile.TemporaryDirectory(prefix="plaingpt-frontier-") as tmp:
        for name in names:
            flags = RECIPES[name][0] + ["--threads", str(args.threads)]
            ours = lambda out, extra=(): [compare.TRAIN, "--data", args.data, "--out",
                                          os.path.join(tmp, out)] + flags + list(extra)
            windows = ["--eval-windows", str(WINDOWS)]
            short = RECIPES[name][1] == 0  # runs to its end: time it as a user runs it, the estimator separately
            cmd = ours(name, () if short else windows)
            log(f"{name}, ours: {' '.join(cmd)}")
            evals, wall, _, core = run_timed(cmd, clean_env(), log)
            run = {"recipe": name, "impl": "plaingpt", "flags": flags, "wall_s": wall, "evals": evals,
                   "blas_core": core}
            estimator_out = name + "-windows" if short else name  # the run whose metrics.csv has val_windows
            if short:
                again = ours(estimator_out, windows)
                log(f"{name}, ours again for nanoGPT's estimator: {' '.join(again)}")
                again_evals, run["estimator_run_wall_s"], _, _ = run_timed(again, clean_env(), log)
                # the same training, so the same losses by our own estimator: a check that the two runs compare
                run["estimator_run_same_losses"] = [e[1:] for e in again_evals] == [e[1:] for e in evals]
                if not run["estimator_run_same_losses"]:
                    log(f"frontier: warning: {name}'s second run did not reproduce the first's validation losses")
            run["windows_evals"] = windows_evals(os.path.join(tmp, estimator_out, "metrics.csv"))
            results["runs"].append(run)
            if not have_torch:
                continue
            limit = RECIPES[name][1] * wall
            tcmd = [TWIN_PY, os.path.join(HERE, "torch_twin.py"), "--train", args.data, "--time-limit", f"{limit:.1f}"]
            tcmd += flags
            env = twin_env({"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": str(args.threads)})
            coretype = f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} " if "OPENBLAS_CORETYPE" in env else ""
            log(f"{name}, PyTorch twin: {coretype}OMP_WAIT_POLICY=PASSIVE {' '.join(tcmd)}")
            tevals, twall, last, _ = run_timed(tcmd, env, log)
            info = json.loads(last) if last.startswith("{") else {}
            results["runs"].append({"recipe": name, "impl": "pytorch", "flags": flags, "wall_s": twall,
                                    "blas_core": info.get("blas_core", ""),
                                    "evals": tevals, "stopped_by_time_limit": info.get("steps_run", 0) <
                                    info.get("recipe", {}).get("steps", 0), "torch": info.get("torch", "")})
    results["load_average_end"] = load_average()

    # ---- tables ----
    print()
    print(f"validation loss against wall-clock time: {args.data}, {args.threads} threads "
          f"(load average {results['load_average_start']:.1f} at start, {results['load_average_end']:.1f} at end)")
    header = "".join(f"{'t(≤' + str(x) + ')':>11}" for x in THRESHOLDS)
    ours_cores = {r["blas_core"] for r in results["runs"] if r["impl"] == "plaingpt"}
    twin_cores = {r["blas_core"] for r in results["runs"] if r["impl"] == "pytorch"}
    print(f"  {kernels_line(','.join(sorted(ours_cores)), ','.join(sorted(twin_cores)) if twin_cores else '(no twin)')}")
    results["kernel_choice"] = kernel_choice()
    print(f"  {'recipe':<9} {'impl':<9} {'steps':>6} {'wall s':>8} {'val loss':>9}{header}")
    for r in results["runs"]:
        last = r["evals"][-1] if r["evals"] else (float("nan"), 0, float("nan"))
        r["final_val"], r["final_step"] = last[2], last[1]
        r["crossings"], cells = crossings(r["evals"])
        stopped = " (time limit)" if r.get("stopped_by_time_limit") else ""
        print(f"  {r['recipe']:<9} {r['impl']:<9} {r['final_step']:>6} {r['wall_s']:8.1f} {r['final_val']:9.4f}{cells}"
              f"{stopped}")
    print(f"  ours, by nanoGPT's estimator ({WINDOWS} random validation windows at each evaluation; metrics.csv's "
          f"wall_s, ./train's own clock; the short recipes from a second run with --eval-windows {WINDOWS}):")
    for r in results["runs"]:
        if r["impl"] != "plaingpt":
            continue
        r["crossings_windows"], cells = crossings(r["windows_evals"])
        last = r["windows_evals"][-1] if r["windows_evals"] else (float("nan"), 0, float("nan"))
        print(f"  {r['recipe']:<9} {'ours':<9} {last[1]:>6} {last[0]:8.1f} {last[2]:9.4f}{cells}")
    runs = {(r["recipe"], r["impl"]): r for r in results["runs"]}
    base, ours_tiny = runs.get(("nanogpt", "pytorch")), runs.get(("tiny", "plaingpt"))
    if base and ours_tiny and base["evals"]:
        target = base["final_val"]
        t_twin = first_at_or_below(base["evals"], target)[0]
        hit = first_at_or_below(ours_tiny["evals"], target)
        results["time_to_quality"] = {"loss": target, "twin_nanogpt_s": t_twin,
                                      "ours_tiny_s": hit[0] if hit else None,
                                      "ratio": t_twin / hit[0] if hit else None}
        print(f"  time to the twin's nanoGPT-recipe final loss {target:.4f}: twin {t_twin:.1f} s, ours (tiny preset) "
              + (f"{hit[0]:.1f} s: {t_twin / hit[0]:.2f}x less wall time" if hit else "never"))
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)

    # ---- chart: one colour per recipe, ours solid, the twin dashed ----
    chart = {"title": f"Validation loss against wall-clock time, {args.threads} threads",
             "x_label": "seconds (log scale)", "y_label": "validation loss (nats/char)", "log_x": True, "series": []}
    for r in results["runs"]:
        pts = [(t, v) for t, step, v in r["evals"] if step > 0 and v <= 2.6]
        chart["series"].append({"label": f"{r['recipe']}, {'ours' if r['impl'] == 'plaingpt' else 'PyTorch'}",
                                "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                                "colour": names.index(r["recipe"]), "dashed": r["impl"] == "pytorch"})
    if os.path.exists(args.plot_bin):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(chart, f)
        subprocess.run([args.plot_bin, "--plot", f.name, args.svg], check=True)
        os.unlink(f.name)
        print(f"  chart: {args.svg}")
    else:
        print(f"  no chart: {args.plot_bin} is not built (make bench-build)")


if __name__ == "__main__":
    main()
