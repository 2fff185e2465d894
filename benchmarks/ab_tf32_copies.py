"""EXPERIMENT (branch tf32-copied-operands; delete before merging): float32 operands TMA cannot address,
on the Hopper kernel's copies against the mma.sync kernel, in one process.

    python benchmarks/ab_tf32_copies.py [--rounds 3] [-k filter] [--prec tf32,fp32]

TILES_TF32_COPIES=0 (read at every call) sends such operands to the mma.sync kernel as before the branch;
unset, the Hopper TF32 kernel copies them with cp.async. For every tf32 / fp32 case of bmm_grid.py whose
path changes between the two, times both and torch.matmul in alternating rounds (do_bench medians, L2
flushed), checks each output against torch's, and prints per case the paths, times and speedups, the
geomean gain, and each precision's grid geomean with the timed cases replaced (the rest from the
results file).
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch

import torch_tiles  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bmm_grid import PRECISIONS, errors, grid_cases, operand  # noqa: E402

T = torch.ops.tiles
KNOB = "TILES_TF32_COPIES"


def with_copies(on, fn):
    if on:
        os.environ.pop(KNOB, None)
    else:
        os.environ[KNOB] = "0"
    try:
        return fn()
    finally:
        os.environ.pop(KNOB, None)


def gm(values):
    return math.exp(statistics.mean(map(math.log, values))) if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-k", default="")
    ap.add_argument("--prec", default="tf32,fp32")
    args = ap.parse_args()
    from triton.testing import do_bench
    bench = lambda f: do_bench(f, warmup=3, rep=15, return_mode="median")  # noqa: E731
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "nvidia-h100-80gb-hbm3.json")
    recorded = {r["name"]: r for r in json.load(open(results))["cases"]}
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}", flush=True)
    # the build must be this branch's and the knob must reach it: an odd N takes the copies, or not
    probe = (torch.randn(512, 96, device="cuda"), torch.randn(96, 2003, device="cuda"))
    paths = {on: with_copies(on, lambda: T._bmm_path(*probe)) for on in (True, False)}
    assert paths[True] == "hopper-wgmma 3xtf32 copied" and paths[False].startswith("mma-sync"), paths
    for prec in args.prec.split(","):
        dtype, precision = PRECISIONS[prec]
        torch.set_float32_matmul_precision(precision)
        gains, replaced = [], {}
        for case in grid_cases((prec,), k=args.k):
            s = case.shape
            a = operand(s.b, s.m, s.k, case.layout[0] == "T", dtype, "cuda")
            b = operand(s.b, s.k, s.n, case.layout[1] == "T", dtype, "cuda")
            names = {on: with_copies(on, lambda: T._bmm_path(a, b)) for on in (True, False)}
            if names[True] == names[False]:
                continue
            ref = torch.matmul(a, b)
            fro = max(with_copies(on, lambda: errors(T.bmm(a, b), ref))[1] for on in (True, False))
            assert fro < (1e-2 if prec == "tf32" else 1e-5), (case.name, names, fro)
            del ref
            order = ["copies", "mma", "torch"]
            times = {w: [] for w in order}
            for r in range(args.rounds):
                for which in (order if r % 2 == 0 else order[::-1]):
                    if which == "torch":
                        times[which].append(bench(lambda: torch.matmul(a, b)))
                    else:
                        times[which].append(with_copies(which == "copies", lambda: bench(lambda: T.bmm(a, b))))
            us = {w: statistics.median(times[w]) * 1e3 for w in order}
            replaced[case.name] = us["torch"] / us["copies"]
            gains.append(us["mma"] / us["copies"])
            print(f"{case.name[9:]:44s} {names[False]:28s} -> {names[True]:30s} | us mma {us['mma']:8.1f}"
                  f" copies {us['copies']:8.1f} torch {us['torch']:8.1f} | speedup {us['torch'] / us['mma']:4.2f}"
                  f" -> {us['torch'] / us['copies']:4.2f}  fro {fro:.1e}", flush=True)
            del a, b
        grid = [r for n, r in recorded.items() if n.startswith(f"grid bmm {prec} ")]
        print(f"{prec}: {len(gains)} cases, geomean mma/copies {gm(gains):.3f}, worst {min(gains, default=0):.3f},"
              f" best {max(gains, default=0):.3f}; grid geomean {gm([r['speedup'] for r in grid]):.3f} ->"
              f" {gm([replaced.get(r['name'], r['speedup']) for r in grid]):.3f}", flush=True)


if __name__ == "__main__":
    main()
