"""tiles::bmm against torch.matmul in float64: batch broadcasting, odd and empty sizes, strided
operands, and float32 / half accuracy (relative Frobenius error)."""

import pytest
import torch

import torch_tiles
from helpers import FLOAT_DTYPES, dtype_id, make_tensor, rel_error

# Every test compares float32 against references at full float32 precision (no TF32).
pytestmark = pytest.mark.usefixtures("highest_float32_precision")

# ||out - ref|| / ||ref|| bounds against the float64 reference
REL_ERR = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}

# name: (shape of a, shape of b)
SHAPE_CASES = {
    "batched": ((3, 5, 4), (3, 4, 6)),
    "2d_2d": ((5, 4), (4, 6)),
    "2d_3d": ((5, 4), (3, 4, 6)),
    "3d_2d": ((3, 5, 4), (4, 6)),
    "batch1_left": ((1, 5, 4), (3, 4, 6)),
    "batch1_right": ((3, 5, 4), (1, 4, 6)),
    "batch1_both": ((1, 5, 4), (1, 4, 6)),
    "odd_33x17x65": ((2, 33, 17), (2, 17, 65)),
    "M1": ((3, 1, 9), (3, 9, 7)),
    "N1": ((3, 7, 9), (3, 9, 1)),
    "K1": ((3, 7, 1), (3, 1, 5)),
    "all_ones": ((1, 1, 1), (1, 1, 1)),
    "2d_M1_N1": ((1, 37), (37, 1)),
    "tiles_plus_one": ((2, 65, 129), (2, 129, 33)),
    "larger_K": ((2, 16, 700), (2, 700, 24)),
}


def expected_shape(shape_a, shape_b):
    m, n = shape_a[-2], shape_b[-1]
    if len(shape_a) == 2 and len(shape_b) == 2:
        return (m, n)
    batch_a = shape_a[0] if len(shape_a) == 3 else 1
    batch_b = shape_b[0] if len(shape_b) == 3 else 1
    return (max(batch_a, batch_b) if min(batch_a, batch_b) != 0 else 0, m, n)


def check_bmm(a, b):
    a_before, b_before = a.clone(), b.clone()
    out = torch.ops.tiles.bmm(a, b)
    ref = torch.matmul(a.double().cpu(), b.double().cpu())
    assert out.shape == expected_shape(tuple(a.shape), tuple(b.shape)) == ref.shape
    assert out.dtype == a.dtype and out.device == a.device and out.is_contiguous()
    if ref.numel() and ref.abs().max() > 0:
        err = rel_error(out, ref)
        assert err < REL_ERR[a.dtype], (
            f"relative error {err:.3g} >= {REL_ERR[a.dtype]} for {a.dtype} "
            f"a={tuple(a.shape)}/{a.stride()} b={tuple(b.shape)}/{b.stride()}")
    else:  # empty or exact zeros (K = 0)
        assert torch.equal(out.double().cpu(), ref)
    torch.testing.assert_close(a, a_before, rtol=0, atol=0)
    torch.testing.assert_close(b, b_before, rtol=0, atol=0)
    return out


@pytest.mark.parametrize("shapes", SHAPE_CASES.values(), ids=SHAPE_CASES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_bmm_shapes(dtype, shapes, device):
    shape_a, shape_b = shapes
    a = make_tensor(shape_a, dtype, device)
    b = make_tensor(shape_b, dtype, device)
    check_bmm(a, b)


EMPTY_CASES = {
    "K0": ((2, 3, 0), (2, 0, 4)),
    "K0_2d": ((3, 0), (0, 4)),
    "K0_broadcast": ((3, 0), (2, 0, 4)),
    "M0": ((2, 0, 4), (2, 4, 3)),
    "N0": ((2, 3, 4), (2, 4, 0)),
    "B0": ((0, 3, 4), (0, 4, 5)),
    "B0_with_2d": ((0, 3, 4), (4, 5)),
    "B0_with_batch1": ((1, 3, 4), (0, 4, 5)),
    "M0_2d": ((0, 4), (4, 5)),
}


@pytest.mark.parametrize("shapes", EMPTY_CASES.values(), ids=EMPTY_CASES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_bmm_empty(dtype, shapes, device):
    shape_a, shape_b = shapes
    a = make_tensor(shape_a, dtype, device)
    b = make_tensor(shape_b, dtype, device)
    out = check_bmm(a, b)
    if shape_a[-1] == 0 and out.numel():  # K = 0: a sum over nothing is zero, not garbage
        assert (out == 0).all()


def _operand(kind, batch, rows, cols, dtype, device):
    """A [batch, rows, cols] operand in a given layout."""
    if kind == "contiguous":
        return make_tensor((batch, rows, cols), dtype, device)
    if kind == "transposed":  # a.transpose(1, 2) of a [batch, cols, rows] tensor
        return make_tensor((batch, cols, rows), dtype, device).transpose(1, 2)
    if kind == "mT":
        return make_tensor((batch, cols, rows), dtype, device).mT
    if kind == "sliced":  # step 2 in every dim, non-zero offset
        return make_tensor((batch, rows, cols), dtype, device, "sliced")
    if kind == "expanded_batch":  # stride 0 batch
        return make_tensor((batch, rows, cols), dtype, device, "expanded", expand_dims=(0,))
    if kind == "permuted":  # batch dim innermost in memory
        return make_tensor((rows, cols, batch), dtype, device).permute(2, 0, 1)
    raise ValueError(kind)


OPERAND_LAYOUTS = ["contiguous", "transposed", "mT", "sliced", "expanded_batch", "permuted"]


@pytest.mark.parametrize("layout_b", OPERAND_LAYOUTS)
@pytest.mark.parametrize("layout_a", OPERAND_LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_bmm_strided_operands(dtype, layout_a, layout_b, device):
    a = _operand(layout_a, 3, 7, 10, dtype, device)
    b = _operand(layout_b, 3, 10, 5, dtype, device)
    assert a.is_contiguous() == (layout_a == "contiguous")
    assert b.is_contiguous() == (layout_b == "contiguous")
    check_bmm(a, b)


# Matrix-vector products (at most 4 output columns or rows), large enough to leave the direct loop:
# (batch, M, K, N) with N of 1 and 4, M of 2 (few rows), K with a vector tail, more rows than one
# block of sums (the CPU's along-rows loop keeps at most 4096 float32 sums per block).
MATRIX_VECTOR_CASES = [(2, 1100, 40, 4), (1, 5000, 33, 1), (3, 2, 700, 300), (1, 1, 4097, 3), (2, 4, 129, 4100)]


@pytest.mark.parametrize("layout_b", ["contiguous", "mT", "sliced", "expanded_batch"])
@pytest.mark.parametrize("layout_a", ["contiguous", "mT", "sliced", "expanded_batch"])
@pytest.mark.parametrize("case", MATRIX_VECTOR_CASES, ids=["x".join(map(str, c)) for c in MATRIX_VECTOR_CASES])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_bmm_matrix_vector(dtype, case, layout_a, layout_b, device):
    batch, m, k, n = case
    check_bmm(_operand(layout_a, batch, m, k, dtype, device), _operand(layout_b, batch, k, n, dtype, device))
    a, b = _operand(layout_a, batch, m, k, dtype, device), _operand(layout_b, batch, k, n, dtype, device)
    assert torch.equal(torch.ops.tiles.bmm(a, b), torch.ops.tiles.bmm(a, b))  # a fixed order of sums


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_bmm_operands_expanded_along_a_matrix_dim(dtype, device):
    # Stride 0 along M, N or K, at sizes every tensor-core path takes: no kernel may read such an
    # operand as if its rows were distinct (TMA cannot describe a zero stride; mma.sync can).
    batch, m, k, n = 2, 128, 64, 128
    a_rows = make_tensor((batch, 1, k), dtype, device).expand(batch, m, k)  # one row of a, M times
    b_rows = make_tensor((batch, 1, n), dtype, device).expand(batch, k, n)  # one row of b, K times
    a_cols = make_tensor((batch, m, 1), dtype, device).expand(batch, m, k)  # one column of a, K times
    a = make_tensor((batch, m, k), dtype, device)
    b = make_tensor((batch, k, n), dtype, device)
    b_t = make_tensor((batch, k, n), dtype, device, "transposed")
    for x, y in [(a_rows, b), (a, b_rows), (a_cols, b_t), (a_rows, b_rows)]:
        check_bmm(x, y)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_bmm_strided_2d_operands(dtype, device):
    a = make_tensor((9, 6), dtype, device, "transposed")
    b = make_tensor((6, 11), dtype, device, "sliced")
    check_bmm(a, b)
    check_bmm(a, make_tensor((2, 11, 6), dtype, device).mT)
    check_bmm(make_tensor((4, 7, 6), dtype, device, "sliced"), b)


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
def test_bmm_float32_accuracy(precision, device):
    # README: float32 follows torch.set_float32_matmul_precision as torch.matmul does. "highest" is
    # float32-accurate everywhere; "high" / "medium" let CUDA multiply in TF32 (10-bit mantissas,
    # the TF32 bound 3e-3); the CPU kernel always computes in float32.
    torch.set_float32_matmul_precision(precision)
    a = make_tensor((4, 64, 256), torch.float32, device)
    b = make_tensor((4, 256, 48), torch.float32, device, "transposed")
    out = torch.ops.tiles.bmm(a, b)
    err = rel_error(out, torch.matmul(a.double(), b.double()))
    bound = 1e-5 if precision == "highest" or device == "cpu" else 3e-3
    assert err < bound, f"float32 bmm relative error {err:.3g} with precision={precision!r}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=dtype_id)
def test_bmm_half_accumulates_in_float32(dtype, device):
    # K = 2048 products of exact small integers: partial sums up to a few thousand are exact in
    # float32 but not in float16 / bfloat16 (8 and 11 significant bits)
    k = 2048
    # (128 outputs: even a pairwise half-precision sum gets some of them wrong)
    a = torch.randint(1, 4, (2, 8, k)).to(dtype).to(device)
    b = torch.randint(1, 4, (2, k, 8)).to(dtype).to(device)
    out = torch.ops.tiles.bmm(a, b)
    exact = torch.matmul(a.double().cpu(), b.double().cpu())
    assert exact.abs().max() < 2**24
    # the exact integer result, rounded once to the output dtype
    torch.testing.assert_close(out.cpu(), exact.to(dtype), rtol=0, atol=0)


def test_bmm_python_wrapper(device):
    a = make_tensor((2, 5, 4), torch.float64, device)
    b = make_tensor((4, 3), torch.float64, device)
    out = torch_tiles.bmm(a, b)
    assert out.shape == (2, 5, 3)
    assert rel_error(out, torch.matmul(a, b)) < 1e-12
