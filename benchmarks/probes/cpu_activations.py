"""The CPU map kernels' arithmetic alone: ns an element of tiles.map against torch's function on one
thread over a float32 input that stays in cache, with no new pages to fault in. cpu_bench.py's rows
time what a script sees (two threads, a new 32 MiB output whose page faults are most of the
2048x4096 rows, a ~5 us call at 64x256); this is the one to A/B a change to the vector math with
(NOTES.md, "The loops' lambdas and gelu").

    MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 \\
        python benchmarks/probes/cpu_activations.py [fn ... | fn_grad ...]

The glibc settings keep a freed output for the next call (without them each 4 MiB output is a fresh
mapping); the input is 256 x 4096. To compare two builds, copy each build's torch_tiles/_C*.so in
place in turn and run this in a new process each time, alternating.
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import local_build  # noqa: E402,F401  (the in-place build of this checkout, when there is one)
import torch_tiles  # noqa: E402,F401

TORCH_FNS = {"gelu": torch.nn.functional.gelu, "exp": torch.exp, "tanh": torch.tanh, "erf": torch.erf,
             "sigmoid": torch.sigmoid, "sin": torch.sin, "cos": torch.cos, "log": torch.log, "silu":
             torch.nn.functional.silu}
# Gradients from what autograd saves (the input, or tanh's output), against ATen's backward ops.
TORCH_GRADS = {"gelu": torch.ops.aten.gelu_backward.default, "tanh": torch.ops.aten.tanh_backward.default,
               "silu": torch.ops.aten.silu_backward.default}


def ns_per_element(fn, x, calls=30, rounds=9):
    for _ in range(5):
        fn()
    per_round = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_round.append((time.perf_counter() - start) / calls)
    return statistics.median(per_round) / x.numel() * 1e9


def main():
    torch.set_num_threads(1)
    names = sys.argv[1:] or ["gelu", "exp", "tanh", "erf", "sigmoid"]
    x = torch.randn(256, 4096)
    g = torch.randn_like(x)
    for name in names:
        if name.endswith("_grad"):  # e.g. gelu_grad
            fn, ref = name[:-len("_grad")], TORCH_GRADS[name[:-len("_grad")]]
            saved = torch.tanh(x) if fn == "tanh" else x
            tiles_ns = ns_per_element(lambda: torch.ops.tiles._map_backward(g, saved, fn), x)
            torch_ns = ns_per_element(lambda: ref(g, saved), x)
        else:
            ref = TORCH_FNS[name]
            arg = x.abs() + 0.1 if name == "log" else x
            tiles_ns = ns_per_element(lambda: torch.ops.tiles.map(arg, name), arg)
            torch_ns = ns_per_element(lambda: ref(arg), arg)
        print(f"{name:9s} tiles {tiles_ns:.3f} ns/element  torch {torch_ns:.3f}  {torch_ns / tiles_ns:.3f}x")


if __name__ == "__main__":
    main()
