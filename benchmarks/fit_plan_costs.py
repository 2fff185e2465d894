"""Fits the Hopper bmm plans' cost constants to the grid rows of a results file.

    python benchmarks/fit_plan_costs.py                       # the H100 results file
    python benchmarks/fit_plan_costs.py results.json --sms 132

The plans (bmm/hopper.cu, bmm/hopper_tf32.cu) cost a product's tile width and split count by a model
(bmm/split_k.cuh): waves x (k-blocks x c + o), with c the time of one k-block of a tile (64 deep for
bf16 / fp16, 32 for TF32) and o a fixed cost per wave of tiles. For each precision (bf16, fp16, tf32),
tile width and, in TF32, whether neither operand is K-major (layout TN: the kernel transposes b's tiles),
this fits c and o by least squares on relative errors over the rows that ran unsplit on the Hopper kernel
with its TMA stores from half-tile buffers (path exactly "hopper-wgmma" or "hopper-wgmma tf32"; since
0f04f38 the whole-tile store of K = 65-192 on 256-wide tiles is named apart, and rows recorded between
0901904 and it under the bare name ran that store: none of the committed files has such a row) and recorded their tile
(bmm_grid.py's `tile`; rows from before it did are left out, as are TF32 rows from before fd48cbe, when
torch.ops.tiles._bmm_tile began naming the TF32 kernel's tiles), and prints them with
the median and 90th percentile of the fit's relative error. A group whose rows cannot separate c from o
(every row with the same k-blocks per wave) is reported as such.
"""
import argparse
import collections
import json
import math
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = re.compile(r"^grid bmm (bf16|fp16|tf32) (NN|TN|NT|TT) B=(-|\d+) M=(\d+) N=(\d+) K=(\d+)$")
PATHS = {"bf16": "hopper-wgmma", "fp16": "hopper-wgmma", "tf32": "hopper-wgmma tf32"}
K_BLOCK = {"bf16": 64, "fp16": 64, "tf32": 32}


def samples(rows, sms):
    """(precision, width, transposing) -> [(waves x k-blocks, waves, measured us)]."""
    out = collections.defaultdict(list)
    for row in rows:
        m = NAME.match(row["name"])
        if not m or row.get("path") != PATHS[m.group(1)] or "tile" not in row:
            continue
        prec, layout = m.group(1), m.group(2)
        batch = 1 if m.group(3) == "-" else int(m.group(3))
        rows_, cols, k = int(m.group(4)), int(m.group(5)), int(m.group(6))
        if row["tile"].endswith("ping-pong"):
            continue  # the ping-pong consumers' own costs (kPingPongKBlockUs), fitted apart from the widths
        tile_rows, tile_cols = (int(x) for x in row["tile"].split("x"))
        if prec != "tf32" and tile_rows != 128:
            continue  # tall and small 16-bit tiles (192 x 192, 64 x 64): kTallKBlockUs, kSmallKBlockUs
        tiles = batch * math.ceil(rows_ / tile_rows) * math.ceil(cols / tile_cols)
        waves, k_blocks = math.ceil(tiles / sms), math.ceil(k / K_BLOCK[prec])
        # the tile's width: its columns (128 x 96 is 96 wide), but TF32 names swapped tiles rows x
        # columns, so there the side that is not R's 128 rows (128 x 64 and 64 x 128 are 64 wide)
        width = tile_rows + tile_cols - 128 if prec == "tf32" else tile_cols
        transposing = prec == "tf32" and layout == "TN"
        out[(prec, width, transposing)].append((waves * k_blocks, waves, row["tiles_ms"] * 1e3))
    return out


def fit(points):
    """(c, o, median relative error, 90th percentile) of us = x * c + waves * o, by least squares on the
    relative errors (the normal equations of a two-column fit); None where the rows cannot tell c from o."""
    rows = [(x / t, w / t) for x, w, t in points]  # each row scaled by 1 / measured: relative errors
    sxx = sum(u * u for u, _ in rows)
    sxw = sum(u * v for u, v in rows)
    sww = sum(v * v for _, v in rows)
    sx, sw = sum(u for u, _ in rows), sum(v for _, v in rows)
    det = sxx * sww - sxw * sxw
    if det <= 1e-12 * sxx * sww:
        return None
    c, o = (sx * sww - sw * sxw) / det, (sw * sxx - sx * sxw) / det
    err = sorted(abs((x * c + w * o) / t - 1) for x, w, t in points)
    return c, o, statistics.median(err), err[min(len(err) - 1, int(0.9 * len(err)))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?", default=os.path.join(HERE, "results", "nvidia-h100-80gb-hbm3.json"))
    ap.add_argument("--sms", type=int, default=132, help="multiprocessors of the GPU the rows ran on")
    args = ap.parse_args(argv)
    with open(args.results) as f:
        rows = json.load(f)["cases"]
    groups = samples(rows, args.sms)
    if not groups:
        print("no grid rows with a recorded tile: rerun benchmarks/bmm_grid.py")
        return {}
    print(f"{'precision':9s} {'width':>5s} {'variant':11s} {'rows':>4s} {'c (us)':>7s} {'o (us)':>7s} {'median err':>10s} {'p90':>6s}")
    fits = {}
    for key in sorted(groups):
        if len(groups[key]) < 3:
            continue
        prec, width, transposing = key
        result = fit(groups[key])
        if result is None:
            print(f"{prec:9s} {width:5d} {'transposing' if transposing else '':11s} {len(groups[key]):4d}"
                  " every row has the same k-blocks per wave: c and o cannot be told apart")
            continue
        c, o, med, p90 = fits[key] = result
        print(f"{prec:9s} {width:5d} {'transposing' if transposing else '':11s} {len(groups[key]):4d} {c:7.3f} {o:7.2f}"
              f" {100 * med:9.1f}% {100 * p90:5.1f}%")
    return fits


if __name__ == "__main__":
    main()
