"""Every error of README's "Errors" section: a RuntimeError naming the op and the problem; afterwards
the op still works."""

import re

import pytest
import torch

import torch_tiles
from conftest import requires_cuda
from helpers import MAP_FNS, REDUCE_FNS, ZIP_FNS, assert_close_to_ref, assert_reduce_close, make_tensor

ops = torch.ops.tiles

BAD_DTYPES = {
    torch.int32: r"int32|\bInt\b|int",
    torch.int64: r"int64|\bLong\b|long",
    torch.bool: r"bool",
    torch.complex64: r"complex64|ComplexFloat|complex",
}


def check_message(excinfo, *patterns):
    """Every regex (case-insensitive) must occur in the error message."""
    msg = str(excinfo.value)
    for pattern in patterns:
        assert re.search(pattern, msg, re.IGNORECASE), f"{pattern!r} not found in error message:\n{msg}"


# valid calls, checked against PyTorch, run after each error to show the op still works
def still_works_map(device):
    x = make_tensor((3, 4), torch.float32, device, "transposed")
    assert_close_to_ref(ops.map(x, "exp"), torch.exp(x.double()))


def still_works_zip(device):
    a = make_tensor((3, 4), torch.float32, device)
    b = make_tensor((4,), torch.float32, device)
    assert_close_to_ref(ops.zip(a, b, "mul"), a.double() * b.double())


def still_works_reduce(device):
    x = make_tensor((3, 4, 5), torch.float32, device, "permuted")
    assert_reduce_close(ops.reduce(x, [0, 2], "max"), x, [0, 2], "max")
    assert_reduce_close(ops.reduce(x, [1], "sum", keepdim=True), x, [1], "sum", True)


def still_works_bmm(device):
    a = make_tensor((2, 3, 4), torch.float32, device)
    b = make_tensor((2, 4, 5), torch.float32, device)
    assert_close_to_ref(ops.bmm(a, b), torch.matmul(a.double(), b.double()))


STILL_WORKS = {"map": still_works_map, "zip": still_works_zip, "reduce": still_works_reduce,
               "bmm": still_works_bmm}


def f32(shape, device, layout="contiguous"):
    return make_tensor(shape, torch.float32, device, layout)


# ----------------------------------------------------------------------------------- unknown fn

UNKNOWN_FN_CALLS = {
    "map": (lambda d: ops.map(f32((3,), d), "bogus_fn"), MAP_FNS),
    "zip": (lambda d: ops.zip(f32((3,), d), f32((3,), d), "bogus_fn"), ZIP_FNS),
    "reduce": (lambda d: ops.reduce(f32((3,), d), None, "bogus_fn"), REDUCE_FNS),
}


@pytest.mark.parametrize("op_name", UNKNOWN_FN_CALLS)
def test_unknown_fn_lists_valid_names(op_name, device):
    call, valid = UNKNOWN_FN_CALLS[op_name]
    with pytest.raises(RuntimeError, match=op_name) as excinfo:
        call(device)
    # the problem (the bad name or the argument "fn") and every valid name are in the message
    check_message(excinfo, r"bogus_fn|\bfn\b", *[rf"\b{name}\b" for name in valid])
    STILL_WORKS[op_name](device)


@pytest.mark.parametrize("op_name, bad", [("map", "Exp"), ("map", ""), ("zip", "maximum"),
                                          ("reduce", "amax")])
def test_near_miss_fn_names_are_rejected(op_name, bad, device):
    x = f32((2, 3), device)
    with pytest.raises(RuntimeError, match=op_name):
        if op_name == "map":
            ops.map(x, bad)
        elif op_name == "zip":
            ops.zip(x, x, bad)
        else:
            ops.reduce(x, None, bad)
    STILL_WORKS[op_name](device)


def test_fn_of_another_op_is_rejected(device):
    # a zip fn is not a map fn and vice versa; "max" is valid for zip and reduce but not map
    x = f32((2, 3), device)
    with pytest.raises(RuntimeError, match="map"):
        ops.map(x, "add")
    with pytest.raises(RuntimeError, match="map"):
        ops.map(x, "max")
    with pytest.raises(RuntimeError, match="zip"):
        ops.zip(x, x, "exp")
    with pytest.raises(RuntimeError, match="reduce"):
        ops.reduce(x, None, "add")


# -------------------------------------------------------------------------------- non-float dtypes

def _bad_tensor(dtype, shape, device):
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype, device=device)
    return torch.arange(1, 1 + torch.Size(shape).numel(), device=device).reshape(shape).to(dtype)


BAD_DTYPE_CALLS = {
    "map": lambda bad, d: ops.map(bad((3, 4)), "exp"),
    "zip_both": lambda bad, d: ops.zip(bad((3, 4)), bad((3, 4)), "add"),
    "zip_first": lambda bad, d: ops.zip(bad((3, 4)), f32((3, 4), d), "add"),
    "zip_second": lambda bad, d: ops.zip(f32((3, 4), d), bad((4,)), "mul"),
    "reduce": lambda bad, d: ops.reduce(bad((3, 4)), [0], "sum"),
    "bmm_both": lambda bad, d: ops.bmm(bad((2, 3)), bad((3, 4))),
}


@pytest.mark.parametrize("call_name", BAD_DTYPE_CALLS)
@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=lambda t: str(t).replace("torch.", ""))
def test_non_float_dtype(dtype, call_name, device):
    op_name = call_name.split("_")[0]
    bad = lambda shape: _bad_tensor(dtype, shape, device)  # noqa: E731
    with pytest.raises(RuntimeError, match=op_name) as excinfo:
        BAD_DTYPE_CALLS[call_name](bad, device)
    check_message(excinfo, rf"dtype|float|{BAD_DTYPES[dtype]}")
    STILL_WORKS[op_name](device)


def test_bmm_float_with_int_is_rejected(device):
    with pytest.raises(RuntimeError, match="bmm"):
        ops.bmm(f32((2, 3), device), _bad_tensor(torch.int64, (3, 4), device))
    still_works_bmm(device)


# ------------------------------------------------------------------------------------- devices

@requires_cuda
@pytest.mark.parametrize("op_name", ["zip", "bmm"])
def test_inputs_on_different_devices(op_name):
    a = f32((3, 3), "cpu")
    b = f32((3, 3), "cuda")
    for x, y in [(a, b), (b, a)]:
        with pytest.raises(RuntimeError, match=op_name) as excinfo:
            if op_name == "zip":
                ops.zip(x, y, "add")
            else:
                ops.bmm(x, y)
        check_message(excinfo, r"device|cuda|cpu")
    STILL_WORKS[op_name]("cuda")
    STILL_WORKS[op_name]("cpu")


@requires_cuda
def test_zero_dim_cpu_tensor_with_cuda_tensor_is_rejected():
    # README: the inputs of an op must be on one device (no CPU-scalar exception)
    with pytest.raises(RuntimeError, match="zip"):
        ops.zip(torch.tensor(2.0), f32((3,), "cuda"), "mul")
    still_works_zip("cuda")


# ----------------------------------------------------------------------------------- broadcast

@pytest.mark.parametrize("shapes", [((2, 3), (4, 5)), ((2, 3), (2, 4)), ((3, 2, 3), (2, 3, 3)),
                                    ((0, 3), (2, 3))],
                         ids=["2x3_4x5", "2x3_2x4", "3x2x3_2x3x3", "0x3_2x3"])
def test_shapes_that_do_not_broadcast(shapes, device):
    a = f32(shapes[0], device)
    b = f32(shapes[1], device)
    with pytest.raises(RuntimeError, match="zip") as excinfo:
        ops.zip(a, b, "add")
    # both shapes appear, in whatever bracket style: "[2, 3]", "(2, 3)", "2x3" ...
    shape_patterns = [r"\D*".join(str(s) for s in shape) for shape in shapes]
    check_message(excinfo, *shape_patterns)
    still_works_zip(device)


# ----------------------------------------------------------------------------------------- bmm

@pytest.mark.parametrize("shapes", [((4,), (4, 5)), ((3, 4), (4,)), ((2, 2, 3, 4), (2, 2, 4, 5)),
                                    ((2, 3, 4), (1, 2, 4, 5)), ((), (4, 5))],
                         ids=["a_1d", "b_1d", "both_4d", "b_4d", "a_0d"])
def test_bmm_rank(shapes, device):
    with pytest.raises(RuntimeError, match="bmm") as excinfo:
        ops.bmm(f32(shapes[0], device), f32(shapes[1], device))
    check_message(excinfo, r"2-?d|3-?d|dim|rank")
    still_works_bmm(device)


@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 5, 6)), ((3, 4), (5, 6)), ((3, 4), (2, 3, 6)),
                                    ((2, 3, 0), (2, 1, 6))],
                         ids=["3d", "2d", "2d_3d", "K0_vs_K1"])
def test_bmm_inner_size_mismatch(shapes, device):
    with pytest.raises(RuntimeError, match="bmm") as excinfo:
        ops.bmm(f32(shapes[0], device), f32(shapes[1], device))
    check_message(excinfo, r"inner|match|size|\bK\b|shape")
    still_works_bmm(device)


@pytest.mark.parametrize("shapes", [((2, 3, 4), (3, 4, 5)), ((3, 3, 4), (2, 4, 5)), ((0, 3, 4), (2, 4, 5))],
                         ids=["2_vs_3", "3_vs_2", "0_vs_2"])
def test_bmm_batch_mismatch(shapes, device):
    with pytest.raises(RuntimeError, match="bmm") as excinfo:
        ops.bmm(f32(shapes[0], device), f32(shapes[1], device))
    check_message(excinfo, r"batch")
    still_works_bmm(device)


@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float64), (torch.float16, torch.bfloat16),
                                    (torch.float64, torch.float16)],
                         ids=lambda t: str(t).replace("torch.", ""))
def test_bmm_dtype_mismatch(dtypes, device):
    a = make_tensor((2, 3, 4), dtypes[0], device)
    b = make_tensor((2, 4, 5), dtypes[1], device)
    with pytest.raises(RuntimeError, match="bmm") as excinfo:
        ops.bmm(a, b)
    check_message(excinfo, r"dtype|float|double|half|bfloat|type")
    still_works_bmm(device)


# -------------------------------------------------------------------------------------- reduce

@pytest.mark.parametrize("dim", [[2], [-3], [0, 5], [100]], ids=["2", "-3", "0_and_5", "100"])
def test_reduce_dim_out_of_range(dim, device):
    with pytest.raises(RuntimeError, match="reduce") as excinfo:
        ops.reduce(f32((3, 4), device), dim, "sum")
    check_message(excinfo, r"dim", r"range|out of|invalid|bound")
    still_works_reduce(device)


@pytest.mark.parametrize("dim", [[1], [-2]], ids=["1", "-2"])
def test_reduce_dim_out_of_range_on_zero_dim(dim, device):
    # a 0-dim tensor accepts only 0 / -1 (as in PyTorch)
    with pytest.raises(RuntimeError, match="reduce"):
        ops.reduce(torch.tensor(1.5, device=device), dim, "sum")
    still_works_reduce(device)


@pytest.mark.parametrize("shape_dim", [((3, 4), [0, 0]), ((3, 4), [1, -1]), ((3, 4), [0, -2]),
                                       ((3, 4, 5), [1, -2]), ((3, 4, 5), [0, 1, 0]),
                                       ((3, 4, 5), [2, 0, -1])],
                         ids=["2d_0_0", "2d_1_-1", "2d_0_-2", "3d_1_-2", "3d_0_1_0", "3d_2_0_-1"])
def test_reduce_repeated_dim(shape_dim, device):
    shape, dim = shape_dim
    with pytest.raises(RuntimeError, match="reduce") as excinfo:
        ops.reduce(f32(shape, device), dim, "mean")
    check_message(excinfo, r"dim", r"repeat|duplicate|twice|more than once|appears|multiple|unique")
    still_works_reduce(device)


def test_reduce_minus_two_on_2d_is_not_a_repeat(device):
    # on a 2-D tensor, [1, -2] means dims 1 and 0: distinct, so valid
    x = f32((3, 4), device)
    assert_reduce_close(ops.reduce(x, [1, -2], "sum"), x, [1, -2], "sum")


@pytest.mark.parametrize("fn", ["max", "min"])
def test_reduce_max_min_over_empty_dim(fn, device):
    with pytest.raises(RuntimeError, match="reduce") as excinfo:
        ops.reduce(f32((0, 3), device), [0], fn)
    check_message(excinfo, r"empty|zero|no elements|size 0|0 elements|identity|numel")
    still_works_reduce(device)


# ------------------------------------------------------------------------------ too many dims

def _unmergeable_26d(device):
    """A [2] * 26 tensor (as a stride-0 view, so no 2^26-element allocation) in which no two
    adjacent dims can merge: strides alternate between real strides and 0."""
    base = make_tensor((2 ** 13,), torch.float32, device)
    strides, real = [], 2 ** 12
    for i in range(26):
        if i % 2 == 0:
            strides.append(real)
            real //= 2
        else:
            strides.append(0)
    return base.as_strided([2] * 26, strides)


def test_more_than_25_unmergeable_dims_map(device):
    x = _unmergeable_26d(device)
    with pytest.raises(RuntimeError, match="map") as excinfo:
        ops.map(x, "neg")
    check_message(excinfo, r"25|dim")
    still_works_map(device)


def test_more_than_25_unmergeable_dims_zip(device):
    x = _unmergeable_26d(device)
    with pytest.raises(RuntimeError, match="zip") as excinfo:
        ops.zip(x, x, "add")
    check_message(excinfo, r"25|dim")
    still_works_zip(device)


def test_more_than_25_unmergeable_dims_reduce_all(device):
    x = _unmergeable_26d(device)
    with pytest.raises(RuntimeError, match="reduce") as excinfo:
        ops.reduce(x, None, "sum")
    check_message(excinfo, r"25|dim")
    still_works_reduce(device)


def test_26_dims_that_merge_are_fine(device):
    # contiguous: all 26 dims merge into one
    x = make_tensor([2] * 5 + [1] * 21, torch.float32, device)
    y = make_tensor((1, 2) * 13, torch.float32, device)
    for t in (x, y):
        assert t.dim() == 26
        assert_close_to_ref(ops.map(t, "exp"), torch.exp(t.double()))
        assert_close_to_ref(ops.zip(t, t, "mul"), t.double() * t.double())


# ------------------------------------------------------------------------------------ wrappers

def test_python_wrappers_raise_runtime_error(device):
    x = f32((2, 3), device)
    with pytest.raises(RuntimeError, match="map"):
        torch_tiles.map(x, "bogus_fn")
    with pytest.raises(RuntimeError, match="zip"):
        torch_tiles.zip(x, f32((4,), device), "add")
    with pytest.raises(RuntimeError, match="reduce"):
        torch_tiles.reduce(x, 2, "sum")
    with pytest.raises(RuntimeError, match="bmm"):
        torch_tiles.bmm(x, f32((4, 3), device))
    still_works_map(device)


# ----------------------------------------------------------------------- the internal cross entropy

@pytest.mark.parametrize("logits_shape, target, pattern", [
    ((2, 3, 4), [0, 1], r"'logits' must be 2-D"),
    ((3,), [0, 1, 2], r"'logits' must be 2-D"),
    ((3, 4), [0, 1], r"'target' must be 1-D with one class index per row"),
    ((3, 0), [0, 1, 2], r"'logits' has no classes"),
    ((3, 4), [[0], [1], [2]], r"'target' must be 1-D"),
    ((3, 4), [0.0, 1.0, 2.0], r"'target' must hold integer class indices"),
    ((3, 4), [True, False, True], r"'target' must hold integer class indices"),
], ids=["3d", "1d", "short_target", "no_classes", "2d_target", "float_target", "bool_target"])
def test_cross_entropy_op_rejects_bad_arguments(logits_shape, target, pattern, device):
    logits = f32(logits_shape, device)
    with pytest.raises(RuntimeError, match="tiles::_cross_entropy") as excinfo:
        ops._cross_entropy(logits, torch.tensor(target, device=device))
    check_message(excinfo, pattern)
    for dtype in (torch.int32, torch.float8_e4m3fn):
        with pytest.raises(RuntimeError, match=r"tiles::_cross_entropy.*'logits' has dtype .*expected a float"):
            ops._cross_entropy(torch.zeros(3, 4, device=device).to(dtype), torch.zeros(3, dtype=torch.long,
                                                                                       device=device))
    rows = ops._cross_entropy(f32((3, 4), device), torch.tensor([0, 3, 1], device=device))
    assert rows.shape == (3,)


@requires_cuda
def test_cross_entropy_op_rejects_a_target_on_another_device():
    with pytest.raises(RuntimeError, match=r"tiles::_cross_entropy.*same device, got cuda:0 and cpu"):
        ops._cross_entropy(f32((3, 4), "cuda"), torch.tensor([0, 1, 2]))
