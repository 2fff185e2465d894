"""Where a small product's time goes, tiles against cuBLAS: the kernels each call launches, their summed
durations, and the call's span on the GPU (from the end of the L2 flush before it to the end of its last
kernel: the kernels plus the gaps the launches leave), from a CUPTI trace (torch.profiler).

The grid's small rows below 0.95x (257 of them under 15 us of cuBLAS time) trail by a roughly fixed
1-3 us (thin few-columns median 2.7, general 2.4, mma-sync 1.0-1.6, hopper 0.9). Whether that is a second
launch (split-K's sum kernel, a fill), the kernel's own prologue and epilogue, or launch latency decides
what to change. do_bench's time is printed beside the trace's for scale (the trace adds a little to each
launch).

    python -P benchmarks/experiments/kernel_spans.py                        # the default rows below
    python -P benchmarks/experiments/kernel_spans.py --shape 4,145,5,229,NN --dtype float16
    python -P benchmarks/experiments/kernel_spans.py --preset slow-grid-fp16 --max-us 15
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bmm_paths  # noqa: E402  (Case, presets, GRID_PRECISIONS; registers torch.ops.tiles)

T = torch.ops.tiles
FLUSH_BYTES = 256 << 20  # as do_bench's cache flush
CALLS = 30

# (B, M, N, K, layout, grid precision): the grid's small rows, one or two of each slow path
DEFAULT_ROWS = [(4, 145, 5, 229, "NN", "fp16"), (2, 422, 7, 122, "NT", "fp16"), (1, 112, 2, 158, "TT", "bf16"),
                (4, 4, 144, 218, "NN", "bf16"), (8, 25, 23, 75, "NT", "bf16"), (2, 408, 13, 55, "NN", "bf16"),
                (1, 474, 138, 202, "NN", "tf32"), (6, 1307, 5, 23, "NN", "tf32"), (8, 47, 1254, 74, "NT", "fp32"),
                (2, 35, 4483, 445, "TN", "fp32"), (4, 145, 5, 229, "NT", "fp64"), (256, 128, 128, 64, "TN", "bf16")]


def trace(fn):
    """Per call (median over CALLS): (kernel count, summed kernel us, span us, kernel names)."""
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(CALLS):
            flush.fill_(i)  # evicts L2; its kernel marks where each call starts
            fn()
        torch.cuda.synchronize()
    kernels = sorted(((e.start_ns(), e.start_ns() + e.duration_ns(), e.name())
                      for e in prof.profiler.kineto_results.events() if e.device_type() == torch.autograd.DeviceType.CUDA
                      and e.duration_ns() > 0), key=lambda k: k[0])
    calls, current = [], None
    for start, end, name in kernels:
        if "FillFunctor" in name and (current is None or current["kernels"]):  # a flush: the next call begins
            current = {"after": end, "kernels": []}
            calls.append(current)
        elif current is not None:
            current["kernels"].append((start, end, name))
    calls = [c for c in calls if c["kernels"]]
    counts = [len(c["kernels"]) for c in calls]
    busy = [sum(e - s for s, e, _ in c["kernels"]) / 1e3 for c in calls]
    span = [(c["kernels"][-1][1] - c["after"]) / 1e3 for c in calls]
    names = [n[:60] for _, _, n in calls[len(calls) // 2]["kernels"]] if calls else []
    return statistics.median(counts), statistics.median(busy), statistics.median(span), names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", type=bmm_paths.parse_shape, help="B,M,N,K[,layout]; repeatable")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32", "float64"], default="float32")
    parser.add_argument("--precision", choices=["highest", "high"], default="highest")
    parser.add_argument("--preset", help="a bmm_paths.py preset (slow-grid-<prec> reads this GPU's results)")
    parser.add_argument("--max-us", type=float, default=0, help="with --preset: only rows whose torch time "
                        "in the results file is under this (0: all); see bmm_grid.py's rows")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("kernel_spans.py needs a GPU and a CUDA build of torch_tiles")
    if args.shape:
        rows = [(c, args.precision) for c in (s._replace(dtype=getattr(torch, args.dtype)) for s in args.shape)]
    elif args.preset:
        prec = args.preset[len("slow-grid-"):]
        precision = bmm_paths.GRID_PRECISIONS.get(prec, (None, args.precision))[1]
        rows = [(c, precision) for c in bmm_paths.PRESETS[args.preset]()]
    else:
        rows = [(bmm_paths.Case(b, m, n, k, layout, bmm_paths.GRID_PRECISIONS[prec][0]),
                 bmm_paths.GRID_PRECISIONS[prec][1]) for b, m, n, k, layout, prec in DEFAULT_ROWS]
    from triton.testing import do_bench
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | per call, median of {CALLS}: "
          f"kernels, their summed us, the span us (flush end to last kernel end); do_bench us")
    for case, precision in rows:
        torch.set_float32_matmul_precision(precision)
        a, b = case.operands("cuda")
        if args.max_us and args.preset:
            if do_bench(lambda: torch.matmul(a, b), warmup=5, rep=20) * 1e3 >= args.max_us:
                continue
        label = f"{case.name()} {'tf32' if precision == 'high' and case.dtype == torch.float32 else ''}".strip()
        print(f"{label}  [{T._bmm_path(a, b)} {T._bmm_tile(a, b)}]".rstrip())
        for side, fn in (("torch", lambda: torch.matmul(a, b)), ("tiles", lambda: T.bmm(a, b))):
            count, busy, span, names = trace(fn)
            bench = do_bench(fn, warmup=5, rep=40) * 1e3
            print(f"  {side}: {count:g} kernel(s) {busy:6.2f} us, span {span:6.2f} us, do_bench {bench:6.2f} us | "
                  + " ; ".join(names))


if __name__ == "__main__":
    main()
