"""Runs one benchmark case's tiles op a few times and nothing else, for a profiler to attach to:

    ncu --clock-control none -k regex:hopper_tf32 -c 1 --section SpeedOfLight \\
        python benchmarks/profile_case.py "bmm fp32-tf32 B=1 4096x4096x4096"

The case runs under its own float32 matmul precision, as in benchmarks/run.py. `--torch` runs the
PyTorch op of the case instead (to see which cuBLAS kernel it launches, and what that kernel does).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tiles  # noqa: E402,F401  (registers torch.ops.tiles)
from cases import all_cases  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="the case's exact name (benchmarks/cases.py)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torch", action="store_true", help="run the PyTorch op instead of the tiles op")
    args = parser.parse_args()
    cases = {c.name: c for c in all_cases()}
    if args.name not in cases:
        sys.exit(f"no case named {args.name!r}; cases:\n  " + "\n  ".join(cases))
    case = cases[args.name]
    torch.set_float32_matmul_precision(case.precision)
    inputs = case.make()
    op = case.torch if args.torch else case.tiles
    for _ in range(args.repeat):
        op(*inputs)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
