"""Runs one bmm product on named kernel paths (and cuBLAS) a few times, and nothing else, for a
profiler to attach to: the per-width and per-layout comparisons behind benchmarks/NOTES.md's
"Tile widths and pairs".

    ncu --launch-skip 8 --launch-count 3 --section SpeedOfLight --section WarpStateStats \\
        python benchmarks/profile_bmm_paths.py 2048,768,3072,NT --paths hopper-96,hopper-128 --torch

The operands take two launches (torch.randn), then every path runs twice to warm up and once more for
the profiler: skip 2 + 2 x the calls (a path that splits K adds a launch for the sum). Paths are
`torch.ops.tiles._bmm_on_path`'s names; `--torch` adds torch.bmm.
"""
import argparse

import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)


def operand(batch, rows, cols, transposed, dtype):
    """A batch x rows x cols operand; `transposed` makes it the transpose of a contiguous cols x rows one."""
    if transposed:
        return torch.randn(batch, cols, rows, device="cuda", dtype=dtype).transpose(1, 2)
    return torch.randn(batch, rows, cols, device="cuda", dtype=dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shape", help="M,N,K[,layout]: layout NN, TN, NT or TT (T: that operand is a transposed view)")
    parser.add_argument("--paths", default="bmm", help="comma-separated _bmm_on_path names; 'bmm' is bmm's own pick")
    parser.add_argument("--torch", action="store_true", help="also run torch.bmm, last")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32", "float64"])
    parser.add_argument("--batch", type=int, default=1, help="batch entries of both operands (the short-K "
                        "products: 48 x 2048 x 2048 x 128 is --batch 48 2048,2048,128)")
    args = parser.parse_args()
    parts = args.shape.split(",")
    m, n, k = map(int, parts[:3])
    layout = parts[3] if len(parts) > 3 else "NN"
    dtype = getattr(torch, args.dtype)
    a = operand(args.batch, m, k, layout[0] == "T", dtype)
    b = operand(args.batch, k, n, layout[1] == "T", dtype)
    calls = [(lambda p=p: torch.ops.tiles.bmm(a, b) if p == "bmm" else torch.ops.tiles._bmm_on_path(a, b, p))
             for p in args.paths.split(",")]
    if args.torch:
        calls.append(lambda: torch.bmm(a, b))
    for _ in range(3):  # two warm-up rounds, then the profiled one
        for call in calls:
            call()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
