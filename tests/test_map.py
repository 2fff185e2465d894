"""tiles::map against PyTorch (float64 reference), over fns, dtypes, layouts and awkward shapes."""

import pytest
import torch

import torch_tiles
from helpers import (FLOAT_DTYPES, LAYOUTS, MAP_DOMAIN, MAP_FNS, MAP_REF, assert_close_to_ref,
                     assert_elementwise_layout, dtype_id, layout_is_strided, make_tensor)

# fns whose result is an input value (or its exact negation / magnitude): no rounding at all
EXACT_MAP_FNS = {"id", "neg", "abs", "relu"}

RANK25_SHAPE = (2, 1, 2, 2, 1, 2, 1, 1, 2, 2, 1, 2, 1, 2, 2, 1, 1, 2, 1, 2, 2, 1, 2, 1, 1)

SPECIAL_SHAPES = {
    "0dim": (),
    "empty_0x3": (0, 3),
    "empty_2x0x5": (2, 0, 5),
    "one_element": (1,),
    "one_element_3d": (1, 1, 1),
    "odd_1037": (1037,),
    "rank6_odd": (3, 1, 5, 2, 7, 3),
    "rank25": RANK25_SHAPE,
}


def check_map(x, fn):
    before = x.detach().clone()
    out = torch.ops.tiles.map(x, fn)
    assert out.dtype == x.dtype
    assert out.shape == x.shape
    assert out.device == x.device
    assert_elementwise_layout(out, x)  # x's strides when x is dense, else contiguous
    # reference on a flat copy: some PyTorch kernels reject very high ranks
    ref = MAP_REF[fn](x.detach().double().cpu().reshape(-1)).reshape(x.shape)
    assert_close_to_ref(out, ref, x.dtype, exact=fn in EXACT_MAP_FNS,
                        msg=lambda m: f"map {fn!r} {x.dtype} shape={tuple(x.shape)} "
                                      f"strides={x.stride()}:\n{m}")
    # the input (a view into possibly shared storage) is untouched
    torch.testing.assert_close(x.detach(), before, rtol=0, atol=0, equal_nan=True)
    return out


def test_fn_names_match_readme():
    assert isinstance(torch_tiles.MAP_FNS, tuple)
    assert sorted(torch_tiles.MAP_FNS) == sorted(MAP_FNS)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_layouts(fn, dtype, layout, device):
    x = make_tensor((5, 6, 7), dtype, device, layout, domain=MAP_DOMAIN[fn])
    # every non-contiguous layout really is strided (all sizes > 1)
    assert layout_is_strided(x) == (layout != "contiguous")
    check_map(x, fn)


@pytest.mark.parametrize("shape", SPECIAL_SHAPES.values(), ids=SPECIAL_SHAPES.keys())
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_special_shapes(fn, dtype, shape, device):
    x = make_tensor(shape, dtype, device, domain=MAP_DOMAIN[fn])
    check_map(x, fn)


@pytest.mark.parametrize("layout", ["permuted", "sliced", "expanded", "transposed"])
@pytest.mark.parametrize("shape", [SPECIAL_SHAPES["rank6_odd"], RANK25_SHAPE, (2, 0, 5), (1037, 3)],
                         ids=["rank6_odd", "rank25", "empty_2x0x5", "1037x3"])
@pytest.mark.parametrize("fn", ["exp", "gelu", "neg", "sqrt"])
def test_map_special_shapes_strided(fn, shape, layout, device):
    x = make_tensor(shape, torch.float32, device, layout, domain=MAP_DOMAIN[fn])
    check_map(x, fn)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_map_zero_dim_strided_view(dtype, device):
    # a 0-dim view at a non-zero storage offset (x[1] of a vector)
    x = make_tensor((), dtype, device, "sliced", domain="positive")
    assert x.storage_offset() != 0
    check_map(x, "log")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_relu_propagates_nan(dtype, device):
    x = torch.tensor([float("nan"), -1.0, 0.0, 2.0, float("nan"), -float("inf"), float("inf")],
                     dtype=dtype, device=device)
    out = torch.ops.tiles.map(x, "relu")
    assert_close_to_ref(out, torch.relu(x.double()), exact=True)
    assert torch.isnan(out[0]) and torch.isnan(out[4])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_propagates_nan(fn, dtype, device):
    # NaN in -> NaN out, and the NaN does not leak into the neighbours
    x = make_tensor((9,), dtype, device, domain=MAP_DOMAIN[fn])
    x[4] = float("nan")
    out = torch.ops.tiles.map(x, fn)
    assert torch.isnan(out[4])
    assert_close_to_ref(out, MAP_REF[fn](x.double()), dtype, exact=fn in EXACT_MAP_FNS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_map_special_values(dtype, device):
    # log(0) = -inf, log(-1) = nan, sqrt(-1) = nan, inv(0) = inf, inv(-0) = -inf, exp(-inf) = 0
    cases = {
        "log": [0.0, -1.0, float("inf")],
        "sqrt": [-1.0, 0.0, float("inf")],
        "inv": [0.0, -0.0, float("inf")],
        "exp": [-float("inf"), float("inf"), 0.0],
        "sigmoid": [-float("inf"), float("inf"), 0.0],
        "tanh": [-float("inf"), float("inf"), 0.0],
    }
    for fn, vals in cases.items():
        x = torch.tensor(vals, dtype=dtype, device=device)
        out = torch.ops.tiles.map(x, fn)
        assert_close_to_ref(out, MAP_REF[fn](x.double()), dtype,
                            msg=lambda m: f"map {fn!r} on {vals}:\n{m}")
    # the sign of inv(+-0) matters
    out = torch.ops.tiles.map(torch.tensor([0.0, -0.0], dtype=dtype, device=device), "inv")
    assert out.tolist() == [float("inf"), -float("inf")]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_erf_and_gelu_over_their_range(dtype, layout, device):
    # A dense sweep through each range of erf's evaluation (the CPU's float lanes: a series below 1,
    # 1 - erfc up to 4, +-1 past it; gelu's tail through erfc below -sqrt(2)), with the values at
    # the seams and the special values, forward and through the backward kernel, against float64.
    sweep = torch.linspace(-12, 12, 24001, dtype=torch.float64)
    seams = torch.tensor([1.0, 4.0, 2 ** 0.5, 4 * 2 ** 0.5, 1e-30, 0.0, -0.0], dtype=torch.float64)
    special = torch.tensor([float("inf"), -float("inf"), float("nan")], dtype=torch.float64)
    values = torch.cat([sweep, seams, -seams, special])
    x64 = torch.cat([values, torch.zeros(-len(values) % 60, dtype=torch.float64)]).reshape(-1, 60)
    x = make_tensor(x64.shape, dtype, device, layout)
    x.copy_(x64)
    g = make_tensor(x.shape, dtype, device, layout)
    xd, gd = x.double().cpu(), g.double().cpu()
    gelu_grad = gd * (0.5 * (1 + torch.erf(xd / 2 ** 0.5)) + xd * torch.exp(-xd * xd / 2) / (2 * torch.pi) ** 0.5)
    for fn, ref, grad_ref in [("erf", torch.erf(xd), gd * 2 / torch.pi ** 0.5 * torch.exp(-xd * xd)),
                              ("gelu", torch.nn.functional.gelu(xd), gelu_grad)]:
        assert_close_to_ref(torch.ops.tiles.map(x, fn), ref, dtype, msg=lambda m: f"map {fn}:\n{m}")
        assert_close_to_ref(torch.ops.tiles._map_backward(g, x, fn), grad_ref, dtype,
                            msg=lambda m: f"_map_backward {fn}:\n{m}")


@pytest.mark.parametrize("fn", ["exp", "relu", "gelu"])
def test_map_python_wrapper(fn, device):
    x = make_tensor((4, 3), torch.float32, device, "transposed", domain=MAP_DOMAIN[fn])
    out = torch_tiles.map(x, fn)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert_close_to_ref(out, MAP_REF[fn](x.double()), torch.float32, exact=fn == "relu")


def test_map_result_is_a_new_tensor(device):
    # "return a new contiguous tensor": even id on a contiguous input must not alias the input
    x = make_tensor((4, 5), torch.float32, device)
    out = torch.ops.tiles.map(x, "id")
    assert out.data_ptr() != x.data_ptr()
    out.add_(1)
    assert_close_to_ref(out, x.double() + 1, torch.float32)


@pytest.mark.parametrize("layout", ["contiguous", "permuted", "sliced", "expanded", "transposed"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=dtype_id)
def test_map_large_is_split_across_threads(dtype, layout, device):
    # ~100k elements: big enough that the CPU kernel splits it into several parallel tasks, so the
    # strided walk starts in the middle of a row
    x = make_tensor((3, 129, 257), dtype, device, layout)
    check_map(x, "exp")
