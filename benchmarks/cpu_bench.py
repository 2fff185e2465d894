"""Times the tiles CPU kernels against PyTorch's CPU ops in one process, and records the results.

    python benchmarks/cpu_bench.py              # every case
    python benchmarks/cpu_bench.py -k bmm       # cases whose name contains 'bmm'
    python benchmarks/cpu_bench.py --no-write   # print only

Uses the in-place build of this checkout when there is one (torch_tiles/_C*.so beside this folder),
else the installed torch_tiles. Runs at the machine's default thread count (torch.get_num_threads(),
which the tiles kernels share through at::parallel_for).

Each case is timed in --rounds rounds that alternate which library goes first; a round takes the
median of time.perf_counter() over repeated calls (enough to fill --min-ms), after warm-up calls. The
reported times are the medians over rounds and the speedup (torch ms / tiles ms) is the median of the
per-round speedups, with the lowest and highest round beside it: other work on a small machine moves
single timings by tens of percent, and a pair timed back to back shares whatever load there was.
Rows go to benchmarks/results/cpu.json through results_file.merge("cpu", ...), named "cpu <case>".

Each map / zip case also times its write floor in the same rounds: a new tensor of the output's size and
dtype written once (torch.empty(...).fill_(1)), which both libraries pay for every output they return.
On a large output that is mostly the first touch of new pages (page faults), not bandwidth; rows
record floor_ms and pct_of_floor (floor ms / tiles ms, %) and torch_pct_of_floor beside it.
"""
import argparse
import statistics
import time

import local_build  # noqa: F401  (the in-place build of this checkout, when there is one)
import torch  # noqa: E402

import torch_tiles  # noqa: E402,F401  (registers torch.ops.tiles)
import results_file  # noqa: E402

T = torch.ops.tiles


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def _cases():
    """(name, make inputs, tiles fn, torch fn)."""
    M, N, S = 2048, 4096, 2048
    c = []
    c.append(("map exp fp32 2048x4096", lambda: (_rand(M, N),), lambda x: T.map(x, "exp"), torch.exp))
    c.append(("map exp bf16 2048x4096", lambda: (_rand(M, N, dtype=torch.bfloat16),),
              lambda x: T.map(x, "exp"), torch.exp))
    c.append(("map exp fp32 transposed-in 2048x4096", lambda: (_rand(N, M).t(),),
              lambda x: T.map(x, "exp"), torch.exp))
    # Activations: gelu (examples/train.py's), tanh, sin and cos (a libm call per lane before 2026-11-28),
    # at the size of that script's layers (64 x 256, in cache) and the large size.
    for fn, torch_fn in (("gelu", torch.nn.functional.gelu), ("tanh", torch.tanh), ("sin", torch.sin),
                         ("cos", torch.cos)):
        for rows, cols in ((64, 256), (M, N)):
            c.append((f"map {fn} fp32 {rows}x{cols}", lambda r=rows, k=cols: (_rand(r, k),),
                      lambda x, f=fn: T.map(x, f), torch_fn))
    # Their gradients from what autograd saves: gelu's input, tanh's output. Both sides call an
    # operator overload (what autograd calls), each from one lambda (run_case adds PyTorch's).
    c.append(("map gelu gradient fp32 64x256", lambda: (_rand(64, 256), _rand(64, 256)),
              lambda g, x: T._map_backward.default(g, x, "gelu"), torch.ops.aten.gelu_backward.default))
    c.append(("map tanh gradient fp32 64x256", lambda: (_rand(64, 256), torch.tanh(_rand(64, 256))),
              lambda g, y: T._map_backward.default(g, y, "tanh"), torch.ops.aten.tanh_backward.default))
    # The same gradients as a training step reaches them: the forward op and autograd's backward node
    # (ours calls the gradient kernel from C++, with no Python and no string argument to convert).
    for fn, torch_fn in (("gelu", torch.nn.functional.gelu), ("tanh", torch.tanh)):
        c.append((f"map {fn} forward+backward fp32 64x256",
                  lambda: (_rand(64, 256).requires_grad_(), _rand(64, 256)),
                  lambda x, g, f=fn: torch.autograd.grad(T.map(x, f), x, g)[0],
                  lambda x, g, f=torch_fn: torch.autograd.grad(f(x), x, g)[0]))
    c.append(("zip add fp32 2048x4096 + row 4096", lambda: (_rand(M, N), _rand(N)),
              lambda a, b: T.zip(a, b, "add"), torch.add))
    c.append(("zip mul fp32 2048x4096 same layout", lambda: (_rand(M, N), _rand(M, N)),
              lambda a, b: T.zip(a, b, "mul"), torch.mul))
    c.append(("zip add fp32 sq + sq.t() 2048^2", lambda: (lambda s: (s, s.t()))(_rand(S, S)),
              lambda a, b: T.zip(a, b, "add"), torch.add))
    # A scale (a 0-dim tensor, of the tensor's dtype or a wider one) and float16 operands.
    c.append(("zip mul fp32 2048x4096 * 0-dim", lambda: (_rand(M, N), _rand(())),
              lambda a, b: T.zip(a, b, "mul"), torch.mul))
    c.append(("zip mul fp16 2048x4096 same layout",
              lambda: (_rand(M, N, dtype=torch.float16), _rand(M, N, dtype=torch.float16)),
              lambda a, b: T.zip(a, b, "mul"), torch.mul))
    c.append(("zip mul fp16 2048x4096 * fp32 0-dim", lambda: (_rand(M, N, dtype=torch.float16), _rand(())),
              lambda a, b: T.zip(a, b, "mul"), torch.mul))
    c.append(("reduce sum fp32 2048x4096 dim1", lambda: (_rand(M, N),),
              lambda x: T.reduce(x, [1], "sum"), lambda x: torch.sum(x, 1)))
    c.append(("reduce sum fp32 2048x4096 dim0", lambda: (_rand(M, N),),
              lambda x: T.reduce(x, [0], "sum"), lambda x: torch.sum(x, 0)))
    c.append(("reduce max fp32 2048x4096 dim1", lambda: (_rand(M, N),),
              lambda x: T.reduce(x, [1], "max"), lambda x: torch.amax(x, 1)))
    # Short rows (each row's horizontal steps count) and a half type's conversions.
    c.append(("reduce sum fp32 131072x64 dim1", lambda: (_rand(131072, 64),),
              lambda x: T.reduce(x, [1], "sum"), lambda x: torch.sum(x, 1)))
    c.append(("reduce max fp32 131072x64 dim1", lambda: (_rand(131072, 64),),
              lambda x: T.reduce(x, [1], "max"), lambda x: torch.amax(x, 1)))
    c.append(("reduce sum bf16 2048x4096 dim1", lambda: (_rand(M, N, dtype=torch.bfloat16),),
              lambda x: T.reduce(x, [1], "sum"), lambda x: torch.sum(x, 1)))

    def bmm_case(name, batch, m, n, k, dtype, ta=False, tb=False):
        def make():
            a = _rand(batch, k, m, dtype=dtype).transpose(1, 2) if ta else _rand(batch, m, k, dtype=dtype)
            b = _rand(batch, n, k, dtype=dtype).transpose(1, 2) if tb else _rand(batch, k, n, dtype=dtype)
            if batch == 1:
                a, b = a[0], b[0]
            return a, b
        c.append((name, make, T.bmm, torch.matmul))

    bmm_case("bmm fp32 8x256^3", 8, 256, 256, 256, torch.float32)
    bmm_case("bmm fp32 a^T 8x256^3", 8, 256, 256, 256, torch.float32, ta=True)
    bmm_case("bmm fp32 b^T 8x256^3", 8, 256, 256, 256, torch.float32, tb=True)
    bmm_case("bmm fp64 8x256^3", 8, 256, 256, 256, torch.float64)
    bmm_case("bmm fp64 a^T 8x256^3", 8, 256, 256, 256, torch.float64, ta=True)
    bmm_case("bmm fp64 b^T 8x256^3", 8, 256, 256, 256, torch.float64, tb=True)
    bmm_case("bmm bf16 8x256^3", 8, 256, 256, 256, torch.bfloat16)
    bmm_case("bmm bf16 a^T 8x256^3", 8, 256, 256, 256, torch.bfloat16, ta=True)
    bmm_case("bmm bf16 b^T 8x256^3", 8, 256, 256, 256, torch.bfloat16, tb=True)
    bmm_case("bmm bf16 1024^3", 1, 1024, 1024, 1024, torch.bfloat16)
    bmm_case("bmm fp32 1024^3", 1, 1024, 1024, 1024, torch.float32)
    bmm_case("bmm fp32 a^T 1024^3", 1, 1024, 1024, 1024, torch.float32, ta=True)
    bmm_case("bmm fp32 b^T 1024^3", 1, 1024, 1024, 1024, torch.float32, tb=True)
    bmm_case("bmm fp32 a^T b^T 1024^3", 1, 1024, 1024, 1024, torch.float32, ta=True, tb=True)
    bmm_case("bmm fp64 1024^3", 1, 1024, 1024, 1024, torch.float64)
    bmm_case("bmm fp64 a^T 1024^3", 1, 1024, 1024, 1024, torch.float64, ta=True)
    bmm_case("bmm fp64 b^T 1024^3", 1, 1024, 1024, 1024, torch.float64, tb=True)
    return c


def time_ms(fn, args, min_ms):
    """Median ms of fn(*args) over enough calls to fill about min_ms, after two warm-up calls."""
    for _ in range(2):
        fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    once = (time.perf_counter() - t0) * 1e3
    reps = max(5, min(200, int(min_ms / max(once, 1e-3))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def max_rel_error(out, ref):
    out, ref = out.double(), ref.double()
    scale = ref.abs().max().item() if ref.numel() else 1.0
    return (out - ref).abs().max().item() / (scale or 1.0) if ref.numel() else 0.0


def write_floor(out):
    """A new tensor of out's size and dtype, written once: what returning such an output costs at least."""
    shape, dtype = out.shape, out.dtype
    return lambda: torch.empty(shape, dtype=dtype).fill_(1)


def run_case(name, make, tiles_fn, torch_fn, rounds, min_ms):
    # Every tiles call is a Python lambda around the op; torch's is given the same frame (on a 5 us op a
    # lambda and an overload-packet lookup are ~0.6 us: the tanh gradient read 0.88x without it).
    torch_fn = (lambda f: lambda *a: f(*a))(torch_fn)
    args = make()
    out = tiles_fn(*args)
    err = max_rel_error(out, torch_fn(*[a.double() for a in args]))
    floor_fn = write_floor(out) if name.startswith(("map ", "zip ")) else None
    del out
    tiles_ms, torch_ms, floor_ms = [], [], []
    for r in range(rounds):
        pair = [(tiles_ms, tiles_fn), (torch_ms, torch_fn)]
        for times, fn in (pair if r % 2 == 0 else pair[::-1]):
            times.append(time_ms(fn, args, min_ms))
        if floor_fn:
            floor_ms.append(time_ms(floor_fn, (), min_ms))
    speedups = [b / a for a, b in zip(tiles_ms, torch_ms)]
    row = {"name": f"cpu {name}", "tiles_ms": round(statistics.median(tiles_ms), 4),
           "torch_ms": round(statistics.median(torch_ms), 4),
           "speedup": round(statistics.median(speedups), 3),
           "speedup_rounds": [round(min(speedups), 3), round(max(speedups), 3)],
           "threads": torch.get_num_threads(), "max_rel_error": float(f"{err:.3g}")}
    if floor_ms:
        floor = statistics.median(floor_ms)
        row.update(floor_ms=round(floor, 4), pct_of_floor=round(100 * floor / row["tiles_ms"], 1),
                   torch_pct_of_floor=round(100 * floor / row["torch_ms"], 1))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case (default 5)")
    parser.add_argument("--min-ms", type=float, default=300.0, help="time per library per round (default 300)")
    parser.add_argument("--no-write", action="store_true", help="print only, write no results file")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}, tiles from {torch_tiles.__file__}")
    print(f"{'case':<44} {'tiles ms':>9} {'torch ms':>9} {'speedup':>8} {'rounds':>11} {'max rel err':>11} "
          f"{'floor ms':>9} {'% of floor':>10}")
    for name, make, tiles_fn, torch_fn in _cases():
        if args.k not in name:
            continue
        row = run_case(name, make, tiles_fn, torch_fn, args.rounds, args.min_ms)
        lo, hi = row["speedup_rounds"]
        print(f"{row['name']:<44} {row['tiles_ms']:>9.3f} {row['torch_ms']:>9.3f} {row['speedup']:>7.2f}x "
              f"{lo:>5.2f}-{hi:<5.2f} {row['max_rel_error']:>11.2g}"
              + (f" {row['floor_ms']:>9.3f} {row['pct_of_floor']:>5.0f} / {row['torch_pct_of_floor']:<3.0f}"
                 if "floor_ms" in row else ""), flush=True)
        rows.append(row)
    if not args.no_write and rows:
        header = {"threads": torch.get_num_threads(),
                  "cpu_capability": torch.backends.cpu.get_cpu_capability()}
        print("wrote", results_file.merge("cpu", rows, header))


if __name__ == "__main__":
    main()
