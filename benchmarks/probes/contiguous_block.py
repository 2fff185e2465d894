"""Times the contiguous elementwise kernel's block shapes (threads x vectors in flight per thread)
against torch, flushed (do_bench) and back to back over rotating inputs, and prints the shape whose worst
ratio to torch is best: the measurement behind ContiguousBlock
(cuda/elementwise/kernels.cuh; benchmarks/NOTES.md, "The contiguous kernel's block").

Needs a CUDA GPU, nvcc and ninja; compiles contiguous_block.cu (~1-2 min) with torch's extension loader:
    python benchmarks/probes/contiguous_block.py
WAIT_FOR=<file> compiles, then waits for that file before timing (to run beside another build)."""
import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also under `python -P`
from probe_timing import back_to_back_ms, input_sets, load_probe, summarize  # noqa: E402

# (threads, vectors per thread): the instances contiguous_block.cu compiles
SHAPES = [(128, 1), (128, 2), (128, 4), (256, 1), (256, 2), (256, 4), (512, 1), (512, 2), (1024, 1)]
CASES = [("exp", torch.float32, (4096, 8192)), ("exp", torch.bfloat16, (4096, 8192)),
         ("mul", torch.float32, (4096, 8192)), ("exp", torch.float32, (1024, 1024)),
         ("exp", torch.float32, (16384, 8192))]


def time_case(mod, op, dtype, shape, ratios):
    arity = 1 if op == "exp" else 2
    nbytes = torch.finfo(dtype).bits // 8 * shape[0] * shape[1]
    sets = input_sets(lambda: ([torch.randn(shape, device="cuda", dtype=dtype) for _ in range(arity)],
                               torch.empty(shape, device="cuda", dtype=dtype)), nbytes * (arity + 1))
    nsets = len(sets)
    if op == "exp":
        def torch_op(s):
            return torch.exp(s[0][0], out=s[1])
        ref = torch.exp(sets[0][0][0].double())
    else:
        def torch_op(s):
            return torch.mul(s[0][0], s[0][1], out=s[1])
        ref = sets[0][0][0].double() * sets[0][0][1].double()
    # torch before and after the shapes; the faster of the two
    torch_flushed = [do_bench(lambda: torch_op(sets[0]), rep=200, return_mode="median")]
    torch_b2b = [back_to_back_ms(torch_op, sets)]
    rows = []
    for threads, unroll in SHAPES:
        def ours(s, threads=threads, unroll=unroll):
            mod.run(s[1], s[0], op, threads, unroll)
        sets[0][1].fill_(float("nan"))  # torch's timing wrote it: a shape that skips elements must fail
        ours(sets[0])
        err = (sets[0][1].double() - ref).abs().max().item()
        tol = (1e-6 if dtype == torch.float32 else 1e-2) * max(1.0, ref.abs().max().item())
        assert err <= tol, (op, dtype, threads, unroll, err)
        rows.append((threads, unroll, do_bench(lambda: ours(sets[0]), rep=200, return_mode="median"),
                     back_to_back_ms(ours, sets)))
    torch_flushed.append(do_bench(lambda: torch_op(sets[0]), rep=200, return_mode="median"))
    torch_b2b.append(back_to_back_ms(torch_op, sets))
    tf, tb = min(torch_flushed), min(torch_b2b)
    print(f"{op} {str(dtype)[6:]} {shape[0]}x{shape[1]}: torch flushed {tf * 1e3:.1f} us, "
          f"back to back {tb * 1e3:.1f} us ({nsets} input sets)")
    for threads, unroll, flushed, b2b in rows:
        print(f"  {threads:5d} x {unroll}: flushed {flushed * 1e3:7.1f} us {tf / flushed:5.3f}x   "
              f"b2b {b2b * 1e3:7.1f} us {tb / b2b:5.3f}x")
        ratios.setdefault((threads, unroll), []).extend([tf / flushed, tb / b2b])


def main():
    mod = load_probe("tiles_contiguous_block", "contiguous_block.cu")
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}")
    ratios = {}
    for op, dtype, shape in CASES:
        time_case(mod, op, dtype, shape, ratios)
        torch.cuda.empty_cache()
    summarize(ratios)  # keys: (threads, vectors per thread)


if __name__ == "__main__":
    main()
