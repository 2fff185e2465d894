"""tiles::zip against PyTorch (float64 reference): broadcasting, layouts, type promotion, NaN/inf."""

import pytest
import torch

import torch_tiles
from helpers import (COMPARE_FNS, FLOAT_DTYPES, ZIP_DOMAIN, ZIP_EXACT, ZIP_FNS, ZIP_REF,
                     assert_close_to_ref, assert_elementwise_layout, dtype_id, make_tensor)

NAN, INF = float("nan"), float("inf")

# name: (shape of a, layout of a, shape of b, layout of b)
BROADCAST_CASES = {
    "same_shape": ((4, 5), "contiguous", (4, 5), "contiguous"),
    "row": ((4, 5), "contiguous", (5,), "contiguous"),
    "row_reversed": ((5,), "contiguous", (4, 5), "contiguous"),
    "column": ((4, 5), "contiguous", (4, 1), "contiguous"),
    "both_ways": ((3, 1, 5), "contiguous", (4, 1), "contiguous"),
    "zero_dim_left": ((), "contiguous", (3, 4), "contiguous"),
    "zero_dim_right": ((2, 3, 4), "contiguous", (), "contiguous"),
    "zero_dim_both": ((), "contiguous", (), "sliced"),
    "permuted_with_sliced": ((3, 4, 5), "permuted", (3, 4, 5), "sliced"),
    "expanded_with_transposed": ((3, 4, 5), "expanded", (4, 5), "transposed"),
    "sliced_with_sliced_row": ((2, 3, 6), "sliced", (6,), "sliced"),
    "transposed_with_column": ((5, 4), "transposed", (5, 1), "permuted"),
    "expanded_with_permuted": ((6, 5), "expanded", (3, 1, 5), "permuted"),
    "rank6": ((2, 1, 3, 1, 4, 2), "permuted", (3, 5, 1, 2), "sliced"),
    "empty_row_broadcast": ((0, 3), "contiguous", (3,), "contiguous"),
    "empty_both_broadcast": ((2, 0, 1), "contiguous", (1, 4), "sliced"),
    "empty_with_zero_dim": ((0,), "contiguous", (), "contiguous"),
    "odd_1037": ((1037,), "contiguous", (1037,), "sliced"),
    "odd_rows_1037": ((3, 1037), "contiguous", (1037,), "contiguous"),
    "odd_columns_1037": ((1037, 3), "transposed", (1037, 1), "contiguous"),
}


def check_zip(a, b, fn):
    a_before, b_before = a.detach().clone(), b.detach().clone()
    out = torch.ops.tiles.zip(a, b, fn)
    result_dtype = torch.result_type(a, b)
    assert out.dtype == result_dtype, (out.dtype, result_dtype)
    assert out.shape == torch.broadcast_shapes(a.shape, b.shape)
    assert out.device == a.device
    assert_elementwise_layout(out, a, b)  # the first dense full-shape operand's strides, else contiguous
    ref = ZIP_REF[fn](a.detach().double().cpu(), b.detach().double().cpu())
    assert_close_to_ref(out, ref, result_dtype, exact=fn in ZIP_EXACT,
                        msg=lambda m: f"zip {fn!r} a={a.dtype}{tuple(a.shape)}/{a.stride()} "
                                      f"b={b.dtype}{tuple(b.shape)}/{b.stride()}:\n{m}")
    torch.testing.assert_close(a.detach(), a_before, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(b.detach(), b_before, rtol=0, atol=0, equal_nan=True)
    return out


def make_pair(fn, shape_a, layout_a, shape_b, layout_b, dtype_a, dtype_b, device):
    dom_a, dom_b = ZIP_DOMAIN[fn]
    a = make_tensor(shape_a, dtype_a, device, layout_a, domain=dom_a)
    b = make_tensor(shape_b, dtype_b, device, layout_b, domain=dom_b)
    return a, b


def test_fn_names_match_readme():
    assert isinstance(torch_tiles.ZIP_FNS, tuple)
    assert sorted(torch_tiles.ZIP_FNS) == sorted(ZIP_FNS)


@pytest.mark.parametrize("case", BROADCAST_CASES.values(), ids=BROADCAST_CASES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ZIP_FNS)
def test_zip_broadcast(fn, dtype, case, device):
    shape_a, layout_a, shape_b, layout_b = case
    a, b = make_pair(fn, shape_a, layout_a, shape_b, layout_b, dtype, dtype, device)
    check_zip(a, b, fn)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ZIP_FNS)
def test_zip_with_own_transpose(fn, dtype, device):
    # two differently strided views of one storage
    dom_a, dom_b = ZIP_DOMAIN[fn]
    a = make_tensor((6, 6), dtype, device, domain=dom_a if dom_a == dom_b else "positive")
    check_zip(a, a.t(), fn)
    check_zip(a[1:, :-1], a.t()[:-1, 1:], fn)  # overlapping, offset views


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ZIP_FNS)
def test_zip_same_tensor_twice(fn, dtype, device):
    dom_a, dom_b = ZIP_DOMAIN[fn]
    a = make_tensor((3, 7), dtype, device, "sliced",
                    domain="nonzero" if fn == "div" else "positive" if fn == "pow" else dom_a)
    out = check_zip(a, a, fn)
    if fn in ("sub", "lt", "gt", "ne"):
        assert (out == 0).all()
    if fn in ("div", "le", "ge", "eq"):
        assert (out == 1).all()


@pytest.mark.parametrize("dtype_b", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("dtype_a", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ZIP_FNS)
def test_zip_mixed_dtypes(fn, dtype_a, dtype_b, device):
    a, b = make_pair(fn, (3, 4), "contiguous", (4,), "sliced", dtype_a, dtype_b, device)
    out = check_zip(a, b, fn)
    assert out.dtype == torch.promote_types(dtype_a, dtype_b)


def _zero_dim(value_domain, scalar_dtype, tensor_dtype, device):
    """A 0-dim tensor whose value is representable in both dtypes, so the reference does not depend
    on whether the kernel rounds the scalar to the result dtype before computing (PyTorch computes
    with the scalar's value; we avoid that ambiguity on purpose)."""
    v = make_tensor((), torch.float64, "cpu", domain=value_domain)
    return v.to(tensor_dtype).to(scalar_dtype).to(device)


@pytest.mark.parametrize("scalar_first", [True, False], ids=["scalar_first", "scalar_second"])
@pytest.mark.parametrize("tensor_dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("scalar_dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ZIP_FNS)
def test_zip_zero_dim_does_not_promote(fn, scalar_dtype, tensor_dtype, scalar_first, device):
    dom_a, dom_b = ZIP_DOMAIN[fn]
    if scalar_first:
        s = _zero_dim(dom_a, scalar_dtype, tensor_dtype, device)
        t = make_tensor((2, 5), tensor_dtype, device, "transposed", domain=dom_b)
        out = check_zip(s, t, fn)
    else:
        t = make_tensor((2, 5), tensor_dtype, device, "transposed", domain=dom_a)
        s = _zero_dim(dom_b, scalar_dtype, tensor_dtype, device)
        out = check_zip(t, s, fn)
    # the n-d operand decides: both are float dtypes, so the 0-dim one never promotes
    assert out.dtype == tensor_dtype


def test_zero_dim_float64_with_float16_gives_float16(device):
    s = torch.tensor(1.5, dtype=torch.float64, device=device)
    t = make_tensor((3, 4), torch.float16, device)
    out = torch.ops.tiles.zip(s, t, "mul")
    assert out.dtype == torch.float16
    assert_close_to_ref(out, 1.5 * t.double(), torch.float16)
    out = torch.ops.tiles.zip(t, s, "add")
    assert out.dtype == torch.float16
    assert_close_to_ref(out, t.double() + 1.5, torch.float16)


@pytest.mark.parametrize("scalar_dtype", [torch.float32, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("tensor_dtype", [torch.float16, torch.bfloat16], ids=dtype_id)
def test_wider_zero_dim_operand_is_rounded_to_the_result_dtype(tensor_dtype, scalar_dtype, device):
    # PyTorch casts every operand to the result dtype before computing: x - s is 0 and x == s holds
    # where x is s rounded to float16, though 0.1 itself is not a float16 value. (torch's mul and div
    # with the 0-dim operand second keep its unrounded value; tiles rounds it there too.)
    s = torch.tensor(0.1, dtype=scalar_dtype, device=device)
    x = torch.tensor([0.1, 0.2, -0.1], dtype=tensor_dtype, device=device)
    zip_ = torch.ops.tiles.zip
    for fn in ("sub", "eq", "le", "max", "mul", "div"):
        for a, b in ((x, s), (s, x)):
            out = zip_(a, b, fn)
            ref = ZIP_REF[fn](a.to(tensor_dtype).double().cpu(), b.to(tensor_dtype).double().cpu())
            assert_close_to_ref(out, ref, tensor_dtype, exact=fn in ZIP_EXACT)
    assert zip_(x, s, "sub")[0].item() == 0 and zip_(x, s, "eq")[0].item() == 1
    assert torch.equal(zip_(x, s, "sub"), x - s) and torch.equal(zip_(s, x, "div"), s / x)


@pytest.mark.parametrize("dtypes", [(torch.float16, torch.float64), (torch.float64, torch.bfloat16),
                                    (torch.float16, torch.bfloat16)], ids=dtype_id)
def test_two_zero_dim_tensors_promote(dtypes, device):
    a = torch.tensor(0.75, dtype=dtypes[0], device=device)
    b = torch.tensor(-2.5, dtype=dtypes[1], device=device)
    out = torch.ops.tiles.zip(a, b, "sub")
    assert out.shape == () and out.dtype == torch.promote_types(*dtypes)
    assert out.item() == 3.25


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", COMPARE_FNS)
def test_comparisons_return_one_or_zero(fn, dtype, device):
    a = make_tensor((40,), dtype, device, domain="coarse")
    b = make_tensor((40,), dtype, device, domain="coarse")
    b[:10] = a[:10]  # guaranteed ties
    out = check_zip(a, b, fn)
    assert out.dtype == dtype
    values = set(out.tolist())
    assert values <= {0.0, 1.0}
    assert values == {0.0, 1.0}  # with ties and non-ties both outcomes occur for every comparison


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_min_propagate_nan(fn, dtype, device):
    a = torch.tensor([NAN, 1.0, NAN, 2.0, -INF, 0.5, 3.0], dtype=dtype, device=device)
    b = torch.tensor([1.0, NAN, NAN, 3.0, 1.0, INF, -0.25], dtype=dtype, device=device)
    out = torch.ops.tiles.zip(a, b, fn)
    ref = (torch.maximum if fn == "max" else torch.minimum)(a, b)
    assert_close_to_ref(out, ref, exact=True)
    assert torch.isnan(out[:3]).all() and not torch.isnan(out[3:]).any()
    # and with broadcasting: a NaN scalar poisons everything
    out = torch.ops.tiles.zip(torch.tensor(NAN, dtype=dtype, device=device), b, fn)
    assert torch.isnan(out).all()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", COMPARE_FNS)
def test_comparisons_with_nan(fn, dtype, device):
    # IEEE: every ordered comparison with NaN is false, ne is true
    a = torch.tensor([NAN, 1.0, NAN, INF, -INF], dtype=dtype, device=device)
    b = torch.tensor([1.0, NAN, NAN, INF, 0.0], dtype=dtype, device=device)
    out = torch.ops.tiles.zip(a, b, fn)
    assert_close_to_ref(out, ZIP_REF[fn](a.double(), b.double()), exact=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_div_by_zero_gives_inf_like_torch(dtype, device):
    a = torch.tensor([1.0, -1.0, 0.0, 2.5, -0.0, 3.0, NAN], dtype=dtype, device=device)
    b = torch.tensor([0.0, 0.0, 0.0, -0.0, 0.0, -0.0, 0.0], dtype=dtype, device=device)
    out = torch.ops.tiles.zip(a, b, "div")
    ref = torch.div(a, b)
    assert_close_to_ref(out, ref, exact=True)
    assert out[:2].tolist() == [INF, -INF] and out[3].item() == -INF and out[5].item() == -INF
    assert torch.isnan(out[2]) and torch.isnan(out[4])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_pow_special_values(dtype, device):
    # a^0 = 1 (also 0^0), 0^positive = 0, 0^negative = inf, negative^integer is real
    a = torch.tensor([0.0, 0.0, 0.0, -2.0, -2.0, 2.0, 1.0], dtype=dtype, device=device)
    b = torch.tensor([0.0, 2.0, -1.0, 2.0, 3.0, 0.5, NAN], dtype=dtype, device=device)
    out = torch.ops.tiles.zip(a, b, "pow")
    assert_close_to_ref(out, torch.pow(a.double(), b.double()), dtype)


@pytest.mark.parametrize("fn", ["add", "pow", "ge"])
def test_zip_python_wrapper(fn, device):
    a, b = make_pair(fn, (3, 4), "permuted", (4,), "contiguous", torch.float32, torch.float32, device)
    out = torch_tiles.zip(a, b, fn)
    assert out.dtype == torch.float32 and out.shape == (3, 4)
    assert_close_to_ref(out, ZIP_REF[fn](a.double(), b.double()), torch.float32,
                        exact=fn in ZIP_EXACT)


@pytest.mark.parametrize("layouts", [("contiguous", "contiguous"), ("sliced", "permuted"),
                                     ("transposed", "expanded")], ids=lambda t: "_".join(t))
@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float32), (torch.float16, torch.float32)],
                         ids=lambda t: "_".join(map(dtype_id, t)))
def test_zip_large_is_split_across_threads(dtypes, layouts, device):
    # ~100k output elements from broadcast, strided operands: several parallel tasks on the CPU
    a = make_tensor((129, 1, 257), dtypes[0], device, layouts[0])
    b = make_tensor((3, 257), dtypes[1], device, layouts[1])
    check_zip(a, b, "sub")
    check_zip(b, a, "max")
