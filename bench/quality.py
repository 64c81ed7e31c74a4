#!/usr/bin/env python3
"""bench/quality.py — time-to-quality: `make bench-quality`.

Trains the tiny preset for 2000 steps on a text (Tiny Shakespeare by default, read where it lies — never copied
into the repository) at 2 threads, exactly as a user would:
    ./train --preset tiny --data DATA --out OUT --threads 2
and reports the wall time of the whole run (evaluations and checkpoints included), the final validation loss, and
the time at which an evaluation first showed val loss <= 1.88 (`--lr X` trains both with peak lr X, floor X/10).
With --torch the PyTorch twin (bench/torch_twin.py --train) does the same run afterwards, with the same schedule,
evaluation cadence (every 250 steps, 20 batches per split) and thread budget, for comparison.
Target: val loss <= 1.88 in under 35 s. Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the make target
does). Results go to bench/quality.json.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TWIN_PY = os.environ.get("BENCH_PY") or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
TARGET_LOSS, TARGET_S = 1.88, 35.0


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


def clean_env(extra=None):
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS"):
        env.pop(var, None)
    env.update(extra or {})
    return env


def run_streaming(cmd, env, evals):
    """Runs cmd, echoing its output; returns (output, wall seconds). Appends (seconds since start, step, val loss)
    to evals as each evaluation line arrives, so the time to a target loss includes everything before it."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        m = re.match(r"step (\d+): train loss [0-9.]+, val loss ([0-9.]+)", line)
        if m:
            evals.append((time.perf_counter() - t0, int(m.group(1)), float(m.group(2))))
        if re.match(r"step \d+: ", line) or line.startswith(("done", "model", "{")):
            print("    " + line.rstrip(), flush=True)
    p.wait()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"quality: {' '.join(cmd)} failed ({p.returncode}):\n{''.join(lines[-20:])}")
    return "".join(lines), wall


def summary(impl, wall, evals, cmd, env):
    """One run's row: wall time, final val loss, and the first evaluation at or below the target (time, step)."""
    first = next(((t, step) for t, step, val in evals if val <= TARGET_LOSS), None)
    return {"impl": impl, "wall_s": wall, "val_loss": evals[-1][2] if evals else float("nan"),
            "target_s": first[0] if first else None, "target_step": first[1] if first else None,
            "evals": evals, "command": " ".join(cmd), "env": env}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
    ap.add_argument("--data", default=default_data if os.path.exists(default_data) else "data/stories.txt")
    ap.add_argument("--out", default="/tmp/plaingpt-bench-quality")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate for both (default: the preset's)")
    ap.add_argument("--torch", action="store_true", help="also run the PyTorch twin's --train")
    ap.add_argument("--torch-env", default="OMP_WAIT_POLICY=PASSIVE",
                    help="extra environment for the twin, e.g. '' or 'OMP_WAIT_POLICY=PASSIVE'")
    ap.add_argument("--ours-env", default="",
                    help="extra environment for ./train, e.g. 'OMP_WAIT_POLICY=PASSIVE' on a busy machine")
    ap.add_argument("--json", default=os.path.join(HERE, "quality.json"))
    args = ap.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"quality: {args.data} does not exist; pass --data (make bench-quality BENCH_DATA=...)")
    results = {"data": os.path.abspath(args.data), "steps": args.steps, "threads": args.threads,
               "load_average_start": load_average(), "runs": []}

    cmd = [os.path.join(ROOT, "train"), "--preset", "tiny", "--data", args.data, "--out", args.out, "--threads",
           str(args.threads), "--steps", str(args.steps)]
    lr_flags = ["--lr", str(args.lr), "--min-lr", str(args.lr / 10)] if args.lr else []
    cmd += lr_flags
    ours_extra = dict(kv.split("=", 1) for kv in args.ours_env.split() if "=" in kv)
    print(f"ours: {' '.join(k + '=' + v for k, v in ours_extra.items())} {' '.join(cmd)}", flush=True)
    evals = []
    out, wall = run_streaming(cmd, clean_env(ours_extra), evals)
    results["runs"].append(summary("plaingpt", wall, evals, cmd, ours_extra))

    if args.torch:
        extra = dict(kv.split("=", 1) for kv in args.torch_env.split() if "=" in kv)
        extra["OPENBLAS_NUM_THREADS"] = str(args.threads)
        tcmd = [TWIN_PY, os.path.join(HERE, "torch_twin.py"), "--train", args.data, "--steps", str(args.steps),
                "--threads", str(args.threads)] + lr_flags
        print(f"pytorch: {' '.join(k + '=' + v for k, v in extra.items())} {' '.join(tcmd)}", flush=True)
        check = subprocess.run([TWIN_PY, "-c", "import torch"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if check.returncode != 0:
            print("    PyTorch is not installed for /usr/bin/python3: apt-get install -y python3-torch python3-numpy")
        else:
            tevals = []
            tout, twall = run_streaming(tcmd, clean_env(extra), tevals)
            results["runs"].append(summary("pytorch", twall, tevals, tcmd, extra))

    print()
    print(f"time-to-quality: tiny preset, {args.steps} steps, {args.threads} threads, {args.data}")
    print(f"  {'impl':<9} {'wall s':>8} {'val loss':>9} {'first eval <= ' + str(TARGET_LOSS):>22}"
          f"   target: val loss <= {TARGET_LOSS} in < {TARGET_S:.0f} s")
    for r in results["runs"]:
        hit = f"step {r['target_step']} at {r['target_s']:.1f} s" if r["target_s"] is not None else "never"
        met = r["target_s"] is not None and r["target_s"] < TARGET_S
        print(f"  {r['impl']:<9} {r['wall_s']:8.1f} {r['val_loss']:9.4f} {hit:>22}   {'met' if met else 'not met'}")
    if len(results["runs"]) == 2:
        ours, theirs = results["runs"]
        print(f"  PyTorch / ours wall time: {theirs['wall_s'] / ours['wall_s']:.2f}x", end="")
        if ours["target_s"] is not None and theirs["target_s"] is not None:
            print(f"; time to val <= {TARGET_LOSS}: {theirs['target_s'] / ours['target_s']:.2f}x", end="")
        print()
    results["load_average_end"] = load_average()
    print(f"  (load average {results['load_average_start']:.1f} at start, {results['load_average_end']:.1f} at end)")
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
