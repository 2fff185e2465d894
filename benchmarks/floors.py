"""How fast can any kernel read a reduction's input, timed the way the benchmark cases are?

    python benchmarks/floors.py

For each reduce case with a target, the input is read by the fastest read-only kernel we know how to
write (a Triton kernel: each program sums one block into a partial, no second pass), over a sweep of
block sizes and warps. Its median time is a floor for any reduction of that input under do_bench's L2
flush: a kernel must at least read every byte once. The table sets it beside tiles and PyTorch, and
prints the largest speedup over PyTorch that the floor leaves possible against the issue's target.
"""
import os
import sys

import torch
import triton
import triton.language as tl

import torch_tiles  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import all_cases  # noqa: E402
from run import bench_ms  # noqa: E402

TARGETS = {  # from the elementwise issue: speedup over PyTorch
    "reduce sum fp32 4096x8192 dim1": 1.2,
    "reduce sum fp32 4096x8192 dim0": 1.2,
    "reduce max fp32 4096x8192 dim1": 1.2,
    "reduce sum fp32 65536x64 dim1": 2.0,
    "reduce sum fp32 2^28 all": 1.0,
}


@triton.jit
def _read_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + tl.program_id(0), tl.sum(v, axis=0))


def read_floor_ms(x):
    """The best median over block sizes and warps of a one-pass read of x's storage."""
    flat = x.reshape(-1) if x.is_contiguous() else x.contiguous().reshape(-1)
    best = float("inf")
    for block in (2048, 4096, 8192, 16384, 32768):
        for warps in (4, 8, 16):
            grid = triton.cdiv(flat.numel(), block)
            partial = torch.empty(grid, device=flat.device, dtype=torch.float32)
            ms = bench_ms(lambda: _read_kernel[(grid,)](flat, partial, flat.numel(), BLOCK=block, num_warps=warps))
            best = min(best, ms)
    return best


def main():
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}")
    print(f"{'case':<34} {'MiB':>5} {'tiles ms':>9} {'torch ms':>9} {'floor ms':>9} {'floor GB/s':>10} "
          f"{'best possible':>13} {'target':>7}")
    for case in all_cases():
        if case.name not in TARGETS:
            continue
        (x,) = case.make()
        tiles_ms, torch_ms = bench_ms(lambda: case.tiles(x)), bench_ms(lambda: case.torch(x))
        floor = read_floor_ms(x)
        mib = x.numel() * x.element_size() / 2**20
        print(f"{case.name:<34} {mib:>5.0f} {tiles_ms:>9.4f} {torch_ms:>9.4f} {floor:>9.4f} "
              f"{x.numel() * x.element_size() / floor / 1e6:>10.0f} {torch_ms / floor:>12.2f}x "
              f"{TARGETS[case.name]:>6.1f}x")
        del x
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
