"""torch.library.opcheck for every operator: schema, autograd registration, fake (meta) kernel and
AOT dispatch, on a few representative argument sets each (float inputs require grad, so the
autograd registration is exercised too)."""

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from helpers import make_tensor


def _t(shape, dtype, device, layout="contiguous", domain="real"):
    return make_tensor(shape, dtype, device, layout, domain=domain).detach().requires_grad_(True)


# name: builder(device) -> (args, kwargs)
CASES = {
    "map": {
        "f32_exp": lambda d: ((_t((3, 4), torch.float32, d), "exp"), {}),
        "f64_permuted_sigmoid": lambda d: ((_t((2, 3, 4), torch.float64, d, "permuted"), "sigmoid"), {}),
        "f64_0dim_log": lambda d: ((_t((), torch.float64, d, domain="positive"), "log"), {}),
    },
    "zip": {
        "f32_row_broadcast_mul": lambda d: ((_t((3, 4), torch.float32, d), _t((4,), torch.float32, d),
                                             "mul"), {}),
        "f64_both_ways_div": lambda d: ((_t((2, 1, 3), torch.float64, d, "sliced"),
                                         _t((4, 1), torch.float64, d, domain="nonzero"), "div"), {}),
        "mixed_f32_f64_max": lambda d: ((_t((2, 3), torch.float32, d), _t((2, 3), torch.float64, d),
                                         "max"), {}),
    },
    "reduce": {
        "f32_two_dims_keepdim": lambda d: ((_t((3, 4, 5), torch.float32, d), [0, 2], "sum"),
                                           {"keepdim": True}),
        "f64_all_prod": lambda d: ((_t((2, 3), torch.float64, d, domain="near_one"), None, "prod"), {}),
        "f32_last_max": lambda d: ((_t((4, 6), torch.float32, d, "transposed"), [-1], "max"), {}),
    },
    "bmm": {
        "f32_batched": lambda d: ((_t((2, 3, 4), torch.float32, d), _t((2, 4, 5), torch.float32, d)), {}),
        "f64_2d": lambda d: ((_t((3, 4), torch.float64, d), _t((4, 5), torch.float64, d, "transposed")),
                             {}),
        "f32_broadcast_batch": lambda d: ((_t((1, 3, 4), torch.float32, d),
                                           _t((2, 4, 5), torch.float32, d)), {}),
    },
    "_cross_entropy": {
        "f32": lambda d: ((_t((5, 4), torch.float32, d), torch.tensor([0, 3, 1, 1, 2], device=d)), {}),
        "f64_transposed_int32": lambda d: ((_t((3, 6), torch.float64, d, "transposed"),
                                            torch.tensor([5, 0, 2], device=d, dtype=torch.int32)), {}),
    },
}

PARAMS = [pytest.param(op, build, id=f"{op}-{name}")
          for op, cases in CASES.items() for name, build in cases.items()]


@pytest.mark.parametrize("op_name, build", PARAMS)
def test_opcheck(op_name, build, device):
    args, kwargs = build(device)
    op = getattr(torch.ops.tiles, op_name).default
    torch.library.opcheck(op, args, kwargs)
