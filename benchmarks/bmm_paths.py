"""Every CUDA bmm kernel path against cuBLAS on chosen shapes: the measurements the routing rules of
csrc/cuda/bmm/bmm.cu are set from (which path bmm takes, `torch.ops.tiles._bmm_path`, and where the
others would stand, `torch.ops.tiles._bmm_on_path`).

    python benchmarks/bmm_paths.py                          # --preset small-float32
    python benchmarks/bmm_paths.py --preset general         # the general kernel's other dtypes
    python benchmarks/bmm_paths.py --shape 1,64,256,256,TN --dtype float32 --precision high
    python benchmarks/bmm_paths.py --device cpu             # dry run: tiles.bmm against torch, CPU clock

Presets:
- small-float32: float32 under "highest", where small products (at most 2^24 multiply-adds, or up to
  2^26 over fewer than 2^19 outputs that the Hopper kernel reads through TMA; K <= 16 is thin) take the
  general kernel. It holds the eight products of a training step of examples/train.py's MLP and square, batched
  and skinny products on both sides of that limit.
- general: bf16 / fp16 / float64 products that take the general kernel for their layout or shape: no
  unit-stride dim, few output tiles over a long K (the mma kernel's split-K, or the general kernel's
  where the mma kernel's cost model declines to split), matrix-vector products.
- thin: either side of the thin kernels' limits (bmm/thin.cu), bf16 and float32.
- skinny-float32: float32 products with one side of 10 to 100 over K = 512 and 4096, and the long-K
  products with an operand TMA cannot address: the sweeps behind bmm.cu's long_k_tf32_on_hopper_copies
  (run with --precision high) and small_full_precision_float's limits (--precision highest).
- slow-grid-<prec> (bf16, fp16, tf32, fp32, fp64): that precision's grid cases (bmm_grid.py) below
  0.95x in this GPU's results file, up to 2^31 multiply-adds, slowest first, under the precision's
  float32 setting (tf32: "high").

Each case is B,M,N,K with a layout (NN, TN, NT, TT: T is a transposed view), timed two ways: do_bench's
median with the L2 flushed, and back to back (20 calls replayed from one CUDA graph, per call), as
`flushed / b2b` in microseconds, on every path: hopper, the mma kernel at each tile size (mma-64,
mma-128; float64's one DMMA tile under mma-64 only), thin, and the general kernel at each tile width
(general-32, general-64), and bmm's own pick (`bmm`); `--paths` names others (`mma-64 whole-k`: the
mma kernel without its split-K; `hopper-64` ... `hopper-256`: the dtype's Hopper kernel at one tile width
(float32: 64, 128, 192, 256);
`"hopper-256 tma-store"` / `"hopper-256 streaming-store"`: at that width with one store forced, unsplit;
`"hopper-256 whole-tile-store"`: TMA's stores from buffers for the whole tile, bmm's pick at K = 65-192;
`"thin whole-k"` / `"thin split-k"`: the few-columns kernels with K never split / split to fill the SMs,
at most 8 ways where they would sum in thread block clusters).
A closing list names the cases where another path beat bmm's pick by
more than 10% under both timings (the routing rules' misses), largest gain first; `--out FILE` writes
every timing, one JSON object a case. Each path's error is max |out - ref| / max |ref| against float64. A path that
cannot take the operands prints `-`.
"""
import argparse
import functools
import json
import os
import statistics
import sys
import time
from typing import List, NamedTuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import local_build  # noqa: E402,F401  (the in-place build of this checkout, when there is one)
import torch_tiles  # noqa: E402,F401  (registers torch.ops.tiles)

T = torch.ops.tiles
PATHS = ("hopper", "mma-64", "mma-128", "thin", "general-32", "general-64")  # mma and general at each tile size
GRAPH_CALLS = 20
DEFAULT_REP_MS = 40
REP_MS = DEFAULT_REP_MS  # do_bench's repetition time per timing (--rep-ms)


class Case(NamedTuple):
    batch: int  # 0: a 2-D call
    m: int
    n: int
    k: int
    layout: str = "NN"
    dtype: torch.dtype = torch.float32

    def name(self):
        batch = f"{self.batch}x" if self.batch else ""
        return f"{str(self.dtype)[6:]} {self.layout} {batch}{self.m}x{self.n}x{self.k}"

    def operands(self, device):
        def make(rows, cols, transposed):
            shape = (cols, rows) if transposed else (rows, cols)
            t = torch.randn(*(([self.batch] if self.batch else []) + list(shape)), device=device, dtype=self.dtype)
            return t.mT if transposed else t
        return make(self.m, self.k, self.layout[0] == "T"), make(self.k, self.n, self.layout[1] == "T")


def small_float32_cases() -> List[Case]:
    cases = []
    for n_in, n_out in [(64, 256), (256, 256), (256, 10)]:  # the MLP's layers at batch 64
        cases += [Case(0, 64, n_out, n_in), Case(0, 64, n_in, n_out, "NT"), Case(0, n_in, n_out, 64, "TN")]
    for b, m, n, k in [(0, 128, 256, 256), (0, 256, 256, 256), (0, 256, 512, 256), (0, 256, 512, 512),
                       (0, 512, 512, 512), (0, 512, 1024, 512), (0, 1024, 1024, 512), (8, 128, 128, 128),
                       (32, 128, 128, 128), (0, 64, 4096, 1024), (0, 2048, 64, 2048), (8, 1, 3484, 42),
                       (0, 1, 4096, 4096)]:
        cases += [Case(b, m, n, k, "NN"), Case(b, m, n, k, "TN")]
    return cases


def general_cases() -> List[Case]:
    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float64):
        for b, m, n, k in [(1, 92, 4, 1858), (5, 254, 1, 3985), (1, 1, 3000, 2000), (2, 130, 65, 777)]:
            cases.append(Case(b, m, n, k, "NN", dtype))
    return cases


def skinny_float32_cases() -> List[Case]:
    cases = [Case(2, m, n, k) for m in (512, 2048, 8192) for n in (10, 30, 60, 100) for k in (512, 4096)]
    for b, m, n, k, layouts in [(7, 1801, 49, 1097, "NN"), (8, 96, 2174, 1410, "NN TN NT TT"),
                                (1, 3000, 77, 3000, "NN"), (2, 120, 4099, 1000, "NN"), (2, 120, 4099, 1100, "NN"),
                                (1, 10, 50257, 768, "NN"), (1, 50257, 10, 768, "TN"), (2, 2048, 10, 944, "NN")]:
        cases += [Case(b, m, n, k, layout) for layout in layouts.split()]
    return cases


# The grid's precisions (bmm_grid.py): each one's dtype and torch.set_float32_matmul_precision.
GRID_PRECISIONS = {"bf16": (torch.bfloat16, "highest"), "fp16": (torch.float16, "highest"),
                   "tf32": (torch.float32, "high"), "fp32": (torch.float32, "highest"),
                   "fp64": (torch.float64, "highest")}


def slow_grid_cases(prec, below=0.95, max_multiply_adds=2 ** 31, results=None) -> List[Case]:
    """The `prec` grid cases of this machine's results file (or of `results`) below `below`x
    (bmm_grid.py), slowest first, up to `max_multiply_adds` (larger ones would take seconds each on the
    general kernel): where a routing rule has the most to gain. Run them under GRID_PRECISIONS[prec]."""
    import re
    import results_file
    path = results or results_file.path_for(torch.cuda.get_device_name())
    with open(path) as f:
        rows = json.load(f)["cases"]
    pattern = re.compile(rf"grid bmm {prec} (\w\w) B=(\S+) M=(\d+) N=(\d+) K=(\d+)$")
    slow = sorted((r for r in rows if pattern.match(r["name"]) and r.get("speedup") and r["speedup"] < below),
                  key=lambda r: r["speedup"])
    cases = []
    for r in slow:
        layout, batch, m, n, k = pattern.match(r["name"]).groups()
        case = Case(0 if batch == "-" else int(batch), int(m), int(n), int(k), layout, GRID_PRECISIONS[prec][0])
        if max(case.batch, 1) * case.m * case.n * case.k <= max_multiply_adds:
            cases.append(case)
    return cases


def thin_cases() -> List[Case]:
    """Either side of the thin kernels' limits (K <= 16; at most 4 output columns or rows, 8 over K >= 64): a short K
    under a large output, few columns (and few rows) over a large operand, in bf16 and float32, each
    operand layout; then the thin shapes of the random grid (bmm_grid.py)."""
    cases = []
    for dtype in (torch.bfloat16, torch.float32):
        for k in (1, 4, 8, 16, 24):
            cases += [Case(0, 4096, 4096, k, layout, dtype) for layout in ("NN", "TN", "NT")]
        for cols in (1, 2, 4, 8):
            cases += [Case(0, 16384, cols, 4096, layout, dtype) for layout in ("NN", "TN")]
            cases.append(Case(0, cols, 16384, 4096, "NN", dtype))
        for b, m, n, k in [(6, 3807, 1484, 3), (7, 801, 1538, 1), (5, 254, 1, 3985), (2, 633, 10, 944),
                           (4, 145, 5, 229), (8, 1, 3484, 42), (3, 2, 35, 1194), (2, 408, 13, 55)]:
            cases += [Case(b, m, n, k, layout, dtype) for layout in ("NN", "TN", "NT", "TT")]
    return cases


PRESETS = {"small-float32": small_float32_cases, "general": general_cases, "thin": thin_cases,
           "skinny-float32": skinny_float32_cases,
           **{f"slow-grid-{prec}": functools.partial(slow_grid_cases, prec) for prec in GRID_PRECISIONS}}


def graph_us(fn):
    """Microseconds per call of `fn`, GRAPH_CALLS calls replayed back to back from one CUDA graph."""
    from triton.testing import do_bench
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture: workspaces, first-call setup
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            fn()
    return do_bench(graph.replay, warmup=5, rep=REP_MS) * 1e3 / GRAPH_CALLS


def timed(fn, device):
    """(flushed us, back-to-back us) on CUDA; on the CPU a perf_counter median twice."""
    if device == "cpu":
        fn()  # first-call setup
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        us = statistics.median(times) * 1e6
        return us, us
    from triton.testing import do_bench
    return do_bench(fn, warmup=5, rep=REP_MS) * 1e3, graph_us(fn)


def relative_error(out, ref):
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()


def run_case(case, device, paths=PATHS):
    """Times `case` on torch and on each of `paths`, prints one line, and returns the timings:
    {"case", "route" (bmm's pick), "tile" (its tile, "" where it names none), "torch": (flushed, b2b),
    "paths": {path: (flushed, b2b, error)}}."""
    a, b = case.operands(device)
    ref = torch.matmul(a.double(), b.double())
    flushed, b2b = timed(lambda: torch.matmul(a, b), device)
    row = {"case": case.name(), "route": T._bmm_path(a, b), "tile": T._bmm_tile(a, b), "torch": (flushed, b2b),
           "paths": {}}
    route = f"{row['route']} {row['tile']}".strip()
    line = f"{case.name():<30} {route[:50]:<50} torch {flushed:7.1f} / {b2b:7.1f} |"
    paths = paths if device == "cuda" else ("bmm",)
    for path in paths:
        if path.startswith("mma-128") and case.dtype == torch.float64:  # the DMMA kernel has one tile
            continue
        call = (lambda: T.bmm(a, b)) if path == "bmm" else (lambda: T._bmm_on_path(a, b, path))
        try:
            err = relative_error(call(), ref)
        except RuntimeError:  # this path cannot take the operands
            line += f" {path} - |"
            continue
        flushed, b2b = timed(call, device)
        row["paths"][path] = (flushed, b2b, err)
        line += f" {path} {flushed:7.1f} / {b2b:7.1f} e{err:.0e} |"
    print(line, flush=True)
    return row


def misroutes(rows, margin=0.1):
    """The rows where a timed path beat bmm's own pick ("bmm") by more than `margin` both flushed and
    back to back (one timing alone moves by more than that between runs), largest flushed gain first:
    (gain, case, route, faster path, bmm's (flushed, b2b), that path's (flushed, b2b))."""
    found = []
    for row in rows:
        own = row["paths"].get("bmm")
        if own is None:
            continue
        for path, (flushed, b2b, _) in row["paths"].items():
            if path != "bmm" and flushed * (1 + margin) < own[0] and b2b * (1 + margin) < own[1]:
                found.append((own[0] / flushed, row["case"], row["route"], path, own[:2], (flushed, b2b)))
    best = {}
    for item in sorted(found, reverse=True):  # the fastest other path of each case
        best.setdefault(item[1], item)
    return sorted(best.values(), reverse=True)


def print_misroutes(rows, margin=0.1):
    found = misroutes(rows, margin)
    timed_cases = sum("bmm" in row["paths"] for row in rows)
    print(f"\n{len(found)} of {timed_cases} cases have a path more than {margin:.0%} faster than bmm's own "
          f"pick, flushed and back to back:")
    for gain, case, route, path, own, other in found:
        print(f"  {case:<30} {route[:40]:<40} {own[0]:7.1f} / {own[1]:7.1f} -> {path} {other[0]:7.1f} / "
              f"{other[1]:7.1f} ({gain:.2f}x)")


def parse_shape(text):
    parts = text.split(",")
    return Case(*map(int, parts[:4]), *(parts[4:5] or ["NN"]))


def main(argv=None):
    global REP_MS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=PRESETS, default="small-float32")
    parser.add_argument("--shape", action="append", type=parse_shape, help="B,M,N,K[,layout] (B=0: a 2-D call); "
                        "replaces the preset; repeatable")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32", "float64"],
                        help="the dtype of --shape cases (default float32)")
    parser.add_argument("--precision", choices=["highest", "high", "medium"],
                        help="torch.set_float32_matmul_precision for the run (default: the slow-grid "
                             "preset's, else highest)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", help="also write the timings here, one JSON object a case")
    parser.add_argument("--limit", type=int, default=0, help="the first N cases only (0: all)")
    parser.add_argument("--rep-ms", type=float, default=DEFAULT_REP_MS,
                        help="do_bench repetition per timing, ms (default %(default)s; ~10 for a quick survey)")
    parser.add_argument("--paths", type=lambda text: tuple(text.split(",")), default=("bmm",) + PATHS,
                        help="comma-separated paths to time (default: bmm," + ",".join(PATHS) + "); 'bmm' is "
                             "the path bmm picks (with it, a closing list of the cases another path beats), 'mma-64 whole-k' / 'mma-128 whole-k' the mma kernel without split-K")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not (torch.cuda.is_available() and torch_tiles.built_with_cuda()):
        sys.exit("bmm_paths.py needs a GPU and a CUDA build of torch_tiles (or --device cpu for a dry run)")
    cases = args.shape or PRESETS[args.preset]()
    cases = cases[:args.limit] if args.limit else cases
    REP_MS = args.rep_ms
    if args.shape and args.dtype:
        cases = [c._replace(dtype=getattr(torch, args.dtype)) for c in cases]
    preset_prec = args.preset[len("slow-grid-"):] if args.preset.startswith("slow-grid-") and not args.shape else None
    args.precision = args.precision or (GRID_PRECISIONS[preset_prec][1] if preset_prec else "highest")
    torch.set_float32_matmul_precision(args.precision)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"{where} | torch {torch.__version__} | float32 precision {args.precision} | times in us, "
          f"flushed / back to back")
    rows = [run_case(case, args.device, args.paths) for case in cases]
    if args.out:
        with open(args.out, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    print_misroutes(rows)


if __name__ == "__main__":
    main()
