"""Where a training step of examples/train.py's default model spends its device time, tiles against
its native twin: the kernels of a few steps under torch.profiler, with launch counts per step, and the
device timeline's idle gaps (which kernels wait longest after the one before them ends).

    python benchmarks/profile_train_step.py [--mode eager|cuda-graphs] [--steps 20] [--rows 25]

The step and the models are train_step.py's ("train mlp <mode>"); see that script for the timings.
"""
import argparse
import collections
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import make_trainer, train_script  # noqa: E402


def kernel_table(events, steps, rows):
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        by_name[e.name][0] += e.time_range.elapsed_us()
        by_name[e.name][1] += 1
    print(f"{len(events) / steps:.0f} kernels per step, {sum(v[0] for v in by_name.values()) / steps:.1f} us of "
          "kernel time per step")
    for name, (us, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:rows]:
        print(f"{us / steps:9.1f} us/step {count / steps:5.1f}x  {name[:110]}")


def gap_table(events, steps, rows):
    """Idle device time before each kernel (from the end of the work before it), summed by kernel name.

    Each step ends with the loss's copy to the host (the step syncs on it), so the gap after such a copy
    is the host between steps (the sync, the next batch) and is left out: what remains is the time the
    device waits inside a step, for the host (eager) or between a graph's nodes.
    """
    events = sorted(events, key=lambda e: e.time_range.start)
    gaps = collections.defaultdict(lambda: [0.0, 0])
    previous_end, after_step = None, True
    for e in events:
        gap = 0 if after_step else e.time_range.start - previous_end
        if gap > 0:
            gaps[e.name][0] += gap
            gaps[e.name][1] += 1
        previous_end = e.time_range.end if after_step else max(previous_end, e.time_range.end)
        after_step = e.name.startswith("Memcpy DtoH")
    print(f"idle inside steps: {sum(v[0] for v in gaps.values()) / steps:.1f} us per step; longest waits before:")
    for name, (us, count) in sorted(gaps.items(), key=lambda kv: -kv[1][0])[:rows]:
        print(f"{us / steps:9.1f} us/step {count / steps:5.1f}x  {name[:110]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["eager", "cuda-graphs"], default="eager")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    data = train_script.load_data(0, "cuda")
    batches = train_script.epoch_batches(len(data.y_train), 64, seed=0, epoch=0, device="cuda")
    for kind in ("tiles", "torch"):
        step = make_trainer(kind, "cuda", args.mode, batches, data)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for idx in batches[: args.steps]:
                step(data.x_train[idx], data.y_train[idx]).item()  # as train_step.py times a step
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if not events:
            sys.exit("the profiler recorded no device activity")
        print(f"\n== {kind}, {args.mode}: ", end="")
        kernel_table(events, args.steps, args.rows)
        gap_table(events, args.steps, args.rows // 2)


if __name__ == "__main__":
    main()
