"""``torch.nn`` modules whose forward and backward run on the tiles operators (see :mod:`.functional`).

They are ordinary ``torch.nn.Module`` s: they compose with ``torch.nn.Sequential``, train with
``torch.optim``, save with ``state_dict`` and compile with ``torch.compile(fullgraph=True)``.
"""
import math

import torch
from torch import Tensor, nn

from . import functional as F

__all__ = ["Linear", "ReLU", "GELU", "MSELoss", "CrossEntropyLoss"]


class Linear(nn.Module):
    """``y = x @ weight + bias`` on tiles::bmm, for inputs [..., in_features].

    ``weight`` is [in_features, out_features], the transpose of ``torch.nn.Linear.weight``: the forward
    product then reads the weight as it is laid out rather than through a transposed view. To move
    weights between the two, transpose: ``torch_linear.weight = tiles_linear.weight.T``.

    Initialization draws exactly what ``torch.nn.Linear`` draws (same distribution, same random numbers
    in the same order), so the two built after one ``torch.manual_seed`` hold the same weights.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(in_features, out_features, **factory))
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        # Draw in torch.nn.Linear's [out, in] layout (contiguous), so the random numbers land where it puts them.
        weight_out_in = self.weight.new_empty(self.out_features, self.in_features)
        nn.init.kaiming_uniform_(weight_out_in, a=math.sqrt(5))
        self.weight.copy_(weight_out_in.T)
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(nn.Module):
    """max(x, 0) elementwise (tiles map "relu")."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class GELU(nn.Module):
    """x Φ(x) elementwise, the exact erf form (``torch.nn.GELU()`` with approximate='none')."""

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x)


class MSELoss(nn.Module):
    """Mean (or summed, or per-element) squared error, as ``torch.nn.MSELoss``."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(nn.Module):
    """Cross-entropy of logits [N, C] against class indices [N], as ``torch.nn.CrossEntropyLoss``.

    Computed as logsumexp(z) - z[target] on the max-shifted logits z, so large logits stay finite; see
    :func:`torch_tiles.functional.cross_entropy` for how targets are handled.
    """

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits, target, self.reduction)
