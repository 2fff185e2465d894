"""EXPERIMENT (branch tf32-tile-width; delete before merging): the 16-bit kernel's streaming store, A/B.

    python benchmarks/ab_streaming_store.py [--rounds 3] [-k filter]

The grid's bf16 / fp16 cases on `hopper-wgmma streaming-store` (K <= 128, an output larger than L2: the
attention products) read 0.71-1.00x at 27adeba, worst at K = 128 and the largest outputs (384 x 2048^2:
63-75% of the write floor, torch 89%). Each is timed with the streaming store (K <= 128 streams, the
rule), with K = 128 on TMA stores (TILES_HOPPER_STREAM_MAX_K=64) and with no streaming at all (=0),
against torch.matmul, in alternating rounds (do_bench medians, L2 flushed), outputs checked.
"""
import argparse
import os
import statistics
import sys

import torch

import torch_tiles  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bmm_grid import PRECISIONS, errors, grid_cases, operand  # noqa: E402

T = torch.ops.tiles
KNOB = "TILES_HOPPER_STREAM_MAX_K"
RULES = {"stream<=128": None, "stream<=64": "64", "tma": "0"}


def with_rule(rule, fn):
    if RULES[rule] is None:
        os.environ.pop(KNOB, None)
    else:
        os.environ[KNOB] = RULES[rule]
    try:
        return fn()
    finally:
        os.environ.pop(KNOB, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-k", default="")
    args = ap.parse_args()
    from triton.testing import do_bench
    bench = lambda f: do_bench(f, warmup=3, rep=15, return_mode="median")  # noqa: E731
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}", flush=True)
    for case in grid_cases(("bf16", "fp16"), k=args.k):
        s = case.shape
        if s.k > 128:
            continue
        dtype = PRECISIONS[case.prec][0]
        a = operand(s.b, s.m, s.k, case.layout[0] == "T", dtype, "cuda")
        b = operand(s.b, s.k, s.n, case.layout[1] == "T", dtype, "cuda")
        paths = {rule: with_rule(rule, lambda: T._bmm_path(a, b)) for rule in RULES}
        if paths["stream<=128"] != "hopper-wgmma streaming-store":
            continue
        assert paths["tma"] == "hopper-wgmma", paths  # the knob reached the build
        ref = torch.matmul(a, b)
        worst = max(with_rule(rule, lambda: errors(T.bmm(a, b), ref))[0] for rule in RULES)
        assert worst < 2e-2, (case.name, worst)
        del ref
        order = list(RULES) + ["torch"]
        times = {w: [] for w in order}
        for r in range(args.rounds):
            for which in (order if r % 2 == 0 else order[::-1]):
                if which == "torch":
                    times[which].append(bench(lambda: torch.matmul(a, b)))
                else:
                    times[which].append(with_rule(which, lambda: bench(lambda: T.bmm(a, b))))
        us = {w: statistics.median(times[w]) * 1e3 for w in order}
        print(f"{case.name[9:]:46s} " + "  ".join(f"{w} {us[w]:8.1f}" for w in order)
              + " | speedup " + " ".join(f"{us['torch'] / us[w]:4.2f}" for w in RULES), flush=True)
        del a, b


if __name__ == "__main__":
    main()
