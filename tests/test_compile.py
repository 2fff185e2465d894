"""torch.compile(fullgraph=True) over the tiles ops: the fake kernels and autograd registrations must
let dynamo/inductor trace forward and backward without graph breaks, with eager-identical results."""

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from helpers import make_tensor, rel_error

ops = torch.ops.tiles


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def chain(a, b, bias):
    """bmm -> zip(add bias) -> map(gelu) -> reduce(sum over the last dim)."""
    c = ops.bmm(a, b)
    z = ops.zip(c, bias, "add")
    g = ops.map(z, "gelu")
    return ops.reduce(g, [-1], "sum")


def chain_torch(a, b, bias):
    return torch.nn.functional.gelu(torch.matmul(a, b) + bias).sum(-1)


def _inputs(batch, m, k, n, device):
    a = make_tensor((batch, m, k), torch.float32, device).requires_grad_(True)
    b = make_tensor((batch, n, k), torch.float32, device).mT.detach().requires_grad_(True)  # strided
    bias = make_tensor((n,), torch.float32, device).requires_grad_(True)
    return a, b, bias


def _forward_backward(fn, inputs):
    out = fn(*inputs)
    grads = torch.autograd.grad(out, inputs, torch.ones_like(out))
    return out, grads


def _check_against_eager_and_torch(compiled, inputs):
    out_c, grads_c = _forward_backward(compiled, inputs)
    out_e, grads_e = _forward_backward(chain, inputs)
    # compiled and eager run the same kernels, so they should agree to float32 rounding
    torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-5)
    for gc, ge in zip(grads_c, grads_e):
        assert gc.shape == ge.shape and gc.dtype == ge.dtype
        torch.testing.assert_close(gc, ge, rtol=1e-5, atol=1e-5)
    # and both agree with plain PyTorch in float64
    ref_inputs = [t.detach().double().requires_grad_(True) for t in inputs]
    out_r, grads_r = _forward_backward(chain_torch, ref_inputs)
    assert rel_error(out_c, out_r) < 1e-5
    for gc, gr in zip(grads_c, grads_r):
        assert rel_error(gc, gr) < 1e-5


def test_compile_chain_fullgraph(device):
    compiled = torch.compile(chain, fullgraph=True)
    _check_against_eager_and_torch(compiled, _inputs(2, 5, 7, 3, device))


def test_compile_chain_dynamic_shapes(device):
    compiled = torch.compile(chain, fullgraph=True, dynamic=True)
    for sizes in [(2, 5, 7, 3), (3, 4, 9, 6), (1, 8, 2, 5)]:
        _check_against_eager_and_torch(compiled, _inputs(*sizes, device))


def mixed(x16, y32, w):
    """Type promotion, keepdim, max, 2-D bmm and a comparison inside one graph."""
    e = ops.map(x16, "exp")                      # float16
    p = ops.zip(e, y32, "mul")                   # float16 * float32 -> float32
    m = ops.reduce(p, [0], "max", keepdim=True)  # [1, 4]
    mask = ops.zip(p, m, "ge")                   # 1 where the column max is attained
    s = ops.zip(ops.zip(p, mask, "mul"), w, "add")
    return ops.bmm(s, ops.map(s, "sigmoid").t())


def mixed_torch(x16, y32, w):
    p = torch.exp(x16.double()).to(torch.float16).double() * y32.double()  # map keeps float16
    m = p.amax(0, keepdim=True)
    s = p * (p >= m).double() + w.double()
    return s @ torch.sigmoid(s).t()


def test_compile_mixed_dtypes_fullgraph(device):
    x16 = make_tensor((3, 4), torch.float16, device).requires_grad_(True)
    y32 = make_tensor((3, 4), torch.float32, device).requires_grad_(True)
    w = make_tensor((4,), torch.float32, device).requires_grad_(True)
    compiled = torch.compile(mixed, fullgraph=True)
    out_c, grads_c = _forward_backward(compiled, (x16, y32, w))
    out_e, grads_e = _forward_backward(mixed, (x16, y32, w))
    assert out_c.dtype == out_e.dtype == torch.float32 and out_c.shape == (3, 3)
    torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-5)
    for gc, ge, t in zip(grads_c, grads_e, (x16, y32, w)):
        assert gc.dtype == ge.dtype == t.dtype
        torch.testing.assert_close(gc, ge, rtol=2e-3, atol=2e-3)
    ref = mixed_torch(x16.detach(), y32.detach(), w.detach())
    assert rel_error(out_c, ref) < 1e-3  # exp's float16 result may round differently by 1 ulp
