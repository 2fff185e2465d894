"""Fake (meta) kernels: output shape, dtype and strides of each op without computing it, for
torch.compile (which checks the real kernels' strides against these).

They repeat the C++ argument checks (csrc/binding/problems.cpp) that depend only on metadata, so a traced
program fails with the same message as an eager one.
"""
import torch

from .ops import _FN_NAMES, MAP_FNS, REDUCE_FNS, ZIP_FNS

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_fn(op, fn, valid):
    if fn not in valid:
        raise RuntimeError(f"{op}: unknown fn '{fn}'; valid names are: {', '.join(valid)}")


def _check_float(op, arg, t):
    if t.dtype not in _FLOATS:
        raise RuntimeError(f"{op}: argument '{arg}' has dtype {t.dtype}; expected a float tensor "
                           "(float16, bfloat16, float32 or float64)")


def _check_same_device(op, a, b, names=("a", "b")):
    if a.device != b.device:
        raise RuntimeError(f"{op}: arguments '{names[0]}' and '{names[1]}' must be on the same device, got "
                           f"{a.device} and {b.device}")


def _empty_like_first_dense(shape, dtype, *candidates):
    """The output layout rule of map, zip and their gradients, from C++ (binding/problems.h,
    empty_like_first_dense), so that the fake and real strides cannot drift apart."""
    return torch.ops.tiles._empty_like_first_dense(shape, dtype, list(candidates))


def reduced_dims(x, dim):
    """The sorted, non-negative dims that tiles::reduce reduces (None and [] mean all)."""
    nd = x.dim()
    if not dim:
        return list(range(nd))
    lo, hi = (-1, 0) if nd == 0 else (-nd, nd - 1)
    seen = set()
    for d in dim:
        if not lo <= d <= hi:
            raise RuntimeError(f"tiles::reduce: dim {d} is out of range for argument 'x' with {nd} "
                               f"dimensions (expected a dim in [{lo}, {hi}])")
        w = d % max(nd, 1)
        if w in seen:
            raise RuntimeError(f"tiles::reduce: dim {w} appears more than once in argument 'dim' {list(dim)}")
        seen.add(w)
    return sorted(seen) if nd else []


@torch.library.register_fake("tiles::map")
def _map_fake(x, fn):
    _check_fn("tiles::map", fn, MAP_FNS)
    _check_float("tiles::map", "x", x)
    return _empty_like_first_dense(x.shape, x.dtype, x)


@torch.library.register_fake("tiles::zip")
def _zip_fake(a, b, fn):
    _check_fn("tiles::zip", fn, ZIP_FNS)
    _check_float("tiles::zip", "a", a)
    _check_float("tiles::zip", "b", b)
    _check_same_device("tiles::zip", a, b)
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise RuntimeError(f"tiles::zip: shapes {list(a.shape)} (a) and {list(b.shape)} (b) do not broadcast") from None
    return _empty_like_first_dense(shape, torch.result_type(a, b), a, b)


@torch.library.register_fake("tiles::reduce")
def _reduce_fake(x, dim, fn, keepdim=False):
    _check_fn("tiles::reduce", fn, REDUCE_FNS)
    _check_float("tiles::reduce", "x", x)
    dims = reduced_dims(x, dim)
    if fn in ("max", "min"):
        for d in dims:
            torch._check(x.shape[d] != 0, lambda: f"tiles::reduce: fn '{fn}' over dim {d} of size 0 of "
                         f"argument 'x' (shape {list(x.shape)}) is undefined: max/min of no elements")
    shape = [1 if d in dims else s for d, s in enumerate(x.shape) if keepdim or d not in dims]
    return x.new_empty(shape)


@torch.library.register_fake("tiles::bmm")
def _bmm_fake(a, b):
    op = "tiles::bmm"
    _check_float(op, "a", a)
    _check_float(op, "b", b)
    _check_same_device(op, a, b)
    if a.dim() not in (2, 3):
        raise RuntimeError(f"{op}: argument 'a' must be 2-D [M, K] or 3-D [B, M, K], got {a.dim()}-D shape {list(a.shape)}")
    if b.dim() not in (2, 3):
        raise RuntimeError(f"{op}: argument 'b' must be 2-D [K, N] or 3-D [B, K, N], got {b.dim()}-D shape {list(b.shape)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: arguments 'a' and 'b' must have one dtype, got {a.dtype} and {b.dtype}")
    torch._check(a.shape[-1] == b.shape[-2], lambda: f"{op}: inner sizes differ: 'a' {list(a.shape)} has "
                 f"K={a.shape[-1]} but 'b' {list(b.shape)} has K={b.shape[-2]}")
    m, n = a.shape[-2], b.shape[-1]
    if a.dim() == 2 and b.dim() == 2:
        return a.new_empty((m, n))
    batch_a = a.shape[0] if a.dim() == 3 else 1
    batch_b = b.shape[0] if b.dim() == 3 else 1
    torch._check(batch_a == batch_b or batch_a == 1 or batch_b == 1,
                 lambda: f"{op}: batch sizes differ: 'a' {list(a.shape)} has B={batch_a} and 'b' "
                 f"{list(b.shape)} has B={batch_b} (one of them may be 1 to broadcast)")
    batch = batch_b if batch_a == 1 else batch_a
    return a.new_empty((batch, m, n))


# ---- the backward ops (internal; csrc/binding/tiles.cpp) ---------------------------------------------------

@torch.library.register_fake("tiles::_map_backward")
def _map_backward_fake(grad, saved, fn):
    op = "tiles::_map_backward"
    _check_fn(op, fn, MAP_FNS)
    _check_float(op, "grad", grad)
    _check_float(op, "saved", saved)
    _check_same_device(op, grad, saved, ("grad", "saved"))
    torch._check(grad.shape == saved.shape, lambda: f"{op}: arguments 'grad' {list(grad.shape)} and 'saved' "
                 f"{list(saved.shape)} must have one shape")
    if grad.dtype != saved.dtype:
        raise RuntimeError(f"{op}: arguments 'grad' and 'saved' must have one dtype, got {grad.dtype} and {saved.dtype}")
    return _empty_like_first_dense(grad.shape, grad.dtype, saved, grad)


_ZIP_GRAD_FNS = _FN_NAMES["zip_grad_kernel"]


@torch.library.register_fake("tiles::_zip_backward")
def _zip_backward_fake(grad, a, b, fn, which):
    op = "tiles::_zip_backward"
    _check_fn(op, fn, ZIP_FNS)
    if fn not in _ZIP_GRAD_FNS:
        raise RuntimeError(f"{op}: fn '{fn}' has no gradient kernel (only div, max, min and pow do)")
    if which not in (0, 1):
        raise RuntimeError(f"{op}: argument 'which' must be 0 (a) or 1 (b), got {which}")
    for arg, t in (("grad", grad), ("a", a), ("b", b)):
        _check_float(op, arg, t)
    _check_same_device(op, grad, a, ("grad", "a"))
    _check_same_device(op, grad, b, ("grad", "b"))
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise RuntimeError(f"{op}: shapes {list(a.shape)} (a) and {list(b.shape)} (b) do not broadcast") from None
    torch._check(grad.shape == shape, lambda: f"{op}: argument 'grad' has shape {list(grad.shape)} but 'a' "
                 f"{list(a.shape)} and 'b' {list(b.shape)} broadcast to {list(shape)}")
    return _empty_like_first_dense(shape, grad.dtype, a if which == 0 else b, grad)


@torch.library.register_fake("tiles::_cross_entropy")
def _cross_entropy_fake(logits, target):
    op = "tiles::_cross_entropy"
    torch._check(logits.dim() == 2, lambda: f"{op}: argument 'logits' must be 2-D [N, C], got {logits.dim()}-D")
    _check_float(op, "logits", logits)
    torch._check(logits.shape[1] > 0, lambda: f"{op}: argument 'logits' has no classes (shape [N, 0])")
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise RuntimeError(f"{op}: argument 'target' must hold integer class indices, got {target.dtype}")
    torch._check(target.dim() == 1 and target.shape[0] == logits.shape[0],
                 lambda: f"{op}: argument 'target' must be 1-D with one class index per row of 'logits'")
    _check_same_device(op, logits, target, ("logits", "target"))
    return logits.new_empty(logits.shape[:1])
