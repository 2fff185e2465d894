"""Autograd for the tiles operators.

Every backward is written with tiles ops (plus views and dtype casts), so it is itself differentiable:
double backward, gradgradcheck and torch.compile of the backward all go through the same kernels.
Constants enter as 0-dim tensors of the operand's dtype and device, which broadcast in zip.
"""
import math

import torch

from ._fake import reduced_dims

_tiles = torch.ops.tiles


def _map(x, fn):
    return _tiles.map.default(x, fn)


def _zip(a, b, fn):
    return _tiles.zip.default(a, b, fn)


def _const(like, value):
    return like.new_full((), value)


def _mul(a, b):
    return _zip(a, b, "mul")


def _scale(t, c):
    return _zip(t, _const(t, c), "mul")


def _sum_to(grad, like):
    """Sums `grad` over the dims along which `like` was broadcast, in `like`'s shape and dtype."""
    lead = grad.dim() - like.dim()
    dims = list(range(lead)) + [lead + i for i, s in enumerate(like.shape) if s == 1 and grad.shape[lead + i] != 1]
    if dims:
        grad = _tiles.reduce.default(grad, dims, "sum", True).reshape(like.shape)
    return grad if grad.dtype == like.dtype else grad.to(like.dtype)


# ---- map ---------------------------------------------------------------------------------------

def _gelu_grad(x):
    # d/dx x Φ(x) = Φ(x) + x φ(x), Φ(x) = (1 + erf(x / √2)) / 2, φ(x) = exp(-x² / 2) / √(2π)
    cdf = _scale(_zip(_map(_scale(x, math.sqrt(0.5)), "erf"), _const(x, 1.0), "add"), 0.5)
    pdf = _scale(_map(_scale(_map(x, "square"), -0.5), "exp"), 1.0 / math.sqrt(2.0 * math.pi))
    return _zip(cdf, _mul(x, pdf), "add")


def _silu_grad(x):
    s = _map(x, "sigmoid")  # d/dx x s(x) = s (1 + x (1 - s))
    return _mul(s, _zip(_const(x, 1.0), _mul(x, _zip(_const(x, 1.0), s, "sub")), "add"))


# Each entry: (grad_output, x, y = map(x, fn)) -> grad_x.
_MAP_GRADS = {
    "id": lambda g, x, y: g,
    "neg": lambda g, x, y: _map(g, "neg"),
    "abs": lambda g, x, y: _mul(g, _zip(_zip(x, _const(x, 0.0), "gt"), _zip(x, _const(x, 0.0), "lt"), "sub")),
    "exp": lambda g, x, y: _mul(g, y),
    "log": lambda g, x, y: _zip(g, x, "div"),
    "sqrt": lambda g, x, y: _zip(g, _scale(y, 2.0), "div"),
    "inv": lambda g, x, y: _map(_mul(g, _map(y, "square")), "neg"),
    "square": lambda g, x, y: _mul(g, _scale(x, 2.0)),
    "sigmoid": lambda g, x, y: _mul(g, _mul(y, _zip(_const(y, 1.0), y, "sub"))),
    "relu": lambda g, x, y: _mul(g, _zip(x, _const(x, 0.0), "gt")),
    "tanh": lambda g, x, y: _mul(g, _zip(_const(y, 1.0), _map(y, "square"), "sub")),
    "gelu": lambda g, x, y: _mul(g, _gelu_grad(x)),
    "silu": lambda g, x, y: _mul(g, _silu_grad(x)),
    "sin": lambda g, x, y: _mul(g, _map(x, "cos")),
    "cos": lambda g, x, y: _mul(g, _map(_map(x, "sin"), "neg")),
    "erf": lambda g, x, y: _mul(g, _scale(_map(_map(_map(x, "square"), "neg"), "exp"), 2.0 / math.sqrt(math.pi))),
}


def _map_setup(ctx, inputs, output):
    x, fn = inputs
    ctx.fn = fn
    ctx.save_for_backward(x, output)


def _map_backward(ctx, grad):
    x, y = ctx.saved_tensors
    return _MAP_GRADS[ctx.fn](grad, x, y), None


# ---- zip ---------------------------------------------------------------------------------------

def _tie_weight(a, b, loser_cmp):
    # torch.maximum/minimum: the whole gradient where a wins, half at a tie, none where a loses.
    return _zip(_zip(_const(a, 1.0), _zip(a, b, loser_cmp), "sub"), _scale(_zip(a, b, "eq"), 0.5), "sub")


def _zip_grads(fn, g, a, b, out):
    """(grad_a, grad_b) in the broadcast shape; None where the gradient is zero."""
    if fn == "add":
        return g, g
    if fn == "sub":
        return g, _map(g, "neg")
    if fn == "mul":
        return _mul(g, b), _mul(g, a)
    if fn == "div":
        ga = _zip(g, b, "div")
        return ga, _map(_mul(ga, out), "neg")  # -g a / b² = -(g / b)(a / b)
    if fn == "max":
        return _mul(g, _tie_weight(a, b, "lt")), _mul(g, _tie_weight(b, a, "lt"))
    if fn == "min":
        return _mul(g, _tie_weight(a, b, "gt")), _mul(g, _tie_weight(b, a, "gt"))
    if fn == "pow":
        ga = _mul(g, _mul(b, _zip(a, _zip(b, _const(b, 1.0), "sub"), "pow")))
        return ga, _mul(g, _mul(out, _map(a, "log")))
    return None, None  # comparisons are piecewise constant


def _zip_setup(ctx, inputs, output):
    a, b, fn = inputs
    ctx.fn = fn
    ctx.save_for_backward(a, b, output)


def _zip_backward(ctx, grad):
    a, b, out = ctx.saved_tensors
    ga, gb = _zip_grads(ctx.fn, grad, a, b, out)
    ga = _sum_to(ga, a) if ga is not None and ctx.needs_input_grad[0] else None
    gb = _sum_to(gb, b) if gb is not None and ctx.needs_input_grad[1] else None
    return ga, gb, None


# ---- reduce ------------------------------------------------------------------------------------

def _prod_grad(x, g, dims):
    """g times the product of the *other* elements of each slice, zeros included.

    With z the mask of zeros, prod_{j != i} x_j = A_i * B_i where
      A_i = prod of the other non-zero elements = P~ / x~_i, x~ = x with zeros replaced by the constant 1;
      B_i = prod of the other zero elements, which is 1 if there are none, x_k if x_k is the only other
            zero, and 0 (with zero derivative) otherwise. B is written exactly to first order,
            B_i = [others(i) == 0] + [others(i) == 1] * (sum_k z_k x_k - z_i x_i),
    so the gradient is exact and its own gradient (double backward) is exact too.
    """
    def reduce_sum(t):
        return _tiles.reduce.default(t, dims, "sum", True)

    zero = _zip(x, _const(x, 0.0), "eq")
    x_nonzero = _zip(_mul(x, _zip(_const(x, 1.0), zero, "sub")), zero, "add")
    others_nonzero = _zip(_tiles.reduce.default(x_nonzero, dims, "prod", True), x_nonzero, "div")
    other_zeros = _zip(reduce_sum(zero), zero, "sub")
    zero_x = _mul(zero, x)
    one_other_zero = _mul(_zip(other_zeros, _const(x, 1.0), "eq"), _zip(reduce_sum(zero_x), zero_x, "sub"))
    others_zero = _zip(_zip(other_zeros, _const(x, 0.0), "eq"), one_other_zero, "add")
    return _mul(g, _mul(others_nonzero, others_zero))


def _reduce_setup(ctx, inputs, output):
    x, dim, fn, keepdim = inputs
    ctx.fn = fn
    ctx.dims = reduced_dims(x, dim)
    ctx.keepdim = keepdim
    ctx.save_for_backward(x, output)


def _reduce_backward(ctx, grad):
    x, out = ctx.saved_tensors
    dims, fn = ctx.dims, ctx.fn
    if not ctx.keepdim:  # put the reduced dims back as size 1, so grad broadcasts against x
        kept = [1 if d in dims else s for d, s in enumerate(x.shape)]
        grad, out = grad.reshape(kept), out.reshape(kept)
    if fn == "sum":
        gx = grad.expand(x.shape)
    elif fn == "mean":
        # The count as a 0-dim float64: exact, and (being 0-dim) it does not promote grad's dtype.
        # Over no elements the gradient is empty; dividing by 1 instead of 0 keeps its own gradient
        # (double backward) a finite sum of no terms, 0, as in PyTorch, instead of 0 / 0.
        n = torch.sym_max(math.prod(x.shape[d] for d in dims), 1)
        count = grad.new_full((), n, dtype=torch.float64)
        gx = _zip(grad, count, "div").expand(x.shape)
    elif fn == "prod":
        gx = _prod_grad(x, grad, dims)
    else:  # max / min: shared equally among the elements equal to the result (as torch.amax)
        hit = _zip(x, out, "eq")
        count = _tiles.reduce.default(hit, dims, "sum", True)
        gx = _mul(_zip(grad, count, "div"), hit)
    if gx.dtype != x.dtype:  # only a 0-dim grad can have been promoted by a 0-dim constant
        gx = gx.to(x.dtype)
    return gx, None, None, None


# ---- bmm ---------------------------------------------------------------------------------------

def _bmm_setup(ctx, inputs, output):
    a, b = inputs
    ctx.save_for_backward(a, b)


def _sum_batch(grad, like):
    """Sums a [B, ., .] gradient down to `like`'s batch (2-D or a broadcast batch of one)."""
    if grad.dim() == like.dim() and grad.shape[0] == like.shape[0]:
        return grad
    return _tiles.reduce.default(grad, [0], "sum", like.dim() == 3)


def _bmm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    ga = gb = None
    if ctx.needs_input_grad[0]:  # grad @ bᵀ, on a transposed view of b
        ga = _sum_batch(_tiles.bmm.default(grad, b.transpose(-1, -2)), a)
    if ctx.needs_input_grad[1]:  # aᵀ @ grad
        gb = _sum_batch(_tiles.bmm.default(a.transpose(-1, -2), grad), b)
    return ga, gb


torch.library.register_autograd("tiles::map", _map_backward, setup_context=_map_setup)
torch.library.register_autograd("tiles::zip", _zip_backward, setup_context=_zip_setup)
torch.library.register_autograd("tiles::reduce", _reduce_backward, setup_context=_reduce_setup)
torch.library.register_autograd("tiles::bmm", _bmm_backward, setup_context=_bmm_setup)
