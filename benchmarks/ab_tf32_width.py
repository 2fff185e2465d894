"""EXPERIMENT (branch tf32-tile-width; delete before merging): the TF32 tile-width rule A/B in one process.

    python benchmarks/ab_tf32_width.py [--rounds 3] [-k filter]

For every tf32 case of bmm_grid.py on the Hopper TF32 kernel whose tile differs between the costed
rule (this branch) and the waves rule it replaces (TILES_TF32_WIDTH_RULE=waves, read at every call; its
split costs too), and every few-tile long-K case (whose split count may differ), times both rules and
torch.matmul in alternating rounds (do_bench, L2 flushed), checks the output against torch's, and
prints the per-case times, the geomean of old / new over those cases, and the tf32 grid geomean with
their speedups replaced (the other cases' from the results file).
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


def with_rule(old, fn):
    if old:
        os.environ[KNOB] = "waves"
    else:
        os.environ.pop(KNOB, None)
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
    bench = lambda f: do_bench(f, warmup=3, rep=15)  # noqa: E731
    torch.set_float32_matmul_precision("high")
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "nvidia-h100-80gb-hbm3.json")
    recorded = {r["name"]: r for r in json.load(open(results))["cases"]}
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}")
    changed, replaced = [], {}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for case in grid_cases(("tf32",), k=args.k):
        s = case.shape
        a = operand(s.b, s.m, s.k, case.layout[0] == "T", torch.float32, "cuda")
        b = operand(s.b, s.k, s.n, case.layout[1] == "T", torch.float32, "cuda")
        old_tile, new_tile = with_rule(True, lambda: T._bmm_tile(a, b)), with_rule(False, lambda: T._bmm_tile(a, b))
        # the split count is not visible from here: also time the few-tile long-K cases whose tile is the same
        few_tiles = s.batch * -(-s.m // 128) * -(-s.n // 128) < 2 * sms and s.k >= 1024
        if not new_tile or (old_tile == new_tile and not few_tiles):
            continue
        _, fro = errors(T.bmm(a, b), torch.matmul(a, b))
        times = {"old": [], "new": [], "torch": []}
        for r in range(args.rounds):
            order = ["old", "new", "torch"] if r % 2 == 0 else ["torch", "new", "old"]
            for which in order:
                if which == "torch":
                    times[which].append(bench(lambda: torch.matmul(a, b)))
                else:
                    times[which].append(with_rule(which == "old", lambda: bench(lambda: T.bmm(a, b))))
        old, new, ref = (statistics.median(times[w]) * 1e3 for w in ("old", "new", "torch"))
        changed.append(old / new)
        replaced[case.name] = ref / new
        print(f"{case.name[9:]:46s} {old_tile}->{new_tile}  old {old:8.1f} us  new {new:8.1f} us  torch {ref:8.1f} us"
              f"  new/old {new / old:5.2f}  speedup {ref / old:5.2f} -> {ref / new:5.2f}  fro {fro:.1e}")
        del a, b
    if changed:
        print(f"{len(changed)} changed cases: geomean old/new {math.exp(statistics.mean(map(math.log, changed))):.3f}"
              f", worst {min(changed):.3f}, best {max(changed):.3f}")
    grid = [r for n, r in recorded.items() if n.startswith("grid bmm tf32 ")]
    before = [r["speedup"] for r in grid]
    after = [replaced.get(r["name"], r["speedup"]) for r in grid]
    gm = lambda v: math.exp(statistics.mean(map(math.log, v)))  # noqa: E731
    print(f"tf32 grid geomean (results file, changed cases replaced): {gm(before):.3f} -> {gm(after):.3f}")


if __name__ == "__main__":
    main()
