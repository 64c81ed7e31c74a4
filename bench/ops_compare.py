#!/usr/bin/env python3
"""bench/ops_compare.py — the tiny step's time op by op, ours beside the PyTorch twin's, 1 thread: `make bench-ops`.

Ours: `perf record` (cpu-clock samples) of `bench --step tiny --threads 1`, each sampled function put in a group
below and its share of the samples turned into ms of the median step. The twin: `torch_twin.py --bench --profile`,
each PyTorch op's self CPU time per step (torch.profiler), grouped the same way and scaled to the twin's median
step. The products (sgemm and OpenBLAS's packing, ours and PyTorch's mm/addmm/bmm) are one group: both sides run the
same OpenBLAS kernels there. Everything else is where the two programs differ; "everything else" is, for ours,
the kernel, start-up and small loops, and for the twin its autograd engine, views and dispatch.

Needs `perf` (Debian: linux-perf) for our side, and /usr/bin/python3 with python3-torch for the twin's. Run from the
repository root; `--isa avx2 --bin build/avx2/bin` runs the AVX2 proxy's programs (docs/performance.md, "The AVX2
proxy"), both sides on OpenBLAS's Haswell kernels, as bench/compare.py does. Prints one table; --json writes it.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import compare  # bench/compare.py: our programs (its OURS, after choose_programs), the environments, the twin
from compare import TWIN, clean_env, kernels_line, twin_env

# Groups, in the table's order: (name, pattern over our symbols, pattern over the twin's op names).
GROUPS = [
    ("products (sgemm, its packing)", r"sgemm|sgemv|cblas_|gemm_", r"^aten::(mm|addmm|bmm)$"),
    ("attention's scores, softmax, p·V", r"attention_|rebuild_block_probs|attend_",
     r"^aten::(_softmax|_softmax_backward_data|masked_fill_?|baddbmm|mul)$"),  # mul: the scores' 1/√d
    ("GELU", r"gelu", r"^aten::gelu"),
    ("LayerNorm", r"layernorm", r"^aten::native_layer_norm"),
    ("cross-entropy", r"cross_entropy", r"^aten::(_log_softmax|_log_softmax_backward_data|nll_loss)"),
    ("AdamW and the gradient norm", r"AdamW|adamw|global_norm|clip",
     r"^(Optimizer\.step|aten::(_foreach_\w*|addcdiv_|addcmul_|lerp_|sqrt|norm|div|mul_|add_|linalg_vector_norm"
     r"|stack|clamp|clamp_)$)"),
    ("embeddings", r"embedding", r"^aten::embedding"),
    ("bias rows and residual adds", r"linear_forward|linear_backward|residual", r"^aten::(sum|add)$"),
    ("memset, memcpy", r"memset|memcpy|memmove", r"^aten::(copy_|cat|fill_|zero_|clone|_to_copy|contiguous)$"),
]
OTHER = "everything else"  # ours: the kernel, start-up, small loops; the twin: autograd, views, dispatch


def group_of(name, side):
    for g, ours, twin in GROUPS:
        if re.search(ours if side == 0 else twin, name):
            return g
    return OTHER


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ops_compare: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


def ours(bench, env, repeats):
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        out = run(["perf", "record", "-F", "2000", "-o", data, bench, "--step", "tiny", "--threads", "1",
                   "--repeats", str(repeats)], env)
        step = json.loads(out.strip().splitlines()[-1])
        report = run(["perf", "report", "-i", data, "--no-children", "--sort", "symbol", "-F", "overhead,symbol",
                      "--stdio"], env)
    shares = {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.*\S)", line)
        if m:
            shares[m.group(2)] = float(m.group(1)) / 100
    return step, shares


def twin(env, repeats):
    out = run(TWIN + ["--bench", "--threads", "1", "--repeats", str(repeats), "--profile"], env)
    step = json.loads(out.strip().splitlines()[-1])
    ops = step["ops_self_cpu_ms_per_step"]
    total = sum(ops.values())
    return step, {name: ms / total for name, ms in ops.items()}  # shares of the profiled time


def grouped(shares, side, step_ms):
    out = {}
    for name, share in shares.items():
        g = group_of(name, side)
        out[g] = out.get(g, 0.0) + share * step_ms
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="the folder of our bench program (default: build/bench/bench)")
    ap.add_argument("--isa", choices=["avx2"], help="the AVX2 proxy: both sides on OpenBLAS's Haswell kernels")
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--json")
    args = ap.parse_args()
    compare.choose_programs(args.bin, args.isa)
    one_thread = {"OPENBLAS_NUM_THREADS": "1"}
    our_step, our_shares = ours(compare.OURS, clean_env(one_thread), args.repeats)
    twin_step, twin_shares = twin(twin_env(one_thread), args.repeats)  # on the kernels our bench chose
    a = grouped(our_shares, 0, our_step["median_ms"])
    b = grouped(twin_shares, 1, twin_step["median_ms"])
    print("the tiny step at 1 thread, op by op (ms per step; ours from perf samples, the twin from torch.profiler)")
    print("  " + kernels_line(our_step["blas_core"], twin_step.get("blas_core")))
    print(f"  {'group':<36} {'ours':>8} {'twin':>8} {'twin/ours':>10}")
    rows = []
    for g in [g for g, _, _ in GROUPS] + [OTHER]:
        x, y = a.get(g, 0.0), b.get(g, 0.0)
        rows.append({"group": g, "ours_ms": x, "twin_ms": y})
        ratio = f"{y / x:.2f}x" if x > 0.005 else "—"
        print(f"  {g:<36} {x:8.2f} {y:8.2f} {ratio:>10}")
    print(f"  {'the step (median)':<36} {our_step['median_ms']:8.2f} {twin_step['median_ms']:8.2f} "
          f"{twin_step['median_ms'] / our_step['median_ms']:9.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": our_step["median_ms"], "twin": twin_step["median_ms"], "groups": rows,
                       "blas_core": our_step["blas_core"], "isa": args.isa or "native"}, f, indent=1)


if __name__ == "__main__":
    main()
