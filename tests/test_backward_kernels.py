"""The backward kernels (tiles::_map_backward, tiles::_zip_backward) and the C++ autograd that calls
them: each gradient is one kernel per input, it matches PyTorch's in every dtype and layout, and the
ops check their arguments."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from helpers import FLOAT_DTYPES, MAP_DOMAIN, MAP_FNS, MAP_REF, ZIP_REF, assert_close_to_ref, dtype_id, make_tensor

ops = torch.ops.tiles
ZIP_GRAD_KERNEL_FNS = ("div", "max", "min", "pow")
ZIP_DOMAIN = {"div": ("real", "nonzero"), "pow": ("positive", "real"), "max": ("real", "real"),
              "min": ("real", "real")}


# Half-type gradients round more than once (a saved output y = f(x), the gradient at the broadcast
# shape before it is summed), and 1 - y² or a sum can cancel: compare them norm-wise.
NORM_TOL = {torch.float16: 4e-3, torch.bfloat16: 3e-2}


def assert_grad_close(got, ref, dtype):
    if dtype in NORM_TOL:
        err = (torch.linalg.vector_norm(got.double() - ref) / torch.linalg.vector_norm(ref)).item()
        assert err <= NORM_TOL[dtype], f"relative error {err:.3g} in {dtype}"
    else:
        assert_close_to_ref(got, ref, dtype)


class KernelLog(TorchDispatchMode):
    """The operators that reach a backend kernel, in order (views and detach excluded)."""

    IGNORED = {"aten::view", "aten::expand", "aten::detach", "aten::alias", "aten::_unsafe_view",
               "aten::reshape", "aten::transpose.int", "aten::ones_like"}

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name() not in self.IGNORED:
            self.names.append(func.name())
        return func(*args, **(kwargs or {}))


def backward_kernels(out, inputs):
    grad = torch.randn_like(out)
    with KernelLog() as log:
        torch.autograd.grad(out, inputs, grad, allow_unused=True)
    return log.names


@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_backward_is_one_kernel(fn, device):
    x = make_tensor((4, 5), torch.float32, device, domain=MAP_DOMAIN[fn]).requires_grad_(True)
    expected = {"id": [], "neg": ["tiles::map"]}.get(fn, ["tiles::_map_backward"])
    assert backward_kernels(ops.map(x, fn), [x]) == expected


@pytest.mark.parametrize("fn, expected", [
    ("add", []), ("sub", ["tiles::map"]), ("mul", ["tiles::zip", "tiles::zip"]),
    ("div", ["tiles::zip", "tiles::_zip_backward"]), ("max", ["tiles::_zip_backward"] * 2),
    ("pow", ["tiles::_zip_backward"] * 2), ("lt", ["aten::zeros"] * 2)])  # lt: a 0-dim zero each, expanded
def test_zip_backward_is_one_kernel_per_input(fn, expected, device):
    a = make_tensor((4, 5), torch.float32, device, domain="positive").requires_grad_(True)
    b = make_tensor((4, 5), torch.float32, device, domain="positive").requires_grad_(True)
    assert sorted(backward_kernels(ops.zip(a, b, fn), [a, b])) == sorted(expected)


def test_broadcast_operand_gradient_adds_one_reduction(device):
    x = torch.randn(6, 5, device=device, requires_grad=True)
    bias = torch.randn(5, device=device, requires_grad=True)
    assert backward_kernels(ops.zip(x, bias, "add"), [x, bias]) == ["tiles::reduce"]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_grad_matches_torch_with_expanded_grad(fn, dtype, device):
    """The upstream gradient of a sum is expanded (stride 0); the input is transposed."""
    x = make_tensor((6, 5), dtype, device, "transposed", domain=MAP_DOMAIN[fn]).requires_grad_(True)
    x64 = x.detach().double().requires_grad_(True)
    g = torch.randn(5, device=device, dtype=dtype)
    (gx,) = torch.autograd.grad(ops.reduce(ops.map(x, fn), [0], "sum"), [x], g)
    (g64,) = torch.autograd.grad(MAP_REF[fn](x64).sum(0), [x64], g.double())
    assert gx.dtype == dtype and gx.shape == x.shape
    assert_grad_close(gx, g64, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ZIP_GRAD_KERNEL_FNS)
def test_zip_grad_kernels_match_torch_with_broadcast(fn, dtype, device):
    da, db = ZIP_DOMAIN[fn]
    a = make_tensor((3, 1, 5), dtype, device, "sliced", domain=da).requires_grad_(True)
    b = make_tensor((4, 5), dtype, device, "transposed", domain=db).requires_grad_(True)
    out = ops.zip(a, b, fn)
    g = torch.randn(out.shape, device=device, dtype=dtype)
    ga, gb = torch.autograd.grad(out, [a, b], g)
    a64, b64 = (t.detach().double().requires_grad_(True) for t in (a, b))
    ra, rb = torch.autograd.grad(ZIP_REF[fn](a64, b64), [a64, b64], g.double())
    for got, ref, like in ((ga, ra, a), (gb, rb, b)):
        assert got.dtype == dtype and got.shape == like.shape
        assert_grad_close(got, ref, dtype)


def test_mixed_dtype_zip_grad_kernel(device):
    a = torch.rand(3, 4, device=device, dtype=torch.float32).add_(0.5).requires_grad_(True)
    b = torch.randn(3, 4, device=device, dtype=torch.float64).requires_grad_(True)
    ga, gb = torch.autograd.grad(ops.zip(a, b, "pow").sum(), [a, b])
    a64 = a.detach().double().requires_grad_(True)
    b64 = b.detach().clone().requires_grad_(True)
    ra, rb = torch.autograd.grad(torch.pow(a64, b64).sum(), [a64, b64])
    assert (ga.dtype, gb.dtype) == (torch.float32, torch.float64)
    assert_close_to_ref(ga, ra, torch.float32)
    assert_close_to_ref(gb, rb, torch.float64)


@pytest.mark.parametrize("fn", ["gelu", "exp", "tanh"])
def test_backward_op_double_backward(fn, device):
    """The backward kernels' own gradients (the composite formulas) by gradgradcheck."""
    x = make_tensor((3, 4), torch.float64, device).requires_grad_(True)
    f = lambda t: ops.map(t, fn)  # noqa: E731
    assert torch.autograd.gradgradcheck(f, (x,))
    y = f(x)
    saved = y if fn in ("exp", "tanh") else x
    g = torch.randn_like(x).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda gg, s: ops._map_backward(gg, s, fn), (g, saved.detach().requires_grad_()))


@pytest.mark.parametrize("fn", ZIP_GRAD_KERNEL_FNS)
@pytest.mark.parametrize("which", [0, 1])
def test_zip_backward_op_gradcheck(fn, which, device):
    da, db = ZIP_DOMAIN[fn]
    a = make_tensor((2, 3), torch.float64, device, domain=da).requires_grad_(True)
    b = make_tensor((3,), torch.float64, device, domain=db).requires_grad_(True)
    g = torch.randn(2, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda gg, aa, bb: ops._zip_backward(gg, aa, bb, fn, which), (g, a, b))


def test_backward_ops_opcheck(device):
    x = torch.rand(3, 4, device=device, dtype=torch.float64).add_(0.5).requires_grad_(True)
    g = torch.randn(3, 4, device=device, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(ops._map_backward.default, (g, x, "gelu"))
    torch.library.opcheck(ops._zip_backward.default, (g, x, x[0], "pow", 1))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["kernel", "composite"])
def test_backward_ops_check_their_arguments(device, requires_grad):
    """The same errors whether the op runs its kernel or (its inputs requiring grad) its composite."""
    g = torch.randn(3, 4, device=device, requires_grad=requires_grad)
    x = torch.randn(3, 4, device=device)
    with pytest.raises(RuntimeError, match=r"tiles::_map_backward: arguments 'grad' \[3, 4\] and 'saved' \[4\]"):
        ops._map_backward(g, x[0], "exp")
    with pytest.raises(RuntimeError, match="tiles::_map_backward: unknown fn 'foo'"):
        ops._map_backward(g, x, "foo")
    with pytest.raises(RuntimeError, match="tiles::_zip_backward: fn 'add' has no gradient kernel"):
        ops._zip_backward(g, x, x, "add", 0)
    with pytest.raises(RuntimeError, match="tiles::_zip_backward: argument 'which' must be 0"):
        ops._zip_backward(g, x, x, "div", 2)
    with pytest.raises(RuntimeError, match=r"tiles::_zip_backward: argument 'grad' has shape \[4\]"):
        ops._zip_backward(g[0], x, x, "div", 0)

    with pytest.raises(RuntimeError, match="tiles::_map_backward: arguments 'grad' and 'saved' must have one dtype"):
        ops._map_backward(g, x.double(), "exp")


def test_backward_ops_fake_kernels_check_like_the_kernels():
    meta = lambda *shape: torch.empty(*shape, device="meta")  # noqa: E731
    with pytest.raises(RuntimeError, match=r"tiles::_zip_backward: shapes \[2\] \(a\) and \[3\] \(b\) do not broadcast"):
        ops._zip_backward(meta(2), meta(2), meta(3), "div", 0)
    with pytest.raises(RuntimeError, match=r"tiles::_map_backward: arguments 'grad' \[3, 4\] and 'saved' \[4\]"):
        ops._map_backward(meta(3, 4), meta(4), "exp")
    assert ops._zip_backward(meta(2, 3), meta(2, 3), meta(3), "pow", 1).shape == (2, 3)
