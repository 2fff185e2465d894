"""No leaks: 10,000 calls of each op, forward and backward (and of each kind of bad-input error), leave
torch.cuda.memory_allocated() where it was. CUDA only.

memory_allocated() counts the bytes of live tensors on the device (not the caching allocator's free
blocks), so anything an op keeps alive per call (an output, a workspace, a saved tensor of a graph
nobody holds) shows up as growth."""

import gc
import time

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from conftest import requires_cuda
from helpers import make_tensor

pytestmark = requires_cuda

T = torch.ops.tiles
CALLS = 10_000
F32, F64 = torch.float32, torch.float64


def _settled_allocated(at_most=None):
    """Live bytes once the device and the garbage collector are done. A backward's graph task is
    released by the autograd engine's device thread, which can drop its last references (a small
    tensor: one 512-byte block) a moment after torch.autograd.grad has returned; so when a bound is
    given, measure again for up to ~1 s before reporting more than it. A real leak (growth per call)
    does not go away by waiting."""
    for _ in range(100):
        gc.collect()
        torch.cuda.synchronize()
        allocated = torch.cuda.memory_allocated()
        if at_most is None or allocated <= at_most:
            break
        time.sleep(0.01)
    return allocated


def _t(shape, layout="contiguous", dtype=F32, domain="real", grad=False):
    return make_tensor(shape, dtype, "cuda", layout, domain=domain, requires_grad=grad)


class Inputs:
    """Small inputs, built once per test (outside the measured loop)."""

    def __init__(self):
        self.x = _t((32, 48))
        self.xt = _t((32, 48), "transposed")
        self.xs = _t((4, 8, 16), "sliced")
        self.row = _t((48,))
        self.half = _t((32, 48), dtype=torch.float16)
        self.big = _t((1 << 20,))  # large enough for the split all-dims reduction (a workspace per call)
        self.a, self.b = _t((4, 16, 24)), _t((4, 24, 8), "transposed")
        self.empty = _t((0, 4))
        self.short_row = _t((5,))
        # float64 leaves for the backward cases
        self.gx = _t((16, 24), "transposed", F64, grad=True)
        self.gp = _t((16, 24), dtype=F64, domain="positive", grad=True)
        self.grow = _t((24,), dtype=F64, grad=True)
        self.gy = _t((4, 5, 6), "permuted", F64, domain="near_one", grad=True)
        self.ga = _t((3, 8, 12), dtype=F64, grad=True)
        self.gb = _t((3, 12, 5), "transposed", F64, grad=True)


@pytest.fixture
def t():
    return Inputs()


FORWARD = {
    "map": lambda t: T.map(t.x, "exp"),
    "map_transposed": lambda t: T.map(t.xt, "gelu"),
    "map_sliced": lambda t: T.map(t.xs, "sin"),
    "zip": lambda t: T.zip(t.x, t.row, "add"),
    "zip_transposed": lambda t: T.zip(t.xt, t.x, "max"),
    "zip_mixed_dtypes": lambda t: T.zip(t.half, t.x, "mul"),
    "zip_compare": lambda t: T.zip(t.x, t.row, "lt"),
    "reduce_rows": lambda t: T.reduce(t.x, [1], "sum"),
    "reduce_columns": lambda t: T.reduce(t.x, [0], "max"),
    "reduce_strided": lambda t: T.reduce(t.xs, [0, 2], "mean", keepdim=True),
    "reduce_all_large": lambda t: T.reduce(t.big, None, "sum"),
    "reduce_prod": lambda t: T.reduce(t.x, None, "prod"),
    "bmm": lambda t: T.bmm(t.a, t.b),
    "bmm_broadcast_2d": lambda t: T.bmm(t.x[:16, :24], t.b),
}


def _grad(out, inputs):
    return torch.autograd.grad(out, inputs, torch.ones_like(out))


BACKWARD = {
    "map": lambda t: _grad(T.map(t.gx, "gelu"), (t.gx,)),
    "map_log": lambda t: _grad(T.map(t.gp, "log"), (t.gp,)),
    "zip": lambda t: _grad(T.zip(t.gx, t.grow, "mul"), (t.gx, t.grow)),
    "zip_pow": lambda t: _grad(T.zip(t.gp, t.grow, "pow"), (t.gp, t.grow)),
    "zip_max": lambda t: _grad(T.zip(t.gx, t.grow, "max"), (t.gx, t.grow)),
    "reduce_sum": lambda t: _grad(T.reduce(t.gy, [0, 2], "sum"), (t.gy,)),
    "reduce_mean": lambda t: _grad(T.reduce(t.gy, None, "mean"), (t.gy,)),
    "reduce_prod": lambda t: _grad(T.reduce(t.gy, [1], "prod"), (t.gy,)),
    "reduce_max": lambda t: _grad(T.reduce(t.gy, [-1], "max", keepdim=True), (t.gy,)),
    "bmm": lambda t: _grad(T.bmm(t.ga, t.gb), (t.ga, t.gb)),
    "chain": lambda t: _grad(T.reduce(T.map(T.bmm(t.gx, t.grow[:, None].expand(24, 7)), "tanh"), None, "sum"),
                             (t.gx, t.grow)),
    # second order: a graph built with create_graph=True, used once and dropped
    "double_backward": lambda t: torch.autograd.grad(
        torch.autograd.grad(T.reduce(T.map(t.gx, "sin"), None, "sum"), t.gx, create_graph=True)[0].sum(),
        t.gx),
}

ERRORS = {
    "unknown_fn": lambda t: T.map(t.x, "bogus_fn"),
    "shapes_do_not_broadcast": lambda t: T.zip(t.x, t.short_row, "add"),
    "bmm_inner_mismatch": lambda t: T.bmm(t.x, t.x),
    "reduce_dim_out_of_range": lambda t: T.reduce(t.x, [2], "sum"),
    "reduce_max_of_empty": lambda t: T.reduce(t.empty, [0], "max"),
}


def _check_flat(call):
    for _ in range(10):  # warm-up: caches, lazy module loading, autograd's first-call state
        call()
    before = _settled_allocated()
    for _ in range(CALLS):  # no sync inside the loop: the calls queue up as in real use
        call()
    after = _settled_allocated(at_most=before)
    # (<=: the warm-up's last graph may itself have been released only after `before` was read)
    assert after <= before, f"memory_allocated grew by {after - before} bytes over {CALLS} calls"


@pytest.mark.parametrize("case", FORWARD)
def test_forward_does_not_leak(case, t):
    _check_flat(lambda: FORWARD[case](t))


@pytest.mark.parametrize("case", BACKWARD)
def test_backward_does_not_leak(case, t):
    _check_flat(lambda: BACKWARD[case](t))


@pytest.mark.parametrize("case", ERRORS)
def test_errors_do_not_leak(case, t):
    def call():
        try:
            ERRORS[case](t)
        except RuntimeError:
            return
        raise AssertionError(f"{case}: expected a RuntimeError")

    _check_flat(call)
