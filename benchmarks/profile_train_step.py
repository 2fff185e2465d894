"""Where a training step of examples/train.py's default model spends its device time, tiles against
its native twin: the kernels of a few eager steps under torch.profiler, with launch counts per step.

    python benchmarks/profile_train_step.py [--steps 20] [--rows 25]

The step and the models are train_step.py's ("train mlp eager"); see that script for the timings.
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import make_trainer, train_script  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    data = train_script.load_data(0, "cuda")
    batches = train_script.epoch_batches(len(data.y_train), 64, seed=0, epoch=0, device="cuda")
    for kind in ("tiles", "torch"):
        step = make_trainer(kind, "cuda", "eager", batches, data)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for idx in batches[: args.steps]:
                step(data.x_train[idx], data.y_train[idx])
            torch.cuda.synchronize()
        events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        launches = sum(e.count for e in events) / args.steps
        device_us = sum(e.self_device_time_total for e in events) / args.steps
        print(f"\n== {kind}: {launches:.0f} kernels per step, {device_us:.1f} us of kernel time per step")
        for e in sorted(events, key=lambda e: -e.self_device_time_total)[: args.rows]:
            print(f"{e.self_device_time_total / args.steps:9.1f} us/step {e.count / args.steps:5.1f}x  {e.key[:110]}")


if __name__ == "__main__":
    main()
