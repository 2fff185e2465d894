"""tiles::reduce against PyTorch (float64 reference): dims, keepdim, layouts, empty and 0-dim inputs,
long rows / many short rows, NaN, determinism and float32 accumulation for half types."""

import pytest
import torch

import torch_tiles
from helpers import (FLOAT_DTYPES, HALF_DTYPES, LAYOUTS, REDUCE_DOMAIN, REDUCE_FNS,
                     assert_close_to_ref, assert_reduce_close, dtype_id, make_tensor)

NAN = float("nan")

SHAPE_4D = (3, 4, 2, 5)
DIM_CHOICES = {
    "None": None,
    "empty_list": [],
    "0": [0],
    "-1": [-1],
    "0,2": [0, 2],
    "1,-1": [1, -1],
    "-1,0_unsorted": [-1, 0],
    "all_dims": [0, 1, 2, 3],
}


def reduce(x, dim, fn, keepdim=False):
    return torch.ops.tiles.reduce(x, dim, fn, keepdim=keepdim)


def check_reduce(x, dim, fn, keepdim=False):
    before = x.detach().clone()
    out = reduce(x, dim, fn, keepdim)
    assert_reduce_close(out, x, dim, fn, keepdim)
    torch.testing.assert_close(x.detach(), before, rtol=0, atol=0, equal_nan=True)
    return out


def test_fn_names_match_readme():
    assert isinstance(torch_tiles.REDUCE_FNS, tuple)
    assert sorted(torch_tiles.REDUCE_FNS) == sorted(REDUCE_FNS)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keepdim"])
@pytest.mark.parametrize("dim", DIM_CHOICES.values(), ids=DIM_CHOICES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_dims_layouts(fn, dtype, dim, keepdim, layout, device):
    x = make_tensor(SHAPE_4D, dtype, device, layout, domain=REDUCE_DOMAIN[fn])
    check_reduce(x, dim, fn, keepdim)


@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keepdim"])
@pytest.mark.parametrize("dim", [None, [], [0], [-1]], ids=["None", "empty_list", "0", "-1"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_zero_dim(fn, dtype, dim, keepdim, device):
    x = make_tensor((), dtype, device, domain=REDUCE_DOMAIN[fn])
    out = reduce(x, dim, fn, keepdim)
    assert out.shape == () and out.dtype == dtype
    # every reduction of a single element is that element
    assert_close_to_ref(out, x.double(), exact=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_one_element_and_size_one_dims(fn, dtype, device):
    x = make_tensor((1, 1, 1), dtype, device, domain=REDUCE_DOMAIN[fn])
    check_reduce(x, [1], fn, keepdim=False)
    check_reduce(x, None, fn, keepdim=True)
    y = make_tensor((3, 1, 4), dtype, device, "permuted", domain=REDUCE_DOMAIN[fn])
    check_reduce(y, [1], fn)


# (shape, dim, keepdim, expected output shape)
EMPTY_CASES = {
    "0x3_dim0": ((0, 3), [0], False, (3,)),
    "0x3_all": ((0, 3), None, False, ()),
    "0x3_all_keepdim": ((0, 3), None, True, (1, 1)),
    "2x0x5_dim1": ((2, 0, 5), [1], False, (2, 5)),
    "2x0x5_dim1_keepdim": ((2, 0, 5), [1], True, (2, 1, 5)),
    "2x0x5_dims_1_2": ((2, 0, 5), [-2, 2], False, (2,)),
}
EMPTY_FILL = {"sum": 0.0, "prod": 1.0, "mean": NAN, "logsumexp": -float("inf")}


@pytest.mark.parametrize("case", EMPTY_CASES.values(), ids=EMPTY_CASES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ["sum", "prod", "mean", "logsumexp"])
def test_reduce_over_empty_dim(fn, dtype, case, device):
    shape, dim, keepdim, expected_shape = case
    x = make_tensor(shape, dtype, device)
    out = reduce(x, dim, fn, keepdim)
    assert out.shape == expected_shape and out.dtype == dtype and out.is_contiguous()
    expected = torch.full(expected_shape, EMPTY_FILL[fn], dtype=torch.float64)
    assert_close_to_ref(out, expected, exact=True)


# (shape, dim, keepdim, expected output shape): no element is reduced, so no error either
EMPTY_OUTPUT_CASES = {
    "0x3_dim1": ((0, 3), [1], False, (0,)),
    "0x3_dim1_keepdim": ((0, 3), [-1], True, (0, 1)),
    "2x0x5_dim2": ((2, 0, 5), [2], False, (2, 0)),
    "2x0x5_dims_0_2": ((2, 0, 5), [0, 2], False, (0,)),
}


@pytest.mark.parametrize("case", EMPTY_OUTPUT_CASES.values(), ids=EMPTY_OUTPUT_CASES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_empty_tensor_over_nonempty_dims(fn, dtype, case, device):
    shape, dim, keepdim, expected_shape = case
    x = make_tensor(shape, dtype, device)
    out = reduce(x, dim, fn, keepdim)
    assert out.shape == expected_shape and out.dtype == dtype and out.numel() == 0


@pytest.mark.parametrize("shape_dim", [((0, 3), [0]), ((0, 3), None), ((0, 3), []), ((2, 0, 5), [1]),
                                       ((2, 0, 5), [0, 1]), ((0,), [-1])],
                         ids=["0x3_dim0", "0x3_None", "0x3_empty_list", "2x0x5_dim1",
                              "2x0x5_dims_0_1", "0_dim-1"])
@pytest.mark.parametrize("fn", ["max", "min"])
def test_reduce_max_min_over_empty_dim_raises(fn, shape_dim, device):
    shape, dim = shape_dim
    x = make_tensor(shape, torch.float32, device)
    with pytest.raises(RuntimeError, match="reduce"):
        reduce(x, dim, fn)


@pytest.mark.parametrize("dim", [[0], None], ids=["dim0", "None"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_long_row(fn, dtype, dim, device):
    n = 100003  # prime: no vector width or block size divides it
    if fn == "prod":
        # +-1 with 50 factors of 2 and 47 of 1/2 at random places: the exact product is +-8 in any
        # dtype, so a dropped or repeated element shows
        x64 = torch.randint(0, 2, (n,)).double() * 2 - 1
        idx = torch.randperm(n)[:97]
        x64[idx[:50]] *= 2
        x64[idx[50:]] *= 0.5
        x = x64.to(dtype).to(device)
    else:
        x = make_tensor((n,), dtype, device, domain=REDUCE_DOMAIN[fn])
    if fn in ("max", "min"):
        x[n - 1] = 10.0 if fn == "max" else -10.0  # the extreme sits in the very last element
    out = check_reduce(x, dim, fn)
    if fn == "prod":
        assert abs(out.item()) == 8.0
    if fn in ("max", "min"):
        assert out.item() == (10.0 if fn == "max" else -10.0)


@pytest.mark.parametrize("position", [0, 517, 1036], ids=["first", "middle", "last"])
@pytest.mark.parametrize("fn", ["max", "min"])
def test_reduce_max_min_extreme_position(fn, position, device):
    x = make_tensor((1037,), torch.float32, device, domain="grid")
    x[position] = 100.0 if fn == "max" else -100.0
    out = check_reduce(x, [0], fn)
    assert abs(out.item()) == 100.0


@pytest.mark.parametrize("dim", [[-1], [0], None], ids=["rows", "columns", "all"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_many_short_rows(fn, dtype, dim, device):
    if fn == "prod":
        # products of 4099 values would over/underflow: use +-1 with factors 2 and 1/2 placed in
        # pairs (2 at [i, c], 1/2 at [i + 1, c]) so every row, column and total product is exact
        x64 = torch.randint(0, 2, (4099, 7)).double() * 2 - 1
        rows = torch.arange(0, 4098, 37)
        x64[rows, rows % 7] *= 2
        x64[rows + 1, rows % 7] *= 0.5
        x = x64.to(dtype).to(device)
    else:
        x = make_tensor((4099, 7), dtype, device, domain=REDUCE_DOMAIN[fn])
    check_reduce(x, dim, fn)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min"])
def test_reduce_rows_and_columns_of_every_length(fn, dtype, device):
    # Lengths around the vector loops' edges (one vector is 4 to 16 lanes, a block 4 or 8 vectors;
    # columns are summed 8 rows at a time): full vectors, a vector's tail, the block loop and its
    # remainder, along rows (the last dim) and down columns (131 of them: whole blocks and a tail).
    for length in [1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 257, 513]:
        check_reduce(make_tensor((37, length), dtype, device, domain=REDUCE_DOMAIN[fn]), [-1], fn)
        check_reduce(make_tensor((length, 131), dtype, device, domain=REDUCE_DOMAIN[fn]), [0], fn)


@pytest.mark.parametrize("shape", [(5, 8000), (150, 2056), (37, 1600), (3, 4097)],
                         ids=["5x8000", "150x2056", "37x1600", "3x4097"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_few_rows_under_32_kib(fn, dtype, shape, device):
    # Rows under 32 KiB but longer than one pass of a warp's lanes (128 vectors), too few to fill the
    # GPU's SMs as lanes: the CUDA kernels give each a block instead (launch_rows); float64 5 x 8000 and
    # 3 x 4097 are rows of 32 KiB or more, a block's already. The first three in 16-byte vectors, 3 x 4097
    # and the sliced rows one element at a time, split into segments where long enough. Values from the
    # continuous domain, so that a skipped stretch of a row changes its max and min too.
    if fn == "prod":
        x = torch.where(torch.rand(shape, device=device) < 0.5, -1.0, 1.0).to(dtype)  # exact: +-1
    else:
        x = make_tensor(shape, dtype, device, domain="real" if fn in ("max", "min") else REDUCE_DOMAIN[fn])
    check_reduce(x, [1], fn)
    check_reduce(x[:, 1:], [1], fn)  # rows one element off 16-byte alignment


@pytest.mark.parametrize("layout", ["contiguous", "permuted", "sliced", "transposed"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_middle_dim(fn, dtype, layout, device):
    x = make_tensor((6, 257, 5), dtype, device, layout, domain=REDUCE_DOMAIN[fn])
    if layout != "contiguous":
        assert not x.is_contiguous()
    check_reduce(x, [1], fn)
    check_reduce(x, [-2], fn, keepdim=True)


@pytest.mark.parametrize("case", [((40, 50, 60), "permuted", None), ((64, 3, 129), "sliced", [0, 2]),
                                  ((64, 3, 129), "permuted", [-1, 0]), ((2, 9000), "transposed", [1])],
                         ids=["all_permuted", "outer_dims_sliced", "outer_dims_permuted",
                              "rows_transposed"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("fn", ["sum", "max"])
def test_reduce_large_strided(fn, dtype, case, device):
    # more than one chunk of input per output, over several non-mergeable dims: the reduction is
    # split into pieces whose strided walks start part-way through the reduced dims
    shape, layout, dim = case
    x = make_tensor(shape, dtype, device, layout, domain=REDUCE_DOMAIN[fn])
    assert not x.is_contiguous()
    check_reduce(x, dim, fn)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ["max", "min"])
def test_reduce_max_min_propagate_nan(fn, dtype, device):
    x = make_tensor((5, 9), dtype, device, domain="grid")
    x[1, 0] = NAN
    x[3, 8] = NAN  # last element of a row
    x[4, 4] = NAN
    out = reduce(x, [-1], fn)
    ref = (torch.amax if fn == "max" else torch.amin)(x.double(), dim=-1)
    assert_close_to_ref(out, ref, exact=True)
    assert torch.isnan(out).tolist() == [False, True, False, True, True]
    out = reduce(x, [0], fn)  # a NaN in columns 0, 4 and 8
    assert torch.isnan(out).tolist() == [i in (0, 4, 8) for i in range(9)]
    assert torch.isnan(reduce(x, None, fn)).item()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("position", [0, 600, 1050, 1076], ids=["first", "middle", "single-vector", "last"])
@pytest.mark.parametrize("fn", ["max", "min"])
def test_reduce_max_min_nan_in_long_row(fn, position, dtype, device):
    # Long enough for the CPU's vector loops (blocks of 4 vectors, then single vectors, then a scalar
    # tail), which track NaNs apart from the running max / min; a NaN with its sign bit set (bf16
    # stores it without), and infinities that must not pass for NaNs.
    x = make_tensor((1077,), dtype, device, domain="grid")
    x[position] = NAN
    assert torch.isnan(reduce(x, [0], fn)).item()
    assert torch.isnan(reduce(x.view(1, 1077), [-1], fn)).item()
    x[position] = -NAN
    assert torch.isnan(reduce(x, [0], fn)).item()
    x[position] = float("inf")
    x[position // 2] = -float("inf")
    ref = (torch.amax if fn == "max" else torch.amin)(x.double())
    assert_close_to_ref(reduce(x, [0], fn), ref, exact=True)


@pytest.mark.parametrize("fn", ["sum", "mean", "prod"])
def test_reduce_propagates_nan_and_inf(fn, device):
    x = make_tensor((3, 6), torch.float32, device, domain=REDUCE_DOMAIN[fn])
    x[0, 2] = NAN
    x[1, 5] = float("inf")
    out = reduce(x, [1], fn)
    assert torch.isnan(out[0]) and out[1].item() in (float("inf"), -float("inf"))
    assert torch.isfinite(out[2])


@pytest.mark.parametrize("case", [((1 << 20) + 5, None), ((1031, 1027), [1]), ((1031, 1027), [0]),
                                  ((64, 33, 129), [0, 2])],
                         ids=["flat_1M", "rows", "columns", "dims_0_2"])
@pytest.mark.parametrize("fn", ["sum", "mean", "logsumexp"])
def test_reduce_is_deterministic(fn, case, device):
    shape, dim = case
    shape = shape if isinstance(shape, tuple) else (shape,)
    x = make_tensor(shape, torch.float32, device)
    first = reduce(x, dim, fn)
    for _ in range(3):
        again = reduce(x, dim, fn)
        assert torch.equal(first, again), "reduce is not bit-for-bit reproducible"
    assert_reduce_close(first, x, dim, fn)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
def test_half_sum_of_ones_accumulates_in_float32(dtype, device):
    # 4096 ones: a float16 running sum sticks at 2048, a bfloat16 one at 256
    x = torch.ones(4096, dtype=dtype, device=device)
    assert reduce(x, None, "sum").item() == 4096.0
    assert reduce(x, [0], "mean").item() == 1.0
    rows = torch.ones(3, 4096, dtype=dtype, device=device)
    assert reduce(rows, [1], "sum").tolist() == [4096.0] * 3
    assert reduce(rows.t(), [0], "sum").tolist() == [4096.0] * 3  # strided reduction


def _cancelling_half_values(dtype, rows=None):
    """2048 values in [1, 2), then the same values negated in a shuffled order, then 0.5.

    Every partial sum of these is a multiple of the dtype's spacing in [1, 2) with magnitude below
    2^12, hence exact in float32 whatever the summation order: a float32 accumulator returns exactly
    0.5.  Any float16/bfloat16 accumulator (sequential or tree) rounds partial sums of size ~10..3000
    and is left with an error of many units."""
    shape = (2048,) if rows is None else (rows, 2048)
    big = (1 + torch.rand(shape, dtype=torch.float64)).to(dtype)
    perm = torch.randperm(2048)
    last = torch.full(shape[:-1] + (1,), 0.5, dtype=dtype)
    return torch.cat([big, -big[..., perm], last], dim=-1)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
def test_half_sum_with_cancellation_accumulates_in_float32(dtype, device):
    x = _cancelling_half_values(dtype).to(device)
    assert x.double().sum().item() == 0.5  # the exact sum
    out = reduce(x, None, "sum")
    assert out.dtype == dtype and out.item() == 0.5
    mean = reduce(x, [0], "mean")
    assert_close_to_ref(mean, torch.tensor(0.5 / 4097), dtype)
    rows = _cancelling_half_values(dtype, rows=3).to(device)
    assert reduce(rows, [-1], "sum").tolist() == [0.5] * 3
    # the same data stored column-major: reduction along a strided dim
    cols = rows.t().contiguous().t()
    assert reduce(cols, [1], "sum").tolist() == [0.5] * 3


@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_python_wrapper_accepts_int_dim(fn, device):
    x = make_tensor((3, 4, 5), torch.float32, device, "permuted", domain=REDUCE_DOMAIN[fn])
    out = torch_tiles.reduce(x, 1, fn)
    assert_reduce_close(out, x, [1], fn)
    out = torch_tiles.reduce(x, -1, fn, keepdim=True)
    assert_reduce_close(out, x, [-1], fn, keepdim=True)
    out = torch_tiles.reduce(x, [0, 2], fn)
    assert_reduce_close(out, x, [0, 2], fn)
    out = torch_tiles.reduce(x, (2, 0), fn)  # any sequence of ints
    assert_reduce_close(out, x, [2, 0], fn)
    out = torch_tiles.reduce(x, None, fn)
    assert_reduce_close(out, x, None, fn)


# ---- logsumexp: one pass over a running (max, sum) -----------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape, dim", [((64, 10), [1]), ((3, 70000), [1]), ((8, 1 << 17), [1]), ((5000, 96), [0]),
                                        ((3, 70000), [0]), ((9, 7, 5), [0, 2]), ((1 << 20,), None)],
                         ids=["short_rows", "long_rows", "split_rows", "columns", "split_columns", "generic", "all"])
def test_logsumexp_of_large_values_matches_torch(shape, dim, dtype, device):
    # Values far beyond exp's range (exp(300) overflows float32, exp(800) float64): only a running max
    # keeps the sum finite. Every kernel shape: short and long rows, rows split across blocks, columns,
    # strided dims and the whole tensor.
    x = (make_tensor(shape, torch.float64, device) * 800).to(dtype)
    out = reduce(x, dim, "logsumexp")
    assert torch.isfinite(out).all()
    assert_reduce_close(out, x, dim, "logsumexp")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_logsumexp_infinities_and_nan_like_torch(dtype, device):
    inf, nan = float("inf"), float("nan")
    rows = [[1.0, inf, 2.0], [inf, inf, 0.0], [-inf, -inf, -inf], [-inf, 3.0, -inf], [1.0, nan, inf],
            [-inf, nan, 2.0], [inf, -inf, 5.0]]
    x = torch.tensor(rows, dtype=dtype, device=device)
    ref = torch.logsumexp(torch.tensor(rows, dtype=torch.float64), dim=1)
    for layout in (x, x.t().contiguous().t()):  # rows, then the same values down strided columns
        assert_close_to_ref(reduce(layout, [1], "logsumexp"), ref, exact=True)
