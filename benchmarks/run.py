"""Times tiles ops against PyTorch's in one run, on the GPU, and records the results.

    python benchmarks/run.py            # every case, with a progress bar
    python benchmarks/run.py --quick    # the cases the issues set targets for
    python benchmarks/run.py -k reduce  # cases whose name contains 'reduce'

Run it as a script (not from the source tree with -m), so `import torch_tiles` finds the installed build.

Every case is timed two ways, each in --rounds alternating rounds (tiles first, then torch first, ...)
whose median is reported: clocks drift by a few percent within a run, which a single pair would charge
to one side.
  flushed       `speedup`: CUDA-event medians from triton.testing.do_bench, which flushes L2 with a
                memset before each call (so each call also pays for writing back the flush's lines, and
                the host has time to queue ahead).
  back to back  `speedup_b2b`: calls issued one after another, as a training loop issues them, over at
                least 16 distinct input sets that together are at least 4x the L2 (no call finds its
                inputs cached), CUDA events around the whole loop: shows both the kernel's bandwidth and
                any host cost per call that the GPU cannot hide.
Each map / zip / reduce case also times its floor both ways: the fastest of a few configurations of a
Triton kernel that only reads the case's input bytes (each storage once) and writes its output bytes,
and records pct_of_floor / pct_of_floor_b2b (floor ms / tiles ms). Rates are against ceilings measured
in the same run: a 1 GiB device-to-device copy (bytes read + written) and a bf16 8192^3 matmul. Writes
benchmarks/results/<gpu>.json and a PNG of the speedups beside it.
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch

import torch_tiles  # registers torch.ops.tiles

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # cases, results_file: also under `python -P`, which leaves the script's folder off
from cases import all_cases, reference  # noqa: E402
import results_file  # noqa: E402

T = torch.ops.tiles


def bench_ms(fn):
    """Median milliseconds of fn() over CUDA events, with the L2 flushed before each run."""
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def input_sets(make, first, min_sets=16, l2_multiple=4, max_sets=8192):
    """`first` and more fresh make() results: at least min_sets, together at least l2_multiple x L2."""
    per_set = sum(storage_bytes(first).values()) or 1
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    count = min(max(min_sets, math.ceil(l2_multiple * l2 / per_set)), max_sets)
    return [first] + [make() for _ in range(count - 1)]


def storage_bytes(tensors):
    """The bytes of each storage the tensors read, by storage pointer ({ptr: bytes}): a storage two
    inputs share (s and s.t()) counts once."""
    return {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}


def b2b_ms(fn, sets, min_calls=200, reps=5):
    """Milliseconds per call of fn(*inputs) issued back to back over the input sets in turn (enough laps
    for min_calls calls), CUDA events around the whole loop; the median of reps loops."""
    laps = max(1, math.ceil(min_calls / len(sets)))
    for inputs in sets[:2]:
        fn(*inputs)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(laps):
            for inputs in sets:
                fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / (laps * len(sets)))
    return statistics.median(times)


def time_pair(tiles_fn, torch_fn, rounds, bench=None):
    """Median time of tiles_fn and of torch_fn over `rounds` rounds that alternate which goes first, and
    the lowest and highest per-round speedup (torch / tiles). `bench(fn)` times one (default bench_ms)."""
    bench = bench or bench_ms
    tiles_ms, torch_ms = [], []
    for r in range(rounds):
        pair = [(tiles_ms, tiles_fn), (torch_ms, torch_fn)]
        for times, fn in (pair if r % 2 == 0 else pair[::-1]):
            times.append(bench(fn))
    speedups = [b / a for a, b in zip(tiles_ms, torch_ms)]
    return statistics.median(tiles_ms), statistics.median(torch_ms), (min(speedups), max(speedups))


def measure_ceilings():
    src = torch.empty(1 << 28, device="cuda", dtype=torch.float32)  # 1 GiB
    src.normal_()
    dst = torch.empty_like(src)
    copy_ms = bench_ms(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6
    del src, dst
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    mm_ms = bench_ms(lambda: a @ b)
    return {"copy_gbs": round(copy_gbs, 1), "bf16_mm_tflops": round(2 * n**3 / mm_ms / 1e9, 1)}


def max_rel_error(out, ref):
    out, ref = out.double(), ref.double()
    scale = ref.abs().max().item() if ref.numel() else 1.0
    return ((out - ref).abs().max().item() / (scale or 1.0)) if ref.numel() else 0.0


def fro_rel_error(out, ref):
    out, ref = out.double(), ref.double()
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def run_case(case, ceilings, rounds=3):
    inputs = case.make()
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(case.precision)  # both libraries time under the case's precision
    try:
        out = case.tiles(*inputs)
        out_bytes = out.numel() * out.element_size()
        ref = reference(case, inputs)
        err = (fro_rel_error if case.error == "fro" else max_rel_error)(out, ref)
        del out, ref
        tiles_ms, torch_ms, spread = time_pair(lambda: case.tiles(*inputs), lambda: case.torch(*inputs), rounds)
        sets = input_sets(case.make, inputs)
        tiles_b2b, torch_b2b, spread_b2b = time_pair(lambda: b2b_ms(case.tiles, sets),
                                                     lambda: b2b_ms(case.torch, sets), rounds, bench=lambda f: f())
        del sets
        path = T._bmm_path(*inputs) if case.tiles is torch_tiles.bmm else None  # float32's path depends on the precision
    finally:
        torch.set_float32_matmul_precision(previous)
    floor = {}
    if case.bytes:  # memory-bound: its rate against the copy ceiling, and its floor both ways
        from floors import move_floor_ms  # floors.py imports this module's timers
        rate, ceiling = case.bytes(*inputs) / tiles_ms / 1e6, ceilings["copy_gbs"]
        read_bytes = sum(storage_bytes(inputs).values())
        del inputs  # room for the floor's own rotating buffers
        floor_ms, floor_b2b = move_floor_ms(read_bytes, out_bytes)
        floor = {"floor_ms": round(floor_ms, 5), "floor_ms_b2b": round(floor_b2b, 5),
                 "pct_of_floor": round(100 * floor_ms / tiles_ms, 1),
                 "pct_of_floor_b2b": round(100 * floor_b2b / tiles_b2b, 1)}
    else:
        rate, ceiling = case.flops(*inputs) / tiles_ms / 1e9, ceilings["bf16_mm_tflops"]
    return {"name": case.name, "tiles_ms": round(tiles_ms, 5), "torch_ms": round(torch_ms, 5),
            "speedup": round(torch_ms / tiles_ms, 3), "speedup_rounds": [round(x, 3) for x in spread],
            "tiles_ms_b2b": round(tiles_b2b, 5), "torch_ms_b2b": round(torch_b2b, 5),
            "speedup_b2b": round(torch_b2b / tiles_b2b, 3), "speedup_b2b_rounds": [round(x, 3) for x in spread_b2b],
            **floor, "rate": round(rate, 1), "unit": case.rate_unit(),
            "pct_of_ceiling": round(100 * rate / ceiling, 1), "max_err": float(f"{err:.3g}"),
            "error": case.error, **({"path": path} if path else {})}


def size_sweep():
    """Copy and read-only (sum) bandwidth against size, timed like the cases: shows how much of the
    1 GiB ceiling a kernel of a case's size can reach under do_bench's L2 flush."""
    print(f"{'MiB':>6} {'copy GB/s':>10} {'torch.sum GB/s':>15}")
    for mib in (16, 64, 128, 256, 1024):
        src = torch.randn(mib << 18, device="cuda")
        dst = torch.empty_like(src)
        copy = 2 * src.numel() * 4 / bench_ms(lambda: dst.copy_(src)) / 1e6
        read = src.numel() * 4 / bench_ms(lambda: src.sum()) / 1e6
        print(f"{mib:>6} {copy:>10.0f} {read:>15.0f}")
        del src, dst


def save(results, out_dir):
    """Merges the cases into the device's results file (other scripts' cases stay) and plots them all."""
    header = {k: v for k, v in results.items() if k not in ("cases", "device")}
    path = results_file.merge(results["device"], results["cases"], header, out_dir)
    with open(path) as f:
        results = json.load(f)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        cases = [c for c in results["cases"]  # the grid has its own summary; a failed case has no speedup
                 if not c["name"].startswith("grid ") and "speedup" in c]
        fig, ax = plt.subplots(figsize=(8, 0.32 * len(cases) + 1.2))
        ax.barh([c["name"] for c in cases], [c["speedup"] for c in cases],
                color=["tab:green" if c["speedup"] >= 1 else "tab:red" for c in cases])
        ax.axvline(1.0, color="black", lw=0.8)
        ax.invert_yaxis()
        ax.set_xlabel("speedup (torch ms / tiles ms)")
        ax.set_title(f"torch_tiles vs torch {results['torch']} on {results['device']}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        fig.savefig(path[:-5] + ".png", dpi=110)
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
    return path


def print_table(results):
    print(f"\n{results['device']} | torch {results['torch']} | commit {results['commit']} | "
          f"copy {results['ceilings']['copy_gbs']} GB/s | bf16 mm {results['ceilings']['bf16_mm_tflops']} TFLOP/s")
    print(f"{'case':<48} {'tiles ms':>9} {'torch ms':>9} {'speedup':>8} {'rounds':>11} {'b2b':>6} {'%floor':>6} "
          f"{'b2b':>5} {'rate':>9} {'unit':>7} {'%ceil':>6} {'max err':>9}")
    for c in results["cases"]:
        lo, hi = c.get("speedup_rounds", (c["speedup"], c["speedup"]))
        b2b = f"{c['speedup_b2b']:>5.2f}x" if "speedup_b2b" in c else f"{'':>6}"
        floor = (f"{c['pct_of_floor']:>6.1f} {c['pct_of_floor_b2b']:>5.1f}" if "pct_of_floor" in c
                 else f"{'':>6} {'':>5}")
        print(f"{c['name']:<48} {c['tiles_ms']:>9.4f} {c['torch_ms']:>9.4f} {c['speedup']:>7.2f}x {lo:>5.2f}-{hi:<5.2f} "
              f"{b2b} {floor} {c['rate']:>9.1f} {c['unit']:>7} {c['pct_of_ceiling']:>6.1f} {c['max_err']:>9.2g}"
              + (f"  [{c['path']}]" if "path" in c else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only the cases with targets")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="results folder")
    parser.add_argument("--sizes", action="store_true", help="print copy/read bandwidth against size and exit")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds per case (median reported)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or not torch_tiles.built_with_cuda():
        sys.exit("benchmarks need a GPU and a CUDA build of torch_tiles")
    if args.sizes:
        size_sweep()
        return

    cases = [c for c in all_cases() if (c.quick or not args.quick) and args.k in c.name]
    ceilings = measure_ceilings()
    rows = []
    try:
        from tqdm import tqdm
        progress = tqdm(cases, desc="benchmarks", disable=args.quick, file=sys.stderr)
    except ImportError:
        progress = cases
    for case in progress:
        rows.append(run_case(case, ceilings, args.rounds))
        torch.cuda.empty_cache()
    results = {**results_file.run_info(torch.cuda.get_device_name()), "rounds": args.rounds,
               "ceilings": ceilings, "cases": rows}
    path = save(results, args.out)
    print_table(results)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
