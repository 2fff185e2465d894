"""Looks for shapes where tiles.bmm falls behind torch.matmul: a grid of (batch, M, N, K) and layouts,
each timed against PyTorch in the same process, printed slowest first.

    python benchmarks/sweep_shapes.py                 # bf16, the whole grid
    python benchmarks/sweep_shapes.py --dtype float16 --below 0.95

The benchmark cases (run.py) are the shapes the issues name; this is for the shapes they do not, where a
path or tile-width choice can leave a cliff (short K at 128-wide tiles read 0.81x at 2 x 8192^2 K=128
until the eleventh session). Each batch is sized so the product is about 2^33 multiply-adds (between 1
and 512 matrices, so the largest shapes do more), which keeps every shape between a few microseconds
and a millisecond. Times are do_bench medians with the L2 flushed, in two rounds alternating which op
goes first (run.py's time_pair; with two rounds its "median" is their mean).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tiles  # noqa: E402,F401  (registers torch.ops.tiles)
from run import time_pair  # noqa: E402

T = torch.ops.tiles
SQUARE = [512, 1024, 2048, 4096, 8192]
OBLONG = [(4096, 1024), (1024, 4096), (8192, 256), (256, 8192), (1000, 3000), (3000, 1000)]
KS = [64, 128, 256, 1024, 4096]


def shapes():
    """(batch, m, n, k, a_t, b_t): every square and oblong output with every K, row-major operands;
    then a^T and b^T for the square outputs at K = 128 and 1024."""
    for m, n in [(s, s) for s in SQUARE] + OBLONG:
        for k in KS:
            yield max(1, min(512, round(2**33 / (m * n * k)))), m, n, k, False, False
    for s in SQUARE:
        for k in (128, 1024):
            batch = max(1, min(512, round(2**33 / (s * s * k))))
            yield batch, s, s, k, True, False
            yield batch, s, s, k, False, True


def operand(batch, rows, cols, transposed, dtype):
    if transposed:
        return torch.randn(batch, cols, rows, device="cuda", dtype=dtype).transpose(1, 2)
    return torch.randn(batch, rows, cols, device="cuda", dtype=dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--below", type=float, default=1.0, help="list only speedups below this")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | {args.dtype}")
    rows = []
    for batch, m, n, k, a_t, b_t in shapes():
        a, b = operand(batch, m, k, a_t, dtype), operand(batch, k, n, b_t, dtype)
        tiles_ms, torch_ms, (low, high) = time_pair(lambda: T.bmm(a, b), lambda: torch.matmul(a, b), 2)
        layout = "a^T " if a_t else "b^T " if b_t else ""
        rows.append((torch_ms / tiles_ms, f"{layout}{batch}x{m}x{n} K={k}", tiles_ms, torch_ms, low, high,
                     T._bmm_path(a, b)))
        del a, b
    rows.sort()
    print(f"{'shape':<28} {'tiles ms':>9} {'torch ms':>9} {'speedup':>8} {'rounds':>11}  path")
    for speedup, name, tiles_ms, torch_ms, low, high, path in rows:
        if speedup < args.below:
            print(f"{name:<28} {tiles_ms:>9.4f} {torch_ms:>9.4f} {speedup:>7.2f}x {low:>5.2f}-{high:<5.2f}  {path}")
    slow = sum(r[0] < 0.95 for r in rows)
    print(f"{len(rows)} shapes: median speedup {rows[len(rows) // 2][0]:.2f}x, slowest {rows[0][0]:.2f}x, "
          f"{slow} below 0.95x")


if __name__ == "__main__":
    main()
