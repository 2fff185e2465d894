"""Times the row-reduction kernels' block shapes (threads x vectors in flight per thread, for many long
rows, few long rows and short rows), and which rows under 32 KiB take lanes, against torch and the read
floor, flushed (do_bench) and back to back over rotating inputs, and prints the choice whose worst ratio
to torch is best: the measurement for LongRowBlock, SplitRowBlock(16), ShortRowBlock and
kLanesMinRowsPerSm (cuda/reduce/kernels.cuh; NOTES.md "Row reductions: block shapes").

Needs a CUDA GPU, nvcc, ninja and the installed torch_tiles (for floors.py); compiles
row_reduce_block.cu (~2 min) with torch's extension loader:
    python benchmarks/probes/row_reduce_block.py [whole|split|short|lanes]
WAIT_FOR=<file> compiles, then waits for that file before timing (to run beside another build)."""
import os
import sys

import torch
from triton.testing import do_bench

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # also under `python -P`
sys.path.insert(1, os.path.dirname(HERE))  # benchmarks/, for floors.py
from probe_timing import back_to_back_ms, input_sets, load_probe, summarize  # noqa: E402

# kind -> (threads, vectors per thread): the instances row_reduce_block.cu compiles; the first is today's
# (cuda/reduce/kernels.cuh LongRowBlock, ShortRowBlock). "split" sets float's and 16-bit's split blocks
# alike; its (0, 0) is the product's pair (SplitRowBlock for float, SplitRowBlock16 for 16-bit).
LONG_SHAPES = [(128, 16), (256, 4), (256, 8), (256, 16), (512, 4), (512, 8), (1024, 4)]
SHAPES = {"whole": [(128, 8), (1024, 2)] + LONG_SHAPES,
          "split": [(0, 0), (1024, 2), (128, 8)] + LONG_SHAPES,
          "short": [(256, 4), (128, 4), (256, 2), (256, 8), (512, 4)],
          # (rows a SM under which rows longer than one pass of a warp's lanes take a block, 0): 0 is
          # every row under 32 KiB on lanes, as before kLanesMinRowsPerSm (16)
          "lanes": [(16, 0), (0, 0), (4, 0), (64, 0)]}
# (fn, dtype, rows, cols): rows of 32 KiB and up take a block each, LongRowBlock's where there are 16 or
# more per SM; where fewer, they split into segments of ~4096 vectors on SplitRowBlock (16-bit:
# SplitRowBlock16), which also takes rows of one segment fewer than the SMs (64 x 8192; 1024 x 8192 is
# one segment a row on LongRowBlock whatever the split kind's shape); shorter rows take a group of lanes
# each where there are kLanesMinRowsPerSm a SM or a row is one pass of a warp's lanes, else a block as
# long rows do (launch_rows)
CASES = {"whole": [("sum", torch.float32, 4096, 8192), ("max", torch.float32, 4096, 8192),
                   ("sum", torch.bfloat16, 4096, 16384)],
         "split": [("sum", torch.float32, 1, 1 << 28), ("sum", torch.float32, 512, 65536),
                   ("sum", torch.bfloat16, 8, 1 << 25), ("sum", torch.bfloat16, 1, 1 << 29),
                   ("sum", torch.bfloat16, 512, 1 << 17), ("sum", torch.float32, 1024, 8192),
                   ("sum", torch.float32, 64, 8192)],
         "short": [("sum", torch.float32, 65536, 64), ("sum", torch.float32, 16384, 2048),
                   ("max", torch.float32, 131072, 256)],
         # rows under 32 KiB but longer than a warp's pass, from far fewer than the SMs to 31 a SM
         "lanes": [("sum", torch.float32, 37, 600), ("sum", torch.bfloat16, 64, 2048),
                   ("sum", torch.bfloat16, 64, 8192), ("sum", torch.bfloat16, 256, 8192),
                   ("sum", torch.bfloat16, 1024, 8192), ("sum", torch.bfloat16, 2048, 8192),
                   ("sum", torch.bfloat16, 4096, 8192), ("sum", torch.bfloat16, 1024, 4096),
                   ("sum", torch.float32, 64, 4096), ("max", torch.float32, 1024, 2048),
                   ("sum", torch.float32, 2048, 4096)]}


def torch_reduce(fn):
    return (lambda x, out: torch.sum(x, 1, out=out)) if fn == "sum" else (lambda x, out: torch.amax(x, 1, out=out))


def time_case(mod, kind, fn, dtype, rows, cols, ratios):
    from floors import move_floor_ms  # imports torch_tiles: the installed build
    x_bytes = torch.finfo(dtype).bits // 8 * rows * cols
    sets = input_sets(lambda: (torch.randn(rows, cols, device="cuda", dtype=dtype),
                               torch.empty(rows, device="cuda", dtype=dtype)), x_bytes)
    ref = torch_reduce(fn)(sets[0][0].double(), torch.empty(rows, device="cuda", dtype=torch.float64))
    # A sum's rounding grows with the magnitudes summed, not with the result: a long row of randn sums
    # to about sqrt(cols) and may land near zero, which once failed a float32 2^28 row at 7e-3 (3e-11 of
    # the sum of |x|).
    scale = (sets[0][0].double().abs().sum(1) if fn == "sum" else ref.abs()).max().item()

    def torch_op(s):
        torch_reduce(fn)(s[0], s[1])
    torch_flushed = [do_bench(lambda: torch_op(sets[0]), rep=200, return_mode="median")]
    torch_b2b = [back_to_back_ms(torch_op, sets)]
    out_rows = []
    for threads, unroll in SHAPES[kind]:
        def ours(s, threads=threads, unroll=unroll):
            mod.run(s[1], s[0], fn, kind, threads, unroll)
        sets[0][1].fill_(float("nan"))  # torch's timing wrote it: a shape that skips rows must fail
        ours(sets[0])
        err = (sets[0][1].double() - ref).abs().max().item()
        tol = (1e-5 if dtype == torch.float32 else 2e-2) * max(1.0, scale)
        assert err <= tol, (fn, dtype, rows, cols, threads, unroll, err)
        out_rows.append((threads, unroll, do_bench(lambda: ours(sets[0]), rep=200, return_mode="median"),
                         back_to_back_ms(ours, sets)))
    torch_flushed.append(do_bench(lambda: torch_op(sets[0]), rep=200, return_mode="median"))
    torch_b2b.append(back_to_back_ms(torch_op, sets))
    tf, tb = min(torch_flushed), min(torch_b2b)
    floor_flushed, floor_b2b = move_floor_ms(x_bytes, rows * torch.finfo(dtype).bits // 8)
    print(f"{fn} {str(dtype)[6:]} {rows}x{cols} dim1: torch flushed {tf * 1e3:.1f} us, back to back "
          f"{tb * 1e3:.1f} us; floor {floor_flushed * 1e3:.1f} / {floor_b2b * 1e3:.1f} us ({len(sets)} input sets)")
    for threads, unroll, flushed, b2b in out_rows:
        label = (f"min {threads:2d} rows a SM" if kind == "lanes" else "product's  " if threads == 0
                 else f"{threads:5d} x {unroll:2d}")
        print(f"  {kind} {label}: flushed {flushed * 1e3:7.1f} us {tf / flushed:5.3f}x "
              f"{100 * floor_flushed / flushed:5.1f}% of floor   b2b {b2b * 1e3:7.1f} us {tb / b2b:5.3f}x "
              f"{100 * floor_b2b / b2b:5.1f}%")
        ratios.setdefault((kind, threads, unroll), []).extend([tf / flushed, tb / b2b])


def main():
    kinds = sys.argv[1:] or ["whole", "split", "short", "lanes"]
    mod = load_probe("tiles_row_reduce_block", "row_reduce_block.cu")
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}")
    for kind in kinds:
        ratios = {}
        for fn, dtype, rows, cols in CASES[kind]:
            time_case(mod, kind, fn, dtype, rows, cols, ratios)
            torch.cuda.empty_cache()
        summarize(ratios)  # keys: (kind, threads, vectors per thread)


if __name__ == "__main__":
    main()
