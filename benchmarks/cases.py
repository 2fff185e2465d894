"""Benchmark cases: each times a tiles op against the PyTorch op that computes the same thing, each
called as a script calls it: torch_tiles.map / zip / reduce / bmm (a direct call of the op in eager
mode, torch_tiles/ops.py) against torch's function.

A case knows how to build its inputs (fresh random data, on the GPU), the two callables to time, the
bytes it must move at least (each input read once, the output written once) or the flops it must do,
and a float64 reference for the error column.
"""
from dataclasses import dataclass
from typing import Callable, Optional

import torch

import torch_tiles


@dataclass
class Case:
    name: str
    make: Callable[[], tuple]            # -> inputs
    tiles: Callable                      # inputs -> output
    torch: Callable                      # inputs -> output (the op PyTorch users would call)
    bytes: Optional[Callable] = None     # inputs -> minimal bytes moved (memory-bound cases)
    flops: Optional[Callable] = None     # inputs -> flops (compute-bound cases)
    quick: bool = True                   # part of --quick
    precision: str = "highest"           # torch.set_float32_matmul_precision while timing (float32 bmm)
    error: str = "max"                   # "max": max |out - ref| / max |ref|; "fro": ||out - ref|| / ||ref||

    def rate_unit(self):
        return "GB/s" if self.bytes else "TFLOP/s"


def _nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _map_case(name, make, fn, torch_fn, quick=True):
    return Case(name, make, lambda x: torch_tiles.map(x, fn), torch_fn,
                bytes=lambda x: 2 * x.numel() * x.element_size(), quick=quick)


def _zip_case(name, make, fn, torch_fn, quick=True):
    def moved(a, b):
        out_numel = torch.broadcast_shapes(a.shape, b.shape).numel()
        return _nbytes(a, b) + out_numel * torch.result_type(a, b).itemsize
    return Case(name, make, lambda a, b: torch_tiles.zip(a, b, fn), torch_fn, bytes=moved, quick=quick)


def _reduce_case(name, make, dim, fn, torch_fn, quick=True):
    def moved(x):
        out_numel = x.numel() // (x.shape[dim] if dim is not None else x.numel())
        return _nbytes(x) + out_numel * x.element_size()
    return Case(name, make, lambda x: torch_tiles.reduce(x, dim, fn), torch_fn,
                bytes=moved, quick=quick)


def _bmm_case(name, batch, m, n, k, dtype=torch.bfloat16, a_t=False, b_t=False, precision="highest",
              quick=True):
    """a [batch, m, k] @ b [batch, k, n]; a_t / b_t: that operand is the transpose of a contiguous tensor
    (column-major), as a.transpose(1, 2) or b.mT in user code."""
    def make():
        a = _rand(batch, k, m, dtype=dtype).transpose(1, 2) if a_t else _rand(batch, m, k, dtype=dtype)
        b = _rand(batch, n, k, dtype=dtype).transpose(1, 2) if b_t else _rand(batch, k, n, dtype=dtype)
        return a, b

    def flops(a, b):
        return 2 * a.shape[0] * a.shape[-2] * a.shape[-1] * b.shape[-1]
    return Case(name, make, torch_tiles.bmm, torch.matmul, flops=flops, quick=quick, precision=precision, error="fro")


R, C = 4096, 8192


def all_cases():
    sq = 8192
    return [
        # ---- map
        _map_case(f"map exp fp32 {R}x{C}", lambda: (_rand(R, C),), "exp", torch.exp),
        _map_case(f"map exp bf16 {R}x{C}", lambda: (_rand(R, C, dtype=torch.bfloat16),), "exp", torch.exp),
        _map_case(f"map exp fp16 {R}x{C}", lambda: (_rand(R, C, dtype=torch.float16),), "exp", torch.exp, quick=False),
        _map_case(f"map exp fp32 transposed-in {R}x{C}", lambda: (_rand(C, R).t(),), "exp", torch.exp),
        _map_case(f"map gelu bf16 {R}x{C}", lambda: (_rand(R, C, dtype=torch.bfloat16),), "gelu",
                  torch.nn.functional.gelu, quick=False),
        _map_case("map exp fp32 small 64x64", lambda: (_rand(64, 64),), "exp", torch.exp, quick=False),
        # ---- zip
        _zip_case(f"zip add fp32 {R}x{C} + row {C}", lambda: (_rand(R, C), _rand(C)), "add", torch.add),
        _zip_case(f"zip add fp32 {R}x{C} + col {R}x1", lambda: (_rand(R, C), _rand(R, 1)), "add", torch.add,
                  quick=False),
        _zip_case(f"zip mul fp32 {R}x{C} same layout", lambda: (_rand(R, C), _rand(R, C)), "mul", torch.mul),
        _zip_case(f"zip mul bf16 {R}x{C} same layout",
                  lambda: (_rand(R, C, dtype=torch.bfloat16), _rand(R, C, dtype=torch.bfloat16)), "mul", torch.mul,
                  quick=False),
        _zip_case(f"zip add fp32 sq + sq.t() {sq}^2", lambda: (lambda s: (s, s.t()))(_rand(sq, sq)), "add", torch.add),
        _zip_case("zip add fp32 3-D 64x512x512 + 64x1x512", lambda: (_rand(64, 512, 512), _rand(64, 1, 512)), "add",
                  torch.add, quick=False),
        # ---- reduce
        _reduce_case(f"reduce sum fp32 {R}x{C} dim1", lambda: (_rand(R, C),), 1, "sum", lambda x: x.sum(1)),
        _reduce_case(f"reduce sum fp32 {R}x{C} dim0", lambda: (_rand(R, C),), 0, "sum", lambda x: x.sum(0)),
        _reduce_case(f"reduce max fp32 {R}x{C} dim1", lambda: (_rand(R, C),), 1, "max", lambda x: x.amax(1)),
        _reduce_case("reduce sum fp32 65536x64 dim1", lambda: (_rand(65536, 64),), 1, "sum", lambda x: x.sum(1)),
        _reduce_case("reduce sum fp32 2^28 all", lambda: (_rand(1 << 28),), None, "sum", lambda x: x.sum()),
        _reduce_case(f"reduce sum bf16 {R}x{C} dim1", lambda: (_rand(R, C, dtype=torch.bfloat16),), 1, "sum",
                     lambda x: x.sum(1), quick=False),
        # ---- bmm: the cases (names fixed), then more shapes, layouts and dtypes
        _bmm_case("bmm bf16 B=1 4096x4096x4096", 1, 4096, 4096, 4096),
        _bmm_case("bmm bf16 B=8 2048x2048x2048", 8, 2048, 2048, 2048),
        _bmm_case("bmm bf16 a^T B=8 2048x2048x2048", 8, 2048, 2048, 2048, a_t=True),
        _bmm_case("bmm bf16 B=32 512x512x512", 32, 512, 512, 512),
        _bmm_case("bmm bf16 B=256 128x128x64", 256, 128, 128, 64),
        _bmm_case("bmm bf16 B=96 2048x2048 K=64", 96, 2048, 2048, 64),
        _bmm_case("bmm fp16 B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float16),
        _bmm_case("bmm fp32 B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float32),
        _bmm_case("bmm fp32-tf32 B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float32, precision="high"),
        _bmm_case("bmm fp64 B=32 512x512x512", 32, 512, 512, 512, torch.float64),
        _bmm_case("bmm bf16 b^T B=8 2048x2048x2048", 8, 2048, 2048, 2048, b_t=True, quick=False),
        _bmm_case("bmm bf16 a^T b^T B=8 2048x2048x2048", 8, 2048, 2048, 2048, a_t=True, b_t=True, quick=False),
        _bmm_case("bmm fp16 B=8 2048x2048x2048", 8, 2048, 2048, 2048, torch.float16, quick=False),
        _bmm_case("bmm bf16 B=1 8192x8192x8192", 1, 8192, 8192, 8192, quick=False),
        _bmm_case("bmm bf16 B=1 1000x17x513 (odd: general kernel)", 1, 1000, 513, 17, quick=False),
        _bmm_case("bmm bf16 B=4 1000x1000x1000", 4, 1000, 1000, 1000, quick=False),
        _bmm_case("bmm bf16 B=8 4096x4096 K=128", 8, 4096, 4096, 128, quick=False),  # short K, 8 KiB output rows
        _bmm_case("bmm fp32 B=32 512x512x512", 32, 512, 512, 512, torch.float32, quick=False),
        # the Hopper float32 kernel's other operand roles (row-major b swaps them; b^T and a^T do not)
        _bmm_case("bmm fp32-tf32 b^T B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float32, b_t=True,
                  precision="high", quick=False),
        _bmm_case("bmm fp32-tf32 a^T b^T B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float32, a_t=True,
                  b_t=True, precision="high", quick=False),
        _bmm_case("bmm fp32 b^T B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float32, b_t=True, quick=False),
        _bmm_case("bmm fp32-tf32 B=8 2048x2048x2048", 8, 2048, 2048, 2048, torch.float32, precision="high",
                  quick=False),
        # fp64: each operand order of the DMMA kernel, and a large square
        _bmm_case("bmm fp64 a^T B=32 512x512x512", 32, 512, 512, 512, torch.float64, a_t=True, quick=False),
        _bmm_case("bmm fp64 b^T B=32 512x512x512", 32, 512, 512, 512, torch.float64, b_t=True, quick=False),
        _bmm_case("bmm fp64 a^T b^T B=32 512x512x512", 32, 512, 512, 512, torch.float64, a_t=True, b_t=True,
                  quick=False),
        _bmm_case("bmm fp64 B=1 4096x4096x4096", 1, 4096, 4096, 4096, torch.float64, quick=False),
    ]


def reference(case, inputs):
    """The torch op on float64 copies of the inputs (same layouts don't matter for values)."""
    return case.torch(*[t.double() for t in inputs])
