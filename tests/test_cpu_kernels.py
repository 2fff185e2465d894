"""The CPU kernels' vector and blocked paths (csrc/cpu/simd_body.h, bmm_body.h): sizes around the vector
widths and block sizes, unaligned starts, every operand layout, the column / row / strided reduce shapes,
results independent of the thread count, and every instruction set the machine has (TILES_CPU_ISA,
in a subprocess, since the set is picked once per process)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from helpers import (FLOAT_DTYPES, HALF_DTYPES, MAP_DOMAIN, MAP_FNS, MAP_REF, TOL, ZIP_DOMAIN, ZIP_EXACT,
                     ZIP_FNS, ZIP_REF, assert_bmm_close, assert_close_to_ref, assert_gelu_special_values,
                     assert_reduce_close, assert_sin_cos_ulps, dtype_id, rand_values)

T = torch.ops.tiles
TESTS = os.path.dirname(os.path.abspath(__file__))

dtypes = pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)


def _vals(shape, dtype, domain="real"):
    return rand_values(shape, domain).to(dtype)


# ---- map / zip: unaligned starts and tails -------------------------------------------------------------

MAP_EXACT = {"id", "neg", "abs", "relu", "square"}


@dtypes
@pytest.mark.parametrize("n", [1, 3, 15, 16, 17, 31, 33, 63, 65, 1000])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_map_unaligned_and_tails(dtype, n, offset):
    for fn in ("exp", "sigmoid", "silu", "abs", "relu", "inv", "tanh"):
        buf = _vals((n + offset,), dtype, MAP_DOMAIN[fn])
        x = buf[offset:]
        out = T.map(x, fn)
        assert_close_to_ref(out, MAP_REF[fn](x.double()), dtype, exact=fn in MAP_EXACT and dtype != torch.float16,
                            msg=lambda m: f"{fn}: {m}")


@dtypes
@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_strided_gather(dtype, fn):
    # a column of a matrix (step 37) and a transposed block: runs gathered into blocks
    base = _vals((700, 37), dtype, MAP_DOMAIN[fn])
    for x in (base[:, 5], base.t()[3:, 1:]):
        assert_close_to_ref(T.map(x, fn), MAP_REF[fn](x.double()), dtype)


def test_map_exp_special_values():
    for dtype in FLOAT_DTYPES:
        vals = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 88.7, 88.73, -87.3, -103.5, -120.0, 1e-30,
                709.0, 709.9, -745.0, -800.0, 50.0, -50.0]
        x = torch.tensor(vals * 3, dtype=torch.float64).to(dtype)
        out = T.map(x, "exp")
        ref = torch.exp(x.double()).to(dtype)
        torch.testing.assert_close(out.double(), ref.double(), rtol=TOL[dtype].rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_map_sqrt_is_correctly_rounded(dtype):
    # the vector instruction on the x86 sets, libm per lane elsewhere: both round the exact root once
    x = torch.cat([torch.rand(5000, dtype=torch.float64) * 10.0 ** torch.randint(-30, 30, (5000,)),
                   torch.tensor([0.0, -0.0, float("inf"), 2.0, 1e-40], dtype=torch.float64)]).to(dtype)
    # (numpy's sqrt is IEEE's; PyTorch's CPU sqrt is not correctly rounded in float32 or float64)
    assert torch.equal(T.map(x, "sqrt"), torch.from_numpy(np.sqrt(x.numpy())))
    assert torch.isnan(T.map(torch.tensor([-1.0, float("nan")], dtype=dtype), "sqrt")).all()


def test_map_log_relative_error():
    # float lanes: normal and subnormal x across the whole range and around 1 (where log x ~ x - 1), within
    # a few float32 ulps of float64's log; zeros, negatives, infinities and NaN as torch
    wide = 10.0 ** torch.empty(20000, dtype=torch.float64).uniform_(-45, 38.5)
    near_one = 1 + torch.arange(-3000, 3001, dtype=torch.float64) * 2.0 ** -23
    x = torch.cat([wide, near_one, torch.tensor([2.0 ** -149, 1e-40, 1.4142135, 1.4142137, 0.70710677, 3e38])]).float()
    x = x[x > 0]
    out = T.map(x, "log")
    torch.testing.assert_close(out.double(), torch.from_numpy(np.log(x.double().numpy())), rtol=1e-6, atol=0)
    special = torch.tensor([0.0, -0.0, -1.0, -1e-40, float("inf"), -float("inf"), float("nan"), 1.0])
    for dtype in FLOAT_DTYPES:
        torch.testing.assert_close(T.map(special.to(dtype), "log"), torch.log(special.to(dtype)), rtol=0, atol=0,
                                   equal_nan=True)


def test_map_sin_cos_ulps():
    # float lanes: |x| <= 125 by the vector reduction, past it, NaN and ±inf libm's per lane, in the same
    # vectors (assert_sin_cos_ulps; every set: test_every_instruction_set); sin keeps -0.
    assert_sin_cos_ulps(T.map, 5e-13)
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e6, -3e38])
    for dtype in FLOAT_DTYPES:
        for fn, ref in (("sin", torch.sin), ("cos", torch.cos)):
            out = T.map(special.to(dtype), fn)
            torch.testing.assert_close(out, ref(special.to(dtype)), rtol=TOL[dtype].rtol, atol=0, equal_nan=True)
            assert torch.equal(out.signbit()[:2], ref(special[:2].to(dtype)).signbit()), (fn, dtype)


def test_map_tanh_relative_error_across_its_branches():
    # float lanes: the Taylor series below |x| = 0.55 (tiny and subnormal values too) and 1 - 2 / (e^2|x| + 1)
    # above, within a few float32 ulps of the float64 tanh; signed zeros, infinities and NaN as torch.
    x = torch.cat([torch.linspace(-12, 12, 20001), torch.tensor([0.55, -0.55, 0.5499999, 1e-30, -1e-30, 1e-40, 3e-3])])
    out = T.map(x, "tanh")
    torch.testing.assert_close(out.double(), torch.tanh(x.double()), rtol=1e-6, atol=0)
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 20.0, -90.0])
    for dtype in FLOAT_DTYPES:
        got, ref = T.map(special.to(dtype), "tanh"), torch.tanh(special.to(dtype))
        torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(got.signbit()[~ref.isnan()], ref.signbit()[~ref.isnan()])  # (a NaN's sign means nothing)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ["id", "neg", "abs"])
def test_map_half_sign_bit_fns_match_torch_bit_for_bit(dtype, fn):
    # id / neg / abs of a half type copy, flip or clear the sign bit, as torch's kernels do: every one of
    # the 65536 bit patterns (NaNs with their payloads, ±0, ±inf, subnormals), contiguous and transposed
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    ref = {"id": x.clone(), "neg": torch.neg(x), "abs": torch.abs(x)}[fn].view(torch.int16)
    for arg, want in ((x, ref), (x.view(256, 256).t(), ref.view(256, 256).t())):
        got = T.map(arg, fn)
        assert torch.equal(got.contiguous().view(torch.int16), want.contiguous()), (fn, tuple(arg.stride()))


def test_map_gelu_error_and_special_values():
    # float lanes (simd_body.h vgelu): within 1e-6 relative of the float64 gelu wherever |gelu| > 1e-3
    # (5e-7 measured; 1.4e-6 before vgelu), within 1e-9 absolute below that (the far negative tail, where
    # erfc's error is absolute, and near 0), including the seams at |x| = 4 sqrt(2) and where x^2 leaves
    # exp's range (|x| = 13.2)
    seams = torch.tensor([4 * 2 ** 0.5, 13.2, 13.3])
    x = torch.cat([torch.linspace(-14, 14, 280001), seams, -seams])
    ref = torch.nn.functional.gelu(x.double())
    out = T.map(x, "gelu").double()
    big = ref.abs() > 1e-3
    torch.testing.assert_close(out[big], ref[big], rtol=1e-6, atol=0)
    torch.testing.assert_close(out[~big], ref[~big], rtol=0, atol=1e-9)
    assert_gelu_special_values(T.map)


@dtypes
@pytest.mark.parametrize("fn", ZIP_FNS)
def test_zip_tails_offsets_and_broadcasts(dtype, fn):
    da, db = ZIP_DOMAIN[fn]
    a_buf = _vals((5 * 67 + 2,), dtype, da)
    a = a_buf[1:1 + 5 * 67].view(5, 67)              # offset start, 67 columns
    b_row = _vals((67,), dtype, db)                   # row broadcast
    b_col = _vals((5, 1), dtype, db)                  # column broadcast (stride 0 innermost)
    b_t = _vals((67, 5), dtype, db).t()               # transposed
    for b in (b_row, b_col, b_t):
        out = T.zip(a, b, fn)
        assert_close_to_ref(out, ZIP_REF[fn](a.double(), b.double()), dtype, exact=fn in ZIP_EXACT)


@dtypes
@pytest.mark.parametrize("fn", ["add", "sub", "div", "max"])
def test_zip_transposed_operand_in_tiles(dtype, fn):
    # An operand stored transposed to the output is read in tiles along its columns. On two threads
    # 101 x 999 (and 99 x 994) splits mid-row, so tasks start and end in partial rows; neither dim is a
    # tile multiple.
    da, db = ZIP_DOMAIN[fn]
    a, a_t = _vals((101, 999), dtype, da), _vals((999, 101), dtype, da).t()
    b, b_t = _vals((101, 999), dtype, db), _vals((999, 101), dtype, db).t()
    col = _vals((101, 1), dtype, db)  # one value per row, repeated along it: unit stride down a column
    before = torch.get_num_threads()
    torch.set_num_threads(max(2, before))
    try:
        for x, y in ((a, b_t), (a_t, b), (a, col), (a_t[2:, 5:], b[2:, 5:])):
            out = T.zip(x, y, fn)
            assert_close_to_ref(out, ZIP_REF[fn](x.double(), y.double()), dtype, exact=fn in ZIP_EXACT)
        # map's gradient shares the loop: the output takes the saved input's (transposed) layout, so
        # there the incoming gradient is the operand stored transposed to it
        x = a_t.detach().requires_grad_()
        g = _vals((101, 999), dtype)
        T.map(x, "square").backward(g)
        assert_close_to_ref(x.grad, 2 * x.detach().double() * g.double(), dtype)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("fn", ["add", "mul", "max", "lt"])
def test_zip_mixed_dtypes(fn):
    a = _vals((3, 70), torch.bfloat16, "grid")
    b = _vals((70,), torch.float64, "grid")
    out = T.zip(a, b, fn)
    assert out.dtype == torch.float64
    assert_close_to_ref(out, ZIP_REF[fn](a.double(), b.double()), torch.float64)


# ---- reduce: rows, columns, strided; each dim of permuted 3-D tensors ----------------------------------

@dtypes
@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 0, 1), (1, 2, 0), (2, 1, 0)])
@pytest.mark.parametrize("fn", ["sum", "max", "prod", "mean", "min"])
def test_reduce_each_dim_of_permuted_3d(dtype, perm, fn):
    shape = (7, 45, 300)
    stored = _vals([shape[p] for p in perm], dtype, "very_near_one" if fn == "prod" else "real")
    x = stored.permute([perm.index(d) for d in range(3)])
    assert x.shape == shape
    for dims in ([0], [1], [2], [0, 2], [1, 2], [0, 1]):
        assert_reduce_close(T.reduce(x, dims, fn), x, dims, fn)


@dtypes
@pytest.mark.parametrize("shape", [(9000, 3), (300, 700), (5000, 257), (3, 513)], ids=str)
def test_reduce_columns_over_chunks(dtype, shape):
    # dim 0 of a row-major matrix: outputs side by side (blocks of columns, a last partial block),
    # reductions longer than one chunk (4096) and shorter
    x = _vals(shape, dtype)
    for fn in ("sum", "max", "mean"):
        assert_reduce_close(T.reduce(x, [0], fn), x, [0], fn)
    y = _vals((shape[0], shape[1] + 3), dtype)[:, 2:2 + shape[1]]  # offset start, padded rows
    assert_reduce_close(T.reduce(y, [0], "sum"), y, [0], "sum")


@pytest.mark.parametrize("shape,dim", [((4, 1 << 20), [1]), ((1 << 13, 300), [0]), ((300, 1 << 13), [1]),
                                       ((1 << 21,), None), ((64, 100, 70), [0, 2])], ids=str)
@pytest.mark.parametrize("fn", ["sum", "logsumexp"])
def test_reduce_bits_do_not_depend_on_threads(shape, dim, fn):
    # (one output over 2^21 elements: one thread walks its chunks in order, two split them)
    x = _vals(shape, torch.float32)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = T.reduce(x, dim, fn)
        torch.set_num_threads(max(2, before))
        many = T.reduce(x, dim, fn)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, many)
    assert_reduce_close(many, x, dim, fn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=dtype_id)
@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min"])
def test_reduce_rows_in_pairs_match_rows_alone(dtype, fn):
    # Rows of 2048 to 4096 elements reduce two at a time in step on the AVX2 build (simd_body.h
    # reduce_rows_typed; on an AVX-512 machine test_every_instruction_set's avx2 run checks its pairs):
    # each row's bits must be those of the row reduced alone, with tails after the vector blocks, an odd
    # row count (the last row alone), rows of a strided view, and NaNs in either row of a pair; shorter
    # rows (one at a time) are held to the same.
    for n in (5, 37, 300, 2048, 3001, 4096):
        x = _vals((7, n), dtype)
        x[3, n // 2] = float("nan")
        x[4, n - 1] = float("nan")
        for rows in (x, x[::2], _vals((5, n + 3), dtype)[:, 3:]):
            together = T.reduce(rows, [1], fn)
            alone = torch.stack([T.reduce(row, [0], fn) for row in rows])
            assert torch.equal(together.isnan(), alone.isnan()), (n, fn)
            assert torch.equal(together.nan_to_num(), alone.nan_to_num()), (n, fn)
            assert_reduce_close(together, rows, [1], fn)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
def test_reduce_half_rows_and_columns_accumulate_wide(dtype):
    x = torch.ones(4608, 40, dtype=dtype)  # more than one chunk; 4608 is exact in both types
    assert T.reduce(x, [0], "sum").tolist() == [4608.0] * 40
    assert T.reduce(x.t().contiguous(), [1], "sum").tolist() == [4608.0] * 40


@dtypes
def test_reduce_rows_and_columns_exact_on_small_integers(dtype):
    # Sums of small integers are exact in any order, so every element must be counted exactly once
    # whichever lane, vector block or column band takes it: rows of lengths around the vector blocks (the
    # 8- and 32-vector float blocks, bf16's two vectors a load), columns around the vector widths and a
    # task's band of outputs (256), in rows and columns of several lengths.
    gen = torch.Generator().manual_seed(0)
    for n in (7, 8, 63, 64, 65, 255, 256, 257, 511, 512, 513, 1023, 1025, 2100):
        x = torch.randint(-4, 5, (3, n), generator=gen).to(dtype)
        assert torch.equal(T.reduce(x, [1], "sum"), x.double().sum(1).to(dtype)), n
    for rows, cols in ((9, 300), (20, 257), (33, 31), (100, 65), (5000, 40)):
        x = torch.randint(-4, 5, (rows, cols), generator=gen).to(dtype)
        assert torch.equal(T.reduce(x, [0], "sum"), x.double().sum(0).to(dtype)), (rows, cols)
        wide = torch.randint(-4, 5, (rows, cols + 5), generator=gen).to(dtype)[:, 3:3 + cols]  # offset, padded
        assert torch.equal(T.reduce(wide, [0], "sum"), wide.double().sum(0).to(dtype)), (rows, cols)


def _overflowing_row(dtype):
    """17 x 2^127, 16 x -2^127, then zeros to 544 elements: the float blocks' partial sums (32 vectors along
    a row, 8 rows down columns) reach 2^128 and overflow, though the sum is 2^127. Every finite partial
    of these values is exact, so the double result must be exactly 2^127."""
    big = 2.0 ** 127
    return torch.tensor([big] * 17 + [-big] * 16 + [0.0] * 511, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_float_block_sums_that_overflow_are_summed_in_double(dtype):
    # README: the CPU kernels accumulate in float64; float sums run in float blocks for speed, and a block
    # that overflows is summed again in double, so no layout gives inf or NaN (torch's own float32 sum does)
    x = _overflowing_row(dtype)
    rows = x.repeat(3, 1)
    cols = x[:, None].expand(-1, 70).contiguous()  # 70 outputs side by side: the vector blocks and a tail
    strided = torch.stack([rows, rows], 2)[..., 0]
    for got, ref in [(T.reduce(rows, [1], "sum"), rows.double().sum(1)), (T.reduce(cols, [0], "mean"), cols.double().mean(0)),
                     (T.reduce(strided, [1], "sum"), strided.double().sum(1)), (T.reduce(x, None, "sum"), x.double().sum())]:
        torch.testing.assert_close(got, ref.to(dtype), rtol=0, atol=0)
    with_inf = x.clone()
    with_inf[100] = float("inf")  # an inf in the input stays one
    assert T.reduce(with_inf, None, "sum").item() == float("inf")


# ---- bmm: block edges, layouts, broadcasting, half types, empty ------------------------------------------

def _operand(batch, rows, cols, dtype, transposed, offset=0):
    if transposed:
        t = _vals((batch, cols + offset, rows), dtype)[:, offset:, :].transpose(1, 2)
    else:
        t = _vals((batch, rows, cols + offset), dtype)[:, :, offset:]
    assert t.shape == (batch, rows, cols)
    return t


@dtypes
@pytest.mark.parametrize("mnk", [(1, 1, 1), (11, 31, 7), (12, 32, 256), (13, 33, 257), (97, 17, 255),
                                 (193, 65, 513), (25, 129, 40)], ids=str)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_bmm_block_edges_and_layouts(dtype, mnk, layout):
    m, n, k = mnk
    a = _operand(2, m, k, dtype, layout[0] == "t")
    b = _operand(2, k, n, dtype, layout[1] == "t")
    assert_bmm_close(T.bmm(a, b), a, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64], ids=dtype_id)
def test_bmm_offset_strided_and_broadcast(dtype):
    # (bf16: every pack of the AVX512-BF16 pairs where the CPU has them, odd K, a batch broadcast)
    a = _operand(1, 50, 70, dtype, False, offset=3)         # row stride 73, offset start
    b = _operand(4, 70, 45, dtype, True, offset=1)
    assert_bmm_close(T.bmm(a, b), a.expand(4, 50, 70), b)   # a's batch of 1 broadcasts
    a2 = _vals((70, 50), dtype).t()                          # 2-D transposed times batched
    assert_bmm_close(T.bmm(a2, b), a2.expand(4, 50, 70), b)
    c = _vals((3, 60, 90), dtype)[:, ::2, ::3]               # no unit stride at all
    d = _vals((3, 30, 80), dtype)[:, :, ::2]
    assert_bmm_close(T.bmm(c, d), c, d)


@dtypes
def test_bmm_empty_and_k0(dtype):
    assert T.bmm(torch.zeros(2, 0, 5, dtype=dtype), torch.zeros(2, 5, 7, dtype=dtype)).shape == (2, 0, 7)
    assert T.bmm(torch.zeros(0, 3, 5, dtype=dtype), torch.zeros(0, 5, 7, dtype=dtype)).shape == (0, 3, 7)
    out = T.bmm(torch.randn(2, 3, 0).to(dtype), torch.randn(2, 0, 40).to(dtype))
    assert out.shape == (2, 3, 40) and torch.equal(out, torch.zeros_like(out))


def _small_ints(shape, generator):
    return torch.randint(-1, 2, shape, generator=generator).to(torch.bfloat16)


@pytest.mark.parametrize("k", [1, 2, 3, 47, 255, 256, 257, 303, 513], ids=str)
def test_bmm_bf16_exact_on_small_integers(k):
    # Values in {-1, 0, 1}: every float32 sum is exact, so the result must equal float64's rounded to bf16
    # bit for bit; a k product lost or doubled in the pair packs (odd K, a k-block's tail of pairs, partial
    # slivers, each pack's layout, a broadcast along k or over the batch) shows as a wrong element.
    g = torch.Generator().manual_seed(k)
    a = _small_ints((3, 29, k), g)
    b = _small_ints((3, k, 45), g)
    row = _small_ints((1, 1, k), g).expand(3, 29, k)      # every row of a the same: stride 0 along M
    col = _small_ints((3, 1, 45), g).expand(3, k, 45)     # stride 0 along k
    cases = [(a, b), (a.mT.contiguous().mT, b), (a, b.mT.contiguous().mT), (a[:1], b), (row, b), (a, col),
             (a.mT.contiguous().mT, b.mT.contiguous().mT)]
    for x, y in cases:
        ref = torch.matmul(x.double(), y.double()).to(torch.bfloat16)
        out = T.bmm(x, y)
        assert torch.equal(out, ref), (k, x.stride(), y.stride())


def test_bmm_bf16_dot_products_run_where_the_cpu_has_them():
    # AVX512-BF16's dot products treat subnormal inputs as zero, the float32 FMA path does not: a
    # subnormal times a large value tells the two apart (and shows TILES_CPU_BF16_DOTS=0 reaches the other)
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if " avx512_bf16" not in flags or " avx512f" not in flags:
        pytest.skip("this CPU has no AVX512-BF16")
    script = ("import sys, torch; sys.path.insert(0, sys.argv[1]); import torch_tiles; "
              "a = torch.full((2, 40, 40), 1e-39).bfloat16(); b = torch.full((2, 40, 40), 1e30).bfloat16(); "
              "print(torch.ops.tiles.bmm(a, b)[0, 0, 0].item())")
    import torch_tiles
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(torch_tiles.__file__)))
    values = {}
    for dots in ("1", "0"):
        env = dict(os.environ, TILES_CPU_BF16_DOTS=dots)
        env.pop("TILES_CPU_ISA", None)
        out = subprocess.run([sys.executable, "-c", script, package_parent], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        values[dots] = float(out.stdout.strip())
    assert values["1"] == 0.0 and values["0"] > 0.0, values


def test_bmm_large_tiles_split_across_threads():
    a = _vals((1, 600, 300), torch.float32)
    b = _vals((1, 300, 1100), torch.float32)
    assert_bmm_close(T.bmm(a, b), a, b)


# ---- every instruction set this machine has ---------------------------------------------------------------

_ISA_SCRIPT = r"""
import os, sys, numpy as np, torch
sys.path[:0] = [sys.argv[1], sys.argv[2]]  # the torch_tiles this test run imported, and tests/
import torch_tiles
from helpers import (MAP_DOMAIN, MAP_REF, assert_bmm_close, assert_close_to_ref, assert_gelu_special_values,
                     assert_reduce_close, assert_sin_cos_ulps, rand_values)
T = torch.ops.tiles
# sin / cos: 2 ulps where the set has FMA (the x86 sets above base; a set wider than the CPU's runs the
# CPU's), near zero too; without FMA the third part of q π/2 rounds, up to 2.1e-13 absolute
assert_sin_cos_ulps(T.map, 0.0 if os.environ.get("TILES_CPU_ISA") != "base" else 5e-13)
for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
    x = rand_values((37, 301), "real").to(dtype)
    for fn in ("exp", "sigmoid", "abs", "relu", "neg", "silu", "tanh", "gelu", "erf", "sin", "cos"):
        assert_close_to_ref(T.map(x, fn), getattr(torch.nn.functional, fn, None)(x.double())
                            if fn in ("sigmoid", "relu", "silu", "gelu") else getattr(torch, fn)(x.double()), dtype)
    if dtype == torch.float32:  # the base set's min is a compare and a select, the x86 sets' vminps
        assert_gelu_special_values(T.map)
    g = rand_values((37, 301), "real").to(dtype)
    gelu_grad = torch.ops.aten.gelu_backward(g.double(), x.double())
    assert_close_to_ref(T._map_backward(g, x, "gelu"), gelu_grad, dtype)
    assert_close_to_ref(T._map_backward(g, x, "sin"), g.double() * torch.cos(x.double()), dtype)
    # the vector gradients (half types run the same float lanes, from a saved output rounded to half)
    grad_fns = ("id", "neg", "abs", "exp", "log", "sqrt", "inv", "square", "sigmoid", "relu", "tanh", "cos")
    for fn in grad_fns if dtype in (torch.float32, torch.float64) else ():
        v = rand_values((37, 301), MAP_DOMAIN[fn]).to(dtype).requires_grad_()
        T.map(v, fn).backward(g)
        ref = v.detach().double().requires_grad_()
        MAP_REF[fn](ref).backward(g.double())
        assert_close_to_ref(v.grad, ref.grad, dtype, msg=lambda m, fn=fn: f"{fn} gradient: {m}")
    wide = x * 60  # |x| up to 180: lanes past 125 take libm's within the same vectors
    assert_close_to_ref(T.map(wide, "sin"), torch.sin(wide.double()), dtype)
    pos = x.abs() + 0.01
    assert_close_to_ref(T.map(pos, "log"), torch.log(pos.double()), dtype)
    if dtype in (torch.float32, torch.float64):  # correctly rounded, as numpy's (the half types round twice)
        pos = x.abs() + 0.25
        assert torch.equal(T.map(pos, "sqrt"), torch.from_numpy(np.sqrt(pos.numpy()))), dtype
    # Sums of small integers are exact in any order: rows past the 32-vector blocks (bf16: two vectors a
    # load) and columns in bands of the vector widths and a task's 256 outputs.
    ints = torch.randint(-4, 5, (300, 530)).to(dtype)
    assert torch.equal(T.reduce(ints, [1], "sum"), ints.double().sum(1).to(dtype)), dtype
    assert torch.equal(T.reduce(ints, [0], "sum"), ints.double().sum(0).to(dtype)), dtype
    y = rand_values((301,), "real").to(dtype)
    for fn in ("add", "mul", "max"):
        assert_close_to_ref(T.zip(x, y, fn), {"add": torch.add, "mul": torch.mul, "max": torch.maximum}[fn](
            x.double(), y.double()), dtype)
    for dims in ([0], [1]):
        for fn in ("sum", "max"):
            assert_reduce_close(T.reduce(x, dims, fn), x, dims, fn)
    # Rows of every length to 69 (each tail length; 8-vector blocks of 8 lanes) and around the 32-vector
    # blocks of 4, 8 and 16 lanes: the padded last vector (zeros for sums, the row's last element for
    # max / min) and a NaN there.
    if dtype in (torch.float32, torch.bfloat16):  # float blocks that overflow, summed again in double
        x = torch.tensor([2.0 ** 127] * 17 + [-2.0 ** 127] * 16 + [0.0] * 511, dtype=dtype)  # sum 2^127
        assert T.reduce(x.repeat(3, 1), [1], "sum").tolist() == [2.0 ** 127] * 3, dtype  # rows
        assert T.reduce(x[:, None].expand(-1, 70).contiguous(), [0], "sum").tolist() == [2.0 ** 127] * 70, dtype
    long_rows = rand_values((5, 2500), "real").to(dtype)  # two rows at a time (the AVX2 build)
    long_rows[2, 2499] = float("nan")
    for fn in ("sum", "mean", "max", "min"):
        together = T.reduce(long_rows, [1], fn)
        alone = torch.stack([T.reduce(row, [0], fn) for row in long_rows])
        assert torch.equal(together.isnan(), alone.isnan()) and torch.equal(together.nan_to_num(), alone.nan_to_num()), fn
        assert_reduce_close(together, long_rows, [1], fn)
    for n in list(range(1, 70)) + [127, 128, 129, 255, 256, 257, 300, 511, 512, 513, 530]:
        r = rand_values((3, n), "real").to(dtype)
        for fn in ("sum", "max", "min", "mean"):
            assert_reduce_close(T.reduce(r, [1], fn), r, [1], fn)
        neg, pos = -(r.abs() + 1), r.abs() + 1  # where a zero in the padding would win
        assert_reduce_close(T.reduce(neg, [1], "max"), neg, [1], "max")
        assert_reduce_close(T.reduce(pos, [1], "min"), pos, [1], "min")
        r[1, n - 1] = float("nan")
        for fn in ("max", "min"):
            assert torch.isnan(T.reduce(r, [1], fn)).tolist() == [False, True, False], (n, fn)
    if dtype == torch.float16:  # F16C's conversions (x86 sets) round as c10's: ties to even, overflow, subnormals
        a = torch.tensor([1.0, 1.0, 65504.0, 6.0e-8, -3.0e-5, float("inf"), float("nan"), 0.1, -0.0] * 8, dtype=dtype)
        b = torch.tensor([2.0 ** -11, 3 * 2.0 ** -11, 16.0, 6.0e-8, 1.0e-5, -1.0, 1.0, 0.2, 0.0] * 8, dtype=dtype)
        for fn, ref in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div)):
            torch.testing.assert_close(T.zip(a, b, fn), ref(a, b), rtol=0, atol=0, equal_nan=True)
        assert T.zip(a, b, "add")[:3].tolist() == [1.0, 1.0 + 2.0 ** -9, float("inf")]
    # K = 303: a second k-block of 47 (KC = 256), whose packs transpose 4 x 4 blocks and then a tail of 3
    for ta in (False, True):
        for tb in (False, True):
            a = rand_values((3, 29, 303), "real").to(dtype)
            b = rand_values((3, 303, 45), "real").to(dtype)
            a = a.transpose(1, 2).contiguous().transpose(1, 2) if ta else a
            b = b.transpose(1, 2).contiguous().transpose(1, 2) if tb else b
            assert_bmm_close(T.bmm(a, b), a, b)
print("ok")
"""


@pytest.mark.parametrize("isa", ["base", "avx2", "avx512", "avx512 without bf16 dots"])
def test_every_instruction_set(isa):
    # a set wider than the CPU's falls back to the CPU's; bf16's bmm takes AVX512-BF16 dot products where
    # the CPU has them (csrc/cpu/bmm_body.h Bf16Dots), else its FMA path, which the last case forces
    env = dict(os.environ, TILES_CPU_ISA=isa.split()[0], TILES_CPU_BF16_DOTS="0" if "without" in isa else "1")
    import torch_tiles
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(torch_tiles.__file__)))
    out = subprocess.run([sys.executable, "-c", _ISA_SCRIPT, package_parent, TESTS], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr
