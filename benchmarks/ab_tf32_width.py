"""EXPERIMENT (branch tf32-tile-width; delete before merging): the TF32 tile-width rule A/B in one process.

    python benchmarks/ab_tf32_width.py [--rounds 3] [-k filter]

Three rules, chosen per call by TILES_TF32_WIDTH_RULE (read at every call): "old" (=waves: the width
rule and split costs this branch replaces), "no192" (the costed choice over 256 and 128 only) and "new"
(unset: 256, 192 and 128). For every tf32 case of bmm_grid.py on the Hopper TF32 kernel whose tile
differs between them, and every few-tile long-K case (whose split count may differ), times the three
and torch.matmul in alternating rounds (do_bench medians, L2 flushed), checks each rule's output
against torch's, and prints per case the tiles, times and speedups, the geomean gain of each rule over the old,
and the tf32 grid geomean under each rule (timed cases replaced, the others from the results file).
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
from bmm_grid import errors, grid_cases, operand  # noqa: E402

T = torch.ops.tiles
KNOB = "TILES_TF32_WIDTH_RULE"
RULES = {"old": "waves", "no192": "no192", "new": None}  # the knob's value for each rule


def with_rule(rule, fn):
    if RULES[rule]:
        os.environ[KNOB] = RULES[rule]
    else:
        os.environ.pop(KNOB, None)
    try:
        return fn()
    finally:
        os.environ.pop(KNOB, None)


def gm(values):
    return math.exp(statistics.mean(map(math.log, values)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-k", default="")
    args = ap.parse_args()
    from triton.testing import do_bench
    bench = lambda f: do_bench(f, warmup=3, rep=15, return_mode="median")  # noqa: E731
    torch.set_float32_matmul_precision("high")
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "nvidia-h100-80gb-hbm3.json")
    recorded = {r["name"]: r for r in json.load(open(results))["cases"]}
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}", flush=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # the build must be this branch's, and the knob must reach it: 2048 x 3072 x 768 takes 256-wide tiles
    # (swapped) under the old rule and 192-wide ones under the new, on 132 SMs
    probe = (torch.randn(2048, 768, device="cuda"), torch.randn(768, 3072, device="cuda"))
    probe_tiles = {rule: with_rule(rule, lambda: T._bmm_tile(*probe)) for rule in RULES}
    assert sms == 132 and probe_tiles == {"old": "256x128", "no192": "256x128", "new": "192x128"}, (sms, probe_tiles)
    gains, replaced = {"no192": [], "new": []}, {"old": {}, "no192": {}, "new": {}}
    for case in grid_cases(("tf32",), k=args.k):
        s = case.shape
        a = operand(s.b, s.m, s.k, case.layout[0] == "T", torch.float32, "cuda")
        b = operand(s.b, s.k, s.n, case.layout[1] == "T", torch.float32, "cuda")
        tiles = {rule: with_rule(rule, lambda: T._bmm_tile(a, b)) for rule in RULES}
        # the split count is not visible from here: also time the few-tile long-K cases whose tile is the same
        few_tiles = s.batch * -(-s.m // 128) * -(-s.n // 128) < 2 * sms and s.k >= 1024
        if not tiles["new"] or (len(set(tiles.values())) == 1 and not few_tiles):
            continue
        ref = torch.matmul(a, b)
        fro = max(with_rule(rule, lambda: errors(T.bmm(a, b), ref))[1] for rule in RULES)
        assert fro < 1e-2, (case.name, tiles, fro)  # TF32 against TF32: ~1e-3 when right
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
        for rule in RULES:
            replaced[rule][case.name] = us["torch"] / us[rule]
        for rule in gains:
            gains[rule].append(us["old"] / us[rule])
        print(f"{case.name[9:]:46s} {tiles['old']:>7s} {tiles['no192']:>7s} {tiles['new']:>7s} | us old {us['old']:7.1f}"
              f" no192 {us['no192']:7.1f} new {us['new']:7.1f} torch {us['torch']:7.1f} | speedup"
              f" {us['torch'] / us['old']:4.2f} {us['torch'] / us['no192']:4.2f} {us['torch'] / us['new']:4.2f}  fro {fro:.1e}",
              flush=True)
        del a, b
    for rule, v in gains.items():
        if v:
            print(f"{rule}: {len(v)} cases, geomean old/{rule} {gm(v):.3f}, worst {min(v):.3f}, best {max(v):.3f}")
    grid = [r for n, r in recorded.items() if n.startswith("grid bmm tf32 ")]
    for rule in RULES:
        print(f"tf32 grid geomean under {rule} (timed cases replaced, the rest from the results file):"
              f" {gm([replaced[rule].get(r['name'], r['speedup']) for r in grid]):.3f}")


if __name__ == "__main__":
    main()
