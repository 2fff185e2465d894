"""Documented Python entry points for the tiles operators: the same ops as ``torch.ops.tiles``, called
with less per-call overhead in eager mode.

In eager mode each wrapper first offers its arguments to ``torch_tiles._C``'s direct call of the op
(binding/direct_calls.cpp), which reads plain tensors, ints, lists, strs and bools straight off the
Python objects and calls the operator through the dispatcher: about 1 us a call instead of
``torch.ops``' 2-3 us (its arguments matched against the schema). It returns None for anything else
(tensor subclasses other than nn.Parameter, torch function modes, other argument types), which then
goes through ``torch.ops.tiles`` as does every call under ``torch.compile``.
"""
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

__all__ = ["map", "zip", "reduce", "bmm", "MAP_FNS", "ZIP_FNS", "REDUCE_FNS"]

from . import _C

_compiling = torch.compiler.is_compiling

# The names each op's `fn` accepts, in the order of the C++ enums: read from the extension, whose
# tables (csrc/include/tiles/functions.h) are the only list.
_FN_NAMES = _C.fn_names()
MAP_FNS = _FN_NAMES["map"]
ZIP_FNS = _FN_NAMES["zip"]
REDUCE_FNS = _FN_NAMES["reduce"]


def map(x: Tensor, fn: str) -> Tensor:
    """Applies the unary function `fn` (one of MAP_FNS) to every element of `x`."""
    if not _compiling():
        out = _C.map(x, fn)
        if out is not None:
            return out
    return torch.ops.tiles.map.default(x, fn)


def zip(a: Tensor, b: Tensor, fn: str) -> Tensor:
    """Applies the binary function `fn` (one of ZIP_FNS) elementwise, broadcasting `a` against `b`.

    The result dtype is ``torch.result_type(a, b)``; comparisons return 1/0 in that dtype.
    """
    if not _compiling():
        out = _C.zip(a, b, fn)
        if out is not None:
            return out
    return torch.ops.tiles.zip.default(a, b, fn)


def reduce(x: Tensor, dim: Optional[Union[int, Sequence[int]]], fn: str, keepdim: bool = False) -> Tensor:
    """Reduces `x` over `dim` (an int, a list of ints, or None for all dims) with `fn` (REDUCE_FNS)."""
    if not _compiling():
        out = _C.reduce(x, dim, fn, keepdim)
        if out is not None:
            return out
    if isinstance(dim, int):
        dim = [dim]
    return torch.ops.tiles.reduce.default(x, dim, fn, keepdim)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of [B, M, K] (or [M, K]) and [B, K, N] (or [K, N]) tensors.

    A batch of size 1 broadcasts; two 2-D operands give a 2-D result.
    """
    if not _compiling():
        out = _C.bmm(a, b)
        if out is not None:
            return out
    return torch.ops.tiles.bmm.default(a, b)
