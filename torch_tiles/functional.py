"""Neural-network functions built only from the tiles operators (bmm, map, zip, reduce) plus views.

Their gradients come from the tiles ops' autograd formulas (softmax, log_softmax and cross_entropy have
backward formulas of their own, also written in tiles ops), so forward, backward and double backward all
run on the tiles kernels, and ``torch.compile(fullgraph=True)`` traces them (under it every call goes
through ``torch.ops.tiles``; in eager mode through the ops' direct calls, torch_tiles/ops.py).
Conventions follow ``torch.nn.functional`` except where a docstring says otherwise; note that
:func:`linear` takes its weight as ``[in_features, out_features]``.
"""
import math
from typing import Optional

import torch
from torch import Tensor

# The ops' own wrappers: in eager mode they call the ops directly, with less per-call overhead than
# torch.ops (torch_tiles/ops.py); under torch.compile they call torch.ops.tiles.
from .ops import bmm as _bmm, map as _map, reduce as _reduce, zip as _zip

__all__ = ["matmul", "linear", "relu", "gelu", "softmax", "log_softmax", "cross_entropy", "mse_loss"]

_tiles = torch.ops.tiles


# ---- matmul ------------------------------------------------------------------------------------

def _flat_batch(t: Tensor, batch) -> Tensor:
    """`t` ([*t_batch, R, C], t_batch broadcastable to `batch`) as a tiles::bmm operand.

    A batch of one element becomes a 2-D [R, C] view, which bmm broadcasts. A batch with as many elements
    as `batch` needs no expansion and becomes [B, R, C] by reshape. A batch broadcast only partly (e.g.
    [2, 1] against [2, 3]) is materialized by a zip "mul" with ones, so that its gradient is summed back
    by tiles::reduce (an ``expand`` would hand that sum to a native PyTorch kernel).
    """
    rows, cols = t.shape[-2:]
    size = math.prod(t.shape[:-2])
    if size == 1:
        return t.reshape(rows, cols)
    full = math.prod(batch)
    if size != full:
        t = _zip(t, t.new_ones((*batch, 1, 1)), "mul")
    return t.reshape(full, rows, cols)


def _matmul_nd(a: Tensor, b: Tensor) -> Tensor:
    """matmul of two operands with at least 2 dims each."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if math.prod(b.shape[:-2]) == 1:  # b is one matrix: fold a's batch into its rows, one bmm
        out = _bmm(a.reshape(math.prod(a.shape[:-1]), k), b.reshape(b.shape[-2:]))
    else:
        out = _bmm(_flat_batch(a, batch), _flat_batch(b, batch))
    return out.reshape(*batch, m, n)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with the semantics of ``torch.matmul``, computed by ``tiles::bmm``.

    Operands of 2 or more dims are stacks of matrices whose batch dims (all but the last two) broadcast.
    A 1-D ``a`` is treated as a row vector [1, K] and a 1-D ``b`` as a column vector [K, 1], and that dim
    is removed from the result (two vectors give a 0-dim dot product).

    The batch is reshaped onto bmm's single batch dim. This is a view (no copy) whenever the batch dims
    can be merged by a view, which includes every contiguous tensor. A copy happens only when they cannot:
    batch dims permuted or sliced so that they no longer merge, a batched ``a`` times a single matrix ``b``
    when ``a``'s rows do not merge with its batch (e.g. ``a`` is a transposed view; its batch is folded
    into the rows so that one [B*M, K] @ [K, N] product runs), and an operand whose batch broadcasts only
    partly against the other's (it is materialized at the full batch size, as torch.matmul does too).
    """
    if a.dim() == 2 and b.dim() == 2:  # one product as it stands: no views (each would record an autograd node)
        return _bmm(a, b)
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(f"torch_tiles.matmul: both arguments need at least 1 dimension, got {a.dim()}-D "
                           f"and {b.dim()}-D")
    vec_a, vec_b = a.dim() == 1, b.dim() == 1
    out = _matmul_nd(a.unsqueeze(0) if vec_a else a, b.unsqueeze(-1) if vec_b else b)
    if vec_a:
        out = out.squeeze(-2)
    if vec_b:
        out = out.squeeze(-1)
    return out


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``x @ weight + bias`` for ``x`` [..., in], ``weight`` [in, out], ``bias`` [out].

    The weight is stored [in, out], the transpose of ``torch.nn.functional.linear``'s, so that the
    forward product reads it as it is laid out rather than through a transposed view.
    """
    y = matmul(x, weight)
    return y if bias is None else _zip(y, bias, "add")


# ---- activations -------------------------------------------------------------------------------

def relu(x: Tensor) -> Tensor:
    """max(x, 0), as ``torch.relu``."""
    return _map(x, "relu")


def gelu(x: Tensor) -> Tensor:
    """x Φ(x), the exact (erf) form, as ``torch.nn.functional.gelu(x)`` with approximate='none'."""
    return _map(x, "gelu")


def _shifted(x: Tensor, dim: int) -> Tensor:
    """x minus its max along `dim`, so that exp() of it is at most 1 and cannot overflow. Along an empty
    dim there is no max (and nothing to shift): x, as a new tensor."""
    if x.dim() > 0 and x.shape[dim] == 0:
        return _map(x, "id")
    return _zip(x, _reduce(x, [dim], "max", True), "sub")


class _SavesOutput(torch.autograd.Function):
    """Keeps the dim and the forward's output for a backward that is written in terms of them."""

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)


class _Softmax(_SavesOutput):
    """softmax with a backward written in tiles ops: grad_x = y (g - sum(g y)).

    A Function of its own (rather than autograd through the forward's ops) because softmax is unchanged
    by the max shift, so the max needs no backward, and because the forward uses its intermediates twice,
    which would make the autograd engine sum their gradients with a native add. The backward is made of
    differentiable tiles ops, so double backward works.
    """

    @staticmethod
    def forward(x, dim):
        e = _map(_shifted(x, dim), "exp")
        return _zip(e, _reduce(e, [dim], "sum", True), "div")

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        dot = _reduce(_zip(g, y, "mul"), [ctx.dim], "sum", True)
        return _zip(y, _zip(g, dot, "sub"), "mul"), None


class _LogSoftmax(_SavesOutput):
    """log_softmax with a backward written in tiles ops: grad_x = g - exp(out) sum(g); see _Softmax.

    The forward is z - logsumexp(z) on the max-shifted z, whose subtraction keeps the result accurate to
    its own size (x - logsumexp(x) would carry logsumexp's rounding, on the scale of the largest x).
    """

    @staticmethod
    def forward(x, dim):
        z = _shifted(x, dim)
        return _zip(z, _reduce(z, [dim], "logsumexp", True), "sub")

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        total = _reduce(g, [ctx.dim], "sum", True)
        return _zip(g, _zip(_map(out, "exp"), total, "mul"), "sub"), None


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, computed on x - max(x) so that large inputs stay finite."""
    return _Softmax.apply(x, dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log(softmax(x)) along `dim`, as z - log(sum(exp(z))) with z = x - max(x): finite for large x."""
    return _LogSoftmax.apply(x, dim)


# ---- losses ------------------------------------------------------------------------------------

def _reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return _reduce(loss, None, "mean")
    if reduction == "sum":
        return _reduce(loss, None, "sum")
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(logits: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """-log softmax(logits)[target] for ``logits`` [N, C] and integer class indices ``target`` [N].

    A floating-point (or bool) ``target`` raises TypeError: class probabilities are not supported.

    The target's one-hot mask is made by a tiles zip "eq" of the targets against 0..C-1 (in float32,
    which holds class indices exactly up to 2^24 where bfloat16 would not past 256; float64 for more
    classes), so the loss needs no gather
    and no host sync and can be captured in a CUDA graph. Unlike PyTorch, targets are not range-checked
    (that would need a sync): a target outside [0, C) makes its row's loss +inf. A class masked out with
    a -inf logit works as in PyTorch.

    Each row's loss is logsumexp(z) - z[target] on z = logits - max(logits), and its gradient
    (softmax(logits) - one_hot) * grad: one call of ``tiles::_cross_entropy``, which composes those
    tiles kernels in C++ under an autograd node of its own (six kernels forward beside the one-hot,
    four backward; double backward recomputes z from the logits with recorded ops).
    """
    if logits.dim() != 2 or target.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy expects logits [N, C] and target [N], got {list(logits.shape)} "
                         f"and {list(target.shape)}")
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise TypeError(f"cross_entropy: target must hold integer class indices (e.g. torch.long), got "
                        f"{target.dtype}; class probabilities are not supported")
    return _reduce_loss(_tiles._cross_entropy.default(logits, target), reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """(input - target)², averaged (or summed) over all elements, as ``torch.nn.functional.mse_loss``."""
    return _reduce_loss(_map(_zip(input, target, "sub"), "square"), reduction)
