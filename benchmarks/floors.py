"""How fast can any kernel move a memory-bound case's bytes, timed the way the benchmark cases are?

    python benchmarks/floors.py [part of a case name]

For each reduce case with a target, the input is read by the fastest read-only kernel we know how to
write (a Triton kernel: each program sums one block into a partial, no second pass), over a sweep of
block sizes and warps. Its median time is a floor for any reduction of that input under do_bench's L2
flush: a kernel must at least read every byte once. For the bmm cases that move many bytes per flop
(one k-block per output tile, and 32 x 512^3: eight k-blocks per tile, 48 MiB in ~26 us), a Triton
kernel reads once a tensor with the operands' byte count and writes every byte of an output-sized
tensor: the DRAM traffic a bmm cannot avoid (each operand byte read at least once, each output byte
written once), without the arithmetic. The table sets the floor beside tiles and PyTorch, and prints
the largest speedup over PyTorch that it leaves possible against the issue's target.
"""
import math
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

import torch_tiles  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import all_cases  # noqa: E402
from run import bench_ms  # noqa: E402

TARGETS = {  # from the elementwise and bmm issues: speedup over PyTorch
    "reduce sum fp32 4096x8192 dim1": 1.2,
    "reduce sum fp32 4096x8192 dim0": 1.2,
    "reduce max fp32 4096x8192 dim1": 1.2,
    "reduce sum fp32 65536x64 dim1": 2.0,
    "reduce sum fp32 2^28 all": 1.0,
    "bmm bf16 B=32 512x512x512": 1.0,
    "bmm bf16 B=256 128x128x64": 1.2,
    "bmm bf16 B=96 2048x2048 K=64": 1.0,
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


@triton.jit
def _stream_kernel(dst_ptr, n_dst, src_ptr, n_src, partial_ptr, BLOCK: tl.constexpr):
    # dst gets src's elements (then zeros, if dst is the larger), and each program the sum of what it
    # read (so that reads past dst's end are not dropped): each byte of both is moved once
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src_ptr + offs, mask=offs < n_src, other=0.0)
    tl.store(dst_ptr + offs, v, mask=offs < n_dst)
    tl.store(partial_ptr + tl.program_id(0), tl.sum(v.to(tl.float32), axis=0))


def stream_floor_ms(a, b):
    """The best median over block sizes and warps of writing a bmm output's bytes while reading its
    operands' bytes (a fresh tensor of that size)."""
    out_elems = a.shape[0] * a.shape[1] * b.shape[2]
    src = torch.randn(a.numel() + b.numel(), device=a.device, dtype=a.dtype)
    dst = torch.empty(out_elems, device=a.device, dtype=a.dtype)
    elems = max(out_elems, src.numel())
    best = float("inf")
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8):
            grid = triton.cdiv(elems, block)
            partial = torch.empty(grid, device=a.device, dtype=torch.float32)
            ms = bench_ms(lambda: _stream_kernel[(grid,)](dst, out_elems, src, src.numel(), partial, BLOCK=block,
                                                          num_warps=warps))
            best = min(best, ms)
    return best


def move_floor_ms(read_bytes, write_bytes, min_sets=16, l2_multiple=4, reps=5):
    """The floor of a memory-bound case that reads read_bytes and writes write_bytes, both ways run.py
    times cases: (flushed ms, back-to-back ms). The stream kernel reads a float32 buffer of read_bytes
    and writes one of write_bytes; the configuration (block, warps) fastest under do_bench is then run
    back to back over enough distinct buffer pairs that together they are l2_multiple x L2, replayed
    from a CUDA graph: a floor of the GPU's time, without Triton's host-side launch cost."""
    n_src, n_dst = max(read_bytes // 4, 1), max(write_bytes // 4, 1)

    def buffers():
        return torch.randn(n_src, device="cuda"), torch.empty(n_dst, device="cuda")

    def launch(src, dst, partial, block, warps):
        _stream_kernel[(partial.numel(),)](dst, n_dst, src, n_src, partial, BLOCK=block, num_warps=warps)

    src, dst = buffers()
    best_ms, best = float("inf"), None
    # Down to 512-element programs and 1-2 warps: on an H200 our own map and zip kernels ran at 102-107%
    # of the floor that the sweep's old smallest program (1024 elements, 4 warps) set, the map with
    # 128-thread blocks of 512 float32 elements (NOTES.md, "The contiguous kernel's block"), and a floor
    # must not be beaten.
    for block in (512, 1024, 2048, 4096, 8192):
        for warps in (1, 2, 4, 8):
            if block < 128 * warps:  # at least one 16-byte vector a thread
                continue
            partial = torch.empty(triton.cdiv(max(n_src, n_dst), block), device="cuda")
            ms = bench_ms(lambda: launch(src, dst, partial, block, warps))
            if ms < best_ms:
                best_ms, best = ms, (block, warps)
    block, warps = best
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    count = min(max(min_sets, math.ceil(l2_multiple * l2 / (4 * (n_src + n_dst)))), 8192)
    sets = [(src, dst)] + [buffers() for _ in range(count - 1)]
    partial = torch.empty(triton.cdiv(max(n_src, n_dst), block), device="cuda")
    for s, d in sets[:2]:
        launch(s, d, partial, block, warps)  # compiled and warm before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for s, d in sets:
            launch(s, d, partial, block, warps)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / len(sets))
    return best_ms, statistics.median(times)


def main():
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}")
    print(f"{'case':<34} {'MiB':>5} {'tiles ms':>9} {'torch ms':>9} {'floor ms':>9} {'floor GB/s':>10} "
          f"{'best possible':>13} {'target':>7}")
    for case in all_cases():
        if case.name not in TARGETS or (len(sys.argv) > 1 and sys.argv[1] not in case.name):
            continue
        inputs = case.make()
        tiles_ms, torch_ms = bench_ms(lambda: case.tiles(*inputs)), bench_ms(lambda: case.torch(*inputs))
        if len(inputs) == 1:
            floor, moved = read_floor_ms(inputs[0]), inputs[0].numel() * inputs[0].element_size()
        else:
            a, b = inputs
            floor = stream_floor_ms(a, b)
            moved = (a.numel() + b.numel() + a.shape[0] * a.shape[1] * b.shape[2]) * a.element_size()
        print(f"{case.name:<34} {moved / 2**20:>5.0f} {tiles_ms:>9.4f} {torch_ms:>9.4f} {floor:>9.4f} "
              f"{moved / floor / 1e6:>10.0f} {torch_ms / floor:>12.2f}x {TARGETS[case.name]:>6.1f}x")
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
