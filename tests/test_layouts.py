"""Output layouts of tiles::map and tiles::zip (README "API"), against PyTorch's own ops.

The rule: map(x) returns a tensor with x's strides when x is non-overlapping and dense, else a
contiguous one; zip(a, b) takes the strides of the first of (a, b) that has the broadcast shape and is
non-overlapping and dense, else contiguous strides. This is what PyTorch's TensorIterator does in the
common cases (torch.exp(x.t()) is laid out like x.t()), so the kernels stream memory in order instead
of transposing. The cases below compare our strides with torch.exp / torch.add / torch.sub on the same
inputs; where the rule deliberately differs from PyTorch, the case says why and asserts the rule.
Every case also checks values, the fake (meta) kernel's strides and, on CUDA, which kernel runs.
"""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from conftest import requires_cuda
from helpers import (FLOAT_DTYPES, assert_close_to_ref, cuda_kernel_names, dtype_id, elementwise_out_strides,
                     is_dense, rand_values)

T = torch.ops.tiles


def _r(shape, dtype, device):
    return rand_values(shape).to(dtype).to(device)


def _other(dtype):
    """A second float dtype for mixed-dtype cases (the result dtype is the wider one)."""
    return torch.float64 if dtype != torch.float64 else torch.float16


# ---- cases ---------------------------------------------------------------------------------------
# Each case: (builder(dtype, device) -> inputs, which input gives the output its strides, or
# "contiguous", and why PyTorch lays the output out differently, or None where it agrees).

MAP_CASES = {
    "contiguous": (lambda d, dev: _r((3, 4, 5), d, dev), "x", None),
    "transposed": (lambda d, dev: _r((5, 7), d, dev).t(), "x", None),
    "permuted_3d": (lambda d, dev: _r((3, 4, 5), d, dev).permute(2, 0, 1), "x", None),
    "permuted_4d": (lambda d, dev: _r((2, 3, 4, 5), d, dev).permute(3, 1, 0, 2), "x", None),
    "channels_last": (lambda d, dev: _r((2, 3, 4, 5), d, dev).contiguous(memory_format=torch.channels_last),
                      "x", None),
    # dense at a storage offset of 1: the output has x's strides and starts at its own storage's start
    "dense_at_offset": (lambda d, dev: _r((41,), d, dev)[1:].view(5, 8).t(), "x", None),
    "sliced": (lambda d, dev: _r((6, 10), d, dev)[:, ::2], "contiguous", None),
    "expanded": (lambda d, dev: _r((1, 5), d, dev).expand(4, 5), "contiguous", None),
    "sliced_transposed": (
        lambda d, dev: _r((10, 6), d, dev)[::2].t(), "contiguous",
        "PyTorch orders the output's dims by the strides of non-dense inputs too (here column-major); "
        "the rule copies only a dense input's strides, so a non-dense one gives a contiguous output"),
    "zero_dim": (lambda d, dev: _r((), d, dev), "x", None),
    "one_element": (lambda d, dev: _r((1, 1, 1), d, dev), "x", None),
    "empty": (lambda d, dev: _r((0, 3), d, dev), "x", None),
    "empty_transposed": (
        lambda d, dev: _r((3, 0), d, dev).t(), "x",
        "an empty tensor counts as non-overlapping and dense, so the rule copies its strides; PyTorch "
        "gives an empty output contiguous strides (there is no element to lay out either way)"),
    "size_one_dims": (lambda d, dev: _r((3, 1, 4), d, dev), "x", None),
    "size_one_dims_permuted": (lambda d, dev: _r((4, 1, 3), d, dev).permute(2, 1, 0), "x", None),
    "size_one_transposed": (
        lambda d, dev: _r((1, 5), d, dev).t(), "x",
        "shape [5, 1] with strides (1, 5) is contiguous up to the stride of its size-1 dim, which the "
        "rule copies as it is; PyTorch gives a contiguous input's output canonical strides (1, 1). The "
        "stride of a size-1 dim never addresses memory, so only the reported number differs"),
}

# zip: builder(dtype, device) -> (a, b)
ZIP_CASES = {
    "contiguous_both": (lambda d, dev: (_r((4, 5), d, dev), _r((4, 5), d, dev)), "a", None),
    "contiguous_plus_transposed": (lambda d, dev: (_r((4, 5), d, dev), _r((5, 4), d, dev).t()), "a", None),
    "transposed_plus_contiguous": (lambda d, dev: (_r((5, 4), d, dev).t(), _r((4, 5), d, dev)), "a", None),
    "both_transposed": (lambda d, dev: (_r((5, 4), d, dev).t(), _r((5, 4), d, dev).t()), "a", None),
    "permuted_3d_pair": (lambda d, dev: (_r((3, 4, 5), d, dev).permute(2, 0, 1),
                                         _r((4, 5, 3), d, dev).permute(1, 2, 0)), "a", None),
    "row_plus_transposed": (lambda d, dev: (_r((5,), d, dev), _r((5, 4), d, dev).t()), "b", None),
    "column_plus_transposed": (lambda d, dev: (_r((4, 1), d, dev), _r((5, 4), d, dev).t()), "b", None),
    "zero_dim_plus_transposed": (lambda d, dev: (_r((), d, dev), _r((5, 4), d, dev).t()), "b", None),
    "transposed_plus_zero_dim": (lambda d, dev: (_r((5, 4), d, dev).t(), _r((), d, dev)), "a", None),
    "expanded_plus_transposed": (lambda d, dev: (_r((1, 5), d, dev).expand(4, 5), _r((5, 4), d, dev).t()),
                                 "b", None),
    "sliced_plus_transposed": (
        lambda d, dev: (_r((4, 10), d, dev)[:, ::2], _r((5, 4), d, dev).t()), "b",
        "PyTorch orders the output's dims by a's strides first, though a is not dense (row-major here); "
        "the rule passes over a non-dense operand to the first dense one of the full shape"),
    "sliced_plus_sliced": (lambda d, dev: (_r((4, 10), d, dev)[:, ::2], _r((8, 5), d, dev)[::2]),
                           "contiguous", None),
    "sliced_transposed_plus_sliced": (
        lambda d, dev: (_r((10, 4), d, dev)[::2].t(), _r((4, 10), d, dev)[:, ::2]), "contiguous",
        "neither operand is dense, so the rule gives contiguous strides; PyTorch follows a's "
        "(column-major) order of dims"),
    "broadcast_both_ways": (lambda d, dev: (_r((3, 1, 5), d, dev), _r((4, 1), d, dev)), "contiguous", None),
    "channels_last_plus_bias": (
        lambda d, dev: (_r((2, 3, 4, 5), d, dev).contiguous(memory_format=torch.channels_last),
                        _r((3, 1, 1), d, dev)), "a", None),
    "contiguous_plus_channels_last": (
        lambda d, dev: (_r((2, 3, 4, 5), d, dev),
                        _r((2, 3, 4, 5), d, dev).contiguous(memory_format=torch.channels_last)), "a", None),
    "mixed_dtypes_transposed_first": (lambda d, dev: (_r((5, 4), d, dev).t(), _r((4, 5), _other(d), dev)),
                                      "a", None),
    "mixed_dtypes_transposed_second": (lambda d, dev: (_r((4, 5), d, dev), _r((5, 4), _other(d), dev).t()),
                                       "a", None),
    "mixed_dtypes_row_plus_transposed": (lambda d, dev: (_r((5,), _other(d), dev), _r((5, 4), d, dev).t()),
                                         "b", None),
    "zero_dim_both": (lambda d, dev: (_r((), d, dev), _r((), d, dev)), "a", None),
    "empty_row_broadcast": (lambda d, dev: (_r((0, 3), d, dev), _r((3,), d, dev)), "a", None),
    "empty_transposed_plus_row": (
        lambda d, dev: (_r((3, 0), d, dev).t(), _r((3,), d, dev)), "a",
        "an empty a counts as dense, so the rule copies its strides; PyTorch gives empty outputs "
        "contiguous strides"),
    "size_one_dims": (
        lambda d, dev: (_r((3, 1, 4), d, dev), _r((4, 1, 3), d, dev).permute(2, 1, 0)), "a",
        "only the stride of the size-1 dim differs: the rule copies a's (4), PyTorch derives one from "
        "b's order of dims (12); the stride of a size-1 dim never addresses memory"),
    "size_one_dims_permuted_first": (
        lambda d, dev: (_r((4, 1, 3), d, dev).permute(2, 1, 0), _r((3, 1, 4), d, dev)), "a", None),
}


def _expected_strides(out, named_inputs, source):
    if source == "contiguous":
        return tuple(torch.empty(out.shape, device="meta").stride())
    return tuple(named_inputs[source].stride())


def _fake_out(op, *args):
    with FakeTensorMode() as mode:
        return op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])


def _check_layout(out, ref, named_inputs, source, torch_differs, fake):
    expected = _expected_strides(out, named_inputs, source)
    assert tuple(out.stride()) == expected, (tuple(out.stride()), expected)
    # the case's expectation is README's rule (helpers.elementwise_out_strides, written independently)
    assert expected == elementwise_out_strides(out.shape, *named_inputs.values())
    assert out.storage_offset() == 0 and is_dense(out)
    if torch_differs is None:
        assert tuple(out.stride()) == tuple(ref.stride()), (
            f"ours {tuple(out.stride())}, PyTorch's {tuple(ref.stride())}")
    # the fake kernel (torch.compile, opcheck) predicts the real strides
    assert fake.shape == out.shape and fake.dtype == out.dtype
    assert tuple(fake.stride()) == tuple(out.stride()), (tuple(fake.stride()), tuple(out.stride()))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", MAP_CASES.values(), ids=MAP_CASES.keys())
def test_map_layout(case, dtype, device):
    build, source, torch_differs = case
    x = build(dtype, device)
    out = T.map(x, "exp")
    _check_layout(out, torch.exp(x), {"x": x}, source, torch_differs, _fake_out(T.map, x, "exp"))
    assert_close_to_ref(out, torch.exp(x.double().cpu()), dtype)


@pytest.mark.parametrize("fn", ["add", "sub"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", ZIP_CASES.values(), ids=ZIP_CASES.keys())
def test_zip_layout(case, dtype, fn, device):
    build, source, torch_differs = case
    a, b = build(dtype, device)
    out = T.zip(a, b, fn)
    ref_op = {"add": torch.add, "sub": torch.sub}[fn]
    ref = ref_op(a, b)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    _check_layout(out, ref, {"a": a, "b": b}, source, torch_differs, _fake_out(T.zip, a, b, fn))
    # (sub: swapped operands or mispermuted strides show up in the values)
    assert_close_to_ref(out, ref_op(a.double().cpu(), b.double().cpu()), out.dtype)


# ---- random layouts: real strides == rule == fake strides ------------------------------------------

@st.composite
def layouts(draw, shape):
    """A view of ``shape`` over a random storage order, with some dims stepped by 2 and some size-1
    storage dims expanded: dense, sliced, overlapping or a mix."""
    rank = len(shape)
    perm = draw(st.permutations(range(rank)))
    steps = draw(st.lists(st.sampled_from([1, 1, 2]), min_size=rank, max_size=rank))
    expand = draw(st.lists(st.sampled_from([False, False, False, True]), min_size=rank, max_size=rank))
    sizes = [1 if expand[p] else shape[p] for p in perm]
    storage = torch.randn([n * s for n, s in zip(sizes, steps)], dtype=torch.float64)
    view = storage[tuple(slice(None, None, s) for s in steps)]
    return view.permute([perm.index(i) for i in range(rank)]).expand(shape)


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), shape=shapes)
def test_random_layouts_follow_the_rule(data, shape, device):
    x = data.draw(layouts(shape)).to(device)
    out = T.map(x, "neg")
    assert tuple(out.stride()) == elementwise_out_strides(shape, x)
    assert tuple(_fake_out(T.map, x, "neg").stride()) == tuple(out.stride())
    torch.testing.assert_close(out.cpu(), -x.cpu(), rtol=0, atol=0)
    # b: the same shape, or a suffix of it with some dims set to 1 (broadcast)
    rank_b = data.draw(st.integers(0, len(shape)))
    shape_b = tuple(1 if data.draw(st.booleans()) else n for n in shape[len(shape) - rank_b:])
    b = data.draw(layouts(shape_b)).to(device)
    for a_, b_ in ((x, b), (b, x)):
        out = T.zip(a_, b_, "sub")
        assert tuple(out.stride()) == elementwise_out_strides(out.shape, a_, b_)
        assert tuple(_fake_out(T.zip, a_, b_, "sub").stride()) == tuple(out.stride())
        torch.testing.assert_close(out.cpu(), a_.cpu() - b_.cpu(), rtol=0, atol=0)


# ---- opcheck, torch.compile and autograd on non-contiguous layouts -------------------------------

def _leaf(t):
    return t.detach().requires_grad_(True)


OPCHECK_CASES = {
    "map_transposed": lambda dev: (T.map.default, (_leaf(_r((5, 7), torch.float64, dev).t()), "sigmoid")),
    "map_permuted_4d": lambda dev: (T.map.default,
                                    (_leaf(_r((2, 3, 4, 5), torch.float32, dev).permute(3, 1, 0, 2)), "exp")),
    "map_empty_transposed": lambda dev: (T.map.default, (_leaf(_r((3, 0), torch.float64, dev).t()), "exp")),
    "zip_transposed_first": lambda dev: (T.zip.default, (_leaf(_r((5, 4), torch.float64, dev).t()),
                                                         _leaf(_r((4, 5), torch.float64, dev)), "mul")),
    "zip_row_plus_transposed": lambda dev: (T.zip.default, (_leaf(_r((5,), torch.float32, dev)),
                                                            _leaf(_r((5, 4), torch.float64, dev).t()), "div")),
    "zip_channels_last_bias": lambda dev: (
        T.zip.default, (_leaf(_r((2, 3, 4, 5), torch.float32, dev).contiguous(memory_format=torch.channels_last)),
                        _leaf(_r((3, 1, 1), torch.float32, dev)), "add")),
}


@pytest.mark.parametrize("build", OPCHECK_CASES.values(), ids=OPCHECK_CASES.keys())
def test_opcheck_layouts(build, device):
    op, args = build(device)
    torch.library.opcheck(op, args)


def _chain(x, y, bias):
    """map and zip on non-contiguous layouts, each output feeding the next op."""
    e = T.map(x, "exp")                 # x's layout
    z = T.zip(e, y, "mul")              # e's layout
    s = T.zip(bias, z, "add")           # z's layout (bias is a broadcast row)
    return T.reduce(T.map(s, "tanh"), [0], "sum")


def _chain_torch(x, y, bias):
    return torch.tanh(bias + torch.exp(x) * y).sum(0)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_transposed_inputs(dynamic, device):
    torch._dynamo.reset()
    try:
        compiled = torch.compile(_chain, fullgraph=True, dynamic=dynamic)
        for rows, cols in [(6, 5), (9, 4)]:
            x = _leaf(_r((cols, rows), torch.float64, device).t())
            y = _leaf(_r((cols, rows), torch.float64, device).t())
            bias = _leaf(_r((cols,), torch.float64, device))
            out_c = compiled(x, y, bias)
            out_e = _chain(x, y, bias)
            torch.testing.assert_close(out_c, out_e, rtol=1e-12, atol=1e-12)
            g = _r(out_c.shape, torch.float64, device)
            grads_c = torch.autograd.grad(out_c, (x, y, bias), g)
            grads_e = torch.autograd.grad(out_e, (x, y, bias), g)
            ref_in = [t.detach().cpu().requires_grad_(True) for t in (x, y, bias)]
            grads_r = torch.autograd.grad(_chain_torch(*ref_in), ref_in, g.cpu())
            for gc, ge, gr in zip(grads_c, grads_e, grads_r):
                torch.testing.assert_close(gc, ge, rtol=1e-12, atol=1e-12)
                torch.testing.assert_close(gc.cpu(), gr, rtol=1e-10, atol=1e-10)
        # the compiled graph returns map's output as is: the same strides as in eager mode
        x = _r((7, 3), torch.float64, device).t()
        f = torch.compile(lambda t: T.map(t, "exp"), fullgraph=True, dynamic=dynamic)
        assert f(x).stride() == x.stride()
    finally:
        torch._dynamo.reset()


GRAD_LAYOUTS = {
    "contiguous": lambda t: t.contiguous(),
    "transposed": lambda t: t.t().contiguous().t(),
    "sliced": lambda t: torch.stack([t, torch.full_like(t, float("nan"))], -1)[..., 0],
    "expanded": lambda t: t[:1].expand(t.shape),
}


@pytest.mark.parametrize("grad_layout", GRAD_LAYOUTS.keys())
def test_backward_with_non_contiguous_grads(grad_layout, device):
    """Gradients arriving in any layout (here: unlike the output's) flow through map's and zip's
    backward formulas, which are tiles ops themselves; checked against PyTorch in float64."""
    x = _leaf(_r((6, 5), torch.float64, device).t())     # [5, 6], transposed
    a = _leaf(_r((5, 6), torch.float64, device))
    row = _leaf(_r((6,), torch.float64, device))
    ours = T.zip(T.zip(T.map(x, "sigmoid"), a, "mul"), row, "div")
    g = GRAD_LAYOUTS[grad_layout](_r((5, 6), torch.float64, device))
    assert g.shape == ours.shape
    grads = torch.autograd.grad(ours, (x, a, row), g, create_graph=True)
    ref_in = [t.detach().cpu().requires_grad_(True) for t in (x, a, row)]
    theirs = torch.sigmoid(ref_in[0]) * ref_in[1] / ref_in[2]
    grads_ref = torch.autograd.grad(theirs, ref_in, g.cpu(), create_graph=True)
    for gx, gr, t in zip(grads, grads_ref, (x, a, row)):
        assert gx.shape == t.shape
        torch.testing.assert_close(gx.cpu(), gr, rtol=1e-12, atol=1e-12)
    # double backward, with a second non-contiguous upstream gradient
    gg = [GRAD_LAYOUTS[grad_layout](_r((5, 6), torch.float64, device)) for _ in range(2)]
    second = torch.autograd.grad(grads[:2], (x, a), gg)
    second_ref = torch.autograd.grad(grads_ref[:2], ref_in[:2], [t.cpu() for t in gg])
    for s, sr in zip(second, second_ref):
        torch.testing.assert_close(s.cpu(), sr, rtol=1e-12, atol=1e-12)


def test_gradcheck_transposed_and_broadcast(device):
    x = _leaf(_r((4, 3), torch.float64, device).t())
    row = _leaf(_r((4,), torch.float64, device) + 4.0)  # away from 0: div
    f = lambda x, row: T.zip(T.map(x, "tanh"), row, "div")  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, row))
    assert torch.autograd.gradgradcheck(f, (x, row))


# ---- CUDA: which kernel a layout reaches -----------------------------------------------------------

CUDA_KERNEL_CASES = {
    # dense transposed / permuted inputs: every operand is contiguous in the output's memory order
    "map_transposed": (lambda: (T.map, (_r((512, 256), torch.float32, "cuda").t(), "exp")), "contiguous_kernel"),
    "map_permuted_4d": (lambda: (T.map, (_r((8, 16, 32, 64), torch.bfloat16, "cuda").permute(0, 2, 3, 1), "exp")),
                        "contiguous_kernel"),
    "zip_both_transposed": (lambda: (T.zip, (_r((512, 256), torch.float32, "cuda").t(),
                                             _r((512, 256), torch.float32, "cuda").t(), "add")), "contiguous_kernel"),
    # a dense transposed first operand gives the output its layout: b, row-major, is read transposed
    "zip_transposed_plus_contiguous": (lambda: (T.zip, (_r((512, 256), torch.float32, "cuda").t(),
                                                        _r((256, 512), torch.float32, "cuda"), "add")),
                                       "transpose_kernel"),
    # not dense: a contiguous output, the input read through transposing tiles
    "map_padded_transposed": (lambda: (T.map, (_r((512, 257), torch.float32, "cuda")[:, :256].t(), "exp")),
                              "transpose_kernel"),
}


@requires_cuda
@pytest.mark.parametrize("build, kernel", CUDA_KERNEL_CASES.values(), ids=CUDA_KERNEL_CASES.keys())
def test_cuda_kernel_for_layout(build, kernel):
    op, args = build()
    names = cuda_kernel_names(lambda: op(*args))
    assert len(names) == 1 and kernel in names[0], names
