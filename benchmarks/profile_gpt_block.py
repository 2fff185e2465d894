"""Where the GPT block's training step (benchmarks/gpt_block.py) spends its device time, tiles against
native: a few steps of each variant under torch.profiler, the device time per step of every (op, input
shapes) pair, the kernels under them attributed to the innermost op that launched them, and each
variant's total. The rows of the two variants side by side say which products (or which native ops
around them) the step loses time on.

    python benchmarks/profile_gpt_block.py [--prec bf16|tf32|fp32] [--steps 5] [--rows 30]
    python benchmarks/profile_gpt_block.py --device cpu    # dry run: a tiny block, CPU time
"""
import argparse
import collections
import os
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tiles  # noqa: E402
from gpt_block import PRECISIONS, Setup  # noqa: E402


def op_times(setup, variant, steps, device):
    """{(op name, input shapes): (us per step, calls per step)} of `steps` steps, and the total."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for _ in range(2):
        setup.step(variant)  # warm up outside the profile
    if device == "cuda":
        torch.cuda.synchronize()
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(steps):
            setup.step(variant)
        if device == "cuda":
            torch.cuda.synchronize()
    rows = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.key_averages(group_by_input_shape=True):
        if e.device_type != DeviceType.CPU:
            continue  # the kernels themselves: their time is already their launching op's
        us = e.self_device_time_total if device == "cuda" else e.self_cpu_time_total
        if us > 0:
            key = (e.key, str(e.input_shapes))
            rows[key][0] += us / steps
            rows[key][1] += e.count / steps
    return rows, sum(v[0] for v in rows.values())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prec", default="bf16", choices=list(PRECISIONS))
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=30, help="rows per variant")
    args = parser.parse_args(argv)
    if args.device == "cuda" and (not torch.cuda.is_available() or not torch_tiles.built_with_cuda()):
        sys.exit("profile_gpt_block.py needs a GPU and a CUDA build of torch_tiles (or --device cpu for a dry run)")
    dims = dict(d=768, heads=12, batch=8, seq=1024) if args.device == "cuda" else dict(d=64, heads=4, batch=2, seq=32)
    dtype, precision, _ = PRECISIONS[args.prec]
    torch.set_float32_matmul_precision(precision)
    setup = Setup(args.prec, device=args.device, **dims)
    unit = "device" if args.device == "cuda" else "CPU"
    totals = {}
    for variant in ("tiles", "native"):
        rows, total = op_times(setup, variant, args.steps, args.device)
        totals[variant] = total
        print(f"\n{variant}: {total:.1f} us of {unit} time per step ({args.prec}, {dims})")
        for (name, shapes), (us, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.rows]:
            print(f"{us:9.1f} us {calls:4.1f}x  {name[:60]:<60} {shapes[:110]}")
    print(f"\nSUMMARY {args.prec}: tiles {totals['tiles']:.1f} us, native {totals['native']:.1f} us of {unit} "
          f"time per step ({totals['native'] / max(totals['tiles'], 1e-9):.3f}x)")
    return totals


if __name__ == "__main__":
    main()
