"""torch_tiles.nn / torch_tiles.functional against their torch.nn equivalents: outputs and gradients,
matmul broadcasting, numerically stable softmax, and that the compute really runs on tiles ops."""

import pytest
import torch
import torch.nn.functional as TF
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tiles
from torch_tiles import functional as F
from torch_tiles import nn as tnn

# float64 compares to rounding (the sums run in another order than PyTorch's); float32 more loosely.
TOL = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-5)}
DTYPES = [torch.float64, torch.float32]


@pytest.fixture(params=DTYPES, ids=["float64", "float32"])
def dtype(request):
    return request.param


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def check_same(fn_tiles, fn_torch, inputs, dtype):
    """Same outputs and same gradients (for a random output gradient) of every floating input."""
    ours, ref = [leaf(t) for t in inputs], [leaf(t) for t in inputs]
    out, out_ref = fn_tiles(*ours), fn_torch(*ref)
    assert out.shape == out_ref.shape and out.dtype == out_ref.dtype
    torch.testing.assert_close(out, out_ref, **TOL[dtype])
    grad_out = torch.randn_like(out_ref)
    grads = torch.autograd.grad(out, ours, grad_out)
    grads_ref = torch.autograd.grad(out_ref, ref, grad_out)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, **TOL[dtype])


# ---- Linear ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(16, 12), (3, 5, 12), (2, 3, 4, 12), (12,)], ids=str)
def test_linear_matches_torch(device, dtype, shape, bias):
    torch.manual_seed(7)
    ours = tnn.Linear(12, 9, bias=bias, device=device, dtype=dtype)
    torch.manual_seed(7)
    ref = torch.nn.Linear(12, 9, bias=bias, device=device, dtype=dtype)
    # Same seed, same initial weights: ours is stored [in, out], the transpose of torch's.
    assert ours.weight.shape == (12, 9)
    assert torch.equal(ours.weight, ref.weight.T)
    assert bias == (ours.bias is not None) and (not bias or torch.equal(ours.bias, ref.bias))

    x = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    x_ref = leaf(x)
    out, out_ref = ours(x), ref(x_ref)
    torch.testing.assert_close(out, out_ref, **TOL[dtype])
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    out_ref.backward(grad_out)
    torch.testing.assert_close(x.grad, x_ref.grad, **TOL[dtype])
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad.T, **TOL[dtype])
    if bias:
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad, **TOL[dtype])


def test_linear_in_sequential_trains_with_optim(device):
    """An ordinary nn.Module: parameters, state_dict and an optimizer step work as for torch.nn."""
    model = torch.nn.Sequential(tnn.Linear(4, 8, device=device), tnn.ReLU(), tnn.Linear(8, 1, device=device))
    assert [k for k in model.state_dict()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 4, device=device), torch.randn(32, 1, device=device)
    before = tnn.MSELoss()(model(x), y).item()
    for _ in range(20):
        opt.zero_grad()
        tnn.MSELoss()(model(x), y).backward()
        opt.step()
    assert tnn.MSELoss()(model(x), y).item() < before


# ---- activations -------------------------------------------------------------------------------

@pytest.mark.parametrize("ours, ref", [(tnn.ReLU(), torch.nn.ReLU()), (tnn.GELU(), torch.nn.GELU())],
                         ids=["relu", "gelu"])
def test_activation_matches_torch(device, dtype, ours, ref):
    x = torch.randn(7, 11, device=device, dtype=dtype) * 3
    check_same(ours, ref, [x], dtype)


# ---- softmax / log_softmax ---------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("fn, ref", [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)],
                         ids=["softmax", "log_softmax"])
def test_softmax_matches_torch(device, dtype, fn, ref, dim):
    x = torch.randn(4, 6, 5, device=device, dtype=dtype) * 4
    check_same(lambda t: fn(t, dim), lambda t: ref(t, dim), [x], dtype)


@pytest.mark.parametrize("fn, ref", [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)],
                         ids=["softmax", "log_softmax"])
def test_softmax_over_an_empty_dim_and_of_a_0_dim_tensor(device, fn, ref):
    for shape, dim in (((3, 0), -1), ((0, 5), 0), ((0, 5), 1), ((), 0), ((), -1)):  # and 0-dim
        x = torch.randn(shape, device=device, requires_grad=True)
        out = fn(x, dim)
        torch.testing.assert_close(out, ref(x, dim))
        (g,) = torch.autograd.grad(out, x, torch.ones_like(out))
        assert g.shape == x.shape


@pytest.mark.parametrize("fn, ref", [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)],
                         ids=["softmax", "log_softmax"])
def test_softmax_large_logits_stay_finite(device, dtype, fn, ref):
    """exp(1000) overflows even float64: only the max-shifted form gives finite, correct values."""
    x = torch.tensor([[1000.0, 0.0, -1000.0], [1000.0, 999.0, 998.0], [-1000.0, -1000.0, -1001.0]],
                     device=device, dtype=dtype)
    assert torch.isinf(torch.ops.tiles.map(x, "exp")).any()  # the naive form would overflow
    check_same(lambda t: fn(t, 1), lambda t: ref(t, 1), [x], dtype)
    x = leaf(x)
    out = fn(x, 1)
    (grad,) = torch.autograd.grad(out, x, torch.randn_like(out))
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_double_backward(fn):
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: fn(t, 1), (x,))
    assert torch.autograd.gradgradcheck(lambda t: fn(t, 0), (x,))


# ---- losses ------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(device, dtype, reduction):
    logits = torch.randn(13, 10, device=device, dtype=dtype) * 5
    target = torch.randint(0, 10, (13,), device=device)
    check_same(lambda t: tnn.CrossEntropyLoss(reduction)(t, target),
               lambda t: torch.nn.CrossEntropyLoss(reduction=reduction)(t, target), [logits], dtype)


def test_cross_entropy_large_logits(device, dtype):
    logits = torch.tensor([[1000.0, -1000.0, 0.0], [-500.0, 500.0, 499.0]], device=device, dtype=dtype)
    target = torch.tensor([1, 2], device=device)
    check_same(lambda t: F.cross_entropy(t, target), lambda t: TF.cross_entropy(t, target), [logits], dtype)
    assert torch.isfinite(F.cross_entropy(logits, target))


def test_cross_entropy_double_backward():
    logits = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2, 1, 2])
    assert torch.autograd.gradgradcheck(lambda t: F.cross_entropy(t, target), (logits,))


def test_cross_entropy_rows_can_change_in_place(device):
    # reduction="none" hands back a tensor of its own, which the caller may scale in place (a loss mask).
    logits = leaf(torch.randn(4, 3, device=device, dtype=torch.float64))
    target = torch.tensor([0, 2, 1, 2], device=device)
    rows = F.cross_entropy(logits, target, reduction="none")
    rows.mul_(torch.tensor([1.0, 0.0, 2.0, 1.0], device=device, dtype=torch.float64))
    (grad,) = torch.autograd.grad(rows.sum(), logits)
    ref_logits = logits.detach().clone().requires_grad_(True)
    ref = TF.cross_entropy(ref_logits, target, reduction="none") * torch.tensor([1.0, 0.0, 2.0, 1.0], device=device,
                                                                               dtype=torch.float64)
    (ref_grad,) = torch.autograd.grad(ref.sum(), ref_logits)
    torch.testing.assert_close(grad, ref_grad)


def test_cross_entropy_under_an_undefined_gradient():
    # A consumer whose backward returns no gradient (a zip "mul" asked only for w's): gradgradcheck
    # feeds such undefined gradients on purpose.
    logits = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2, 1, 2])
    f = lambda t, v: torch.ops.tiles.zip(F.cross_entropy(t, target, reduction="none"), v, "mul")  # noqa: E731
    assert torch.autograd.gradgradcheck(f, (logits, w))


def test_cross_entropy_target_out_of_range_is_not_checked(device):
    # As the README says: no range check (a host sync); a target that selects no class makes its row's
    # loss +inf, and its gradient softmax(logits) * grad.
    logits = torch.randn(3, 4, device=device, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 7, -1], device=device)
    rows = F.cross_entropy(logits, target, reduction="none")
    in_range = torch.nn.functional.cross_entropy(logits[:1], target[:1], reduction="none")
    torch.testing.assert_close(rows[:1], in_range)
    assert rows[1:].tolist() == [float("inf")] * 2
    (grad,) = torch.autograd.grad(rows, logits, torch.ones(3, device=device, dtype=torch.float64))
    torch.testing.assert_close(grad[1:], torch.softmax(logits[1:].detach(), 1))


def test_cross_entropy_tells_classes_apart_past_2_to_the_24():
    # float32 holds integers exactly only up to 2^24: class 2^24 + 1 must not match class 2^24
    classes = 2 ** 24 + 3
    logits = torch.zeros(2, classes)
    logits[:, 2 ** 24] = 10.0
    target = torch.tensor([2 ** 24 + 1, 2 ** 24])
    ref = TF.cross_entropy(logits.double(), target, reduction="none").float()  # torch's float32 is 4e-4 off
    torch.testing.assert_close(F.cross_entropy(logits, target, reduction="none"), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cross_entropy_with_classes_masked_by_minus_inf(device, dtype, reduction):
    # A class masked out with a -inf logit (as attention and vocabulary masks do) is no NaN: the loss and
    # gradient are PyTorch's, and a row whose target is the masked class has loss +inf, as in PyTorch.
    logits = (torch.randn(5, 6, device=device, dtype=torch.float64) * 3).to(dtype)
    logits[:, 0] = float("-inf")
    logits[2, 4] = float("-inf")
    target = torch.tensor([1, 5, 3, 2, 4], device=device)
    check_same(lambda t: F.cross_entropy(t, target, reduction=reduction),
               lambda t: TF.cross_entropy(t, target, reduction=reduction), [logits], dtype)
    rows = F.cross_entropy(logits, torch.tensor([1, 5, 4, 2, 0], device=device), reduction="none")
    assert rows[[2, 4]].tolist() == [float("inf")] * 2 and torch.isfinite(rows[[0, 1, 3]]).all()


def test_cross_entropy_is_one_node_on_the_logits():
    # One C++ node (tiles::_cross_entropy) between the loss rows and the logits: the forward's own calls
    # record nothing, and the target gets no edge.
    logits = torch.randn(4, 3, requires_grad=True)
    rows = F.cross_entropy(logits, torch.tensor([0, 2, 1, 2]), reduction="none")
    assert rows.grad_fn.name() == "tiles::CrossEntropyBackward"
    assert [type(f).__name__ for f, _ in rows.grad_fn.next_functions] == ["AccumulateGrad"]
    with torch.no_grad():
        assert F.cross_entropy(logits, torch.tensor([0, 2, 1, 2]), reduction="none").grad_fn is None


def test_cross_entropy_refuses_forward_ad():
    import torch.autograd.forward_ad as fwAD
    logits = torch.randn(4, 3)
    with fwAD.dual_level():
        dual = fwAD.make_dual(logits, torch.ones_like(logits))
        with pytest.raises(NotImplementedError, match="tiles::_cross_entropy: forward-mode AD"):
            F.cross_entropy(dual, torch.tensor([0, 2, 1, 2]))


def test_cross_entropy_of_no_rows(device):
    # An empty batch: empty rows, an empty gradient, and the mean of nothing is NaN, as in PyTorch.
    logits = leaf(torch.randn(0, 5, device=device))
    target = torch.zeros(0, dtype=torch.long, device=device)
    rows = F.cross_entropy(logits, target, reduction="none")
    assert rows.shape == (0,)
    (grad,) = torch.autograd.grad(rows.sum(), logits)
    assert grad.shape == (0, 5)
    assert torch.isnan(F.cross_entropy(logits, target)) and torch.isnan(TF.cross_entropy(logits.detach(), target))


def test_cross_entropy_rejects_bad_shapes():
    with pytest.raises(ValueError, match="logits"):
        F.cross_entropy(torch.randn(2, 3, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="target"):
        F.cross_entropy(torch.randn(2, 3), torch.zeros(3, dtype=torch.long))


def test_cross_entropy_rejects_non_integer_targets():
    """PyTorch raises on a float target of shape [N]; so do we, rather than scoring no class (loss 0)."""
    logits = torch.randn(3, 4)
    for target in (torch.randn(3), torch.tensor([0.0, 1.0, 2.0]), torch.tensor([True, False, True])):
        with pytest.raises(TypeError, match="cross_entropy: target must hold integer class indices"):
            tnn.CrossEntropyLoss()(logits, target)
    for dtype in (torch.long, torch.int32, torch.uint8):
        F.cross_entropy(logits, torch.tensor([0, 1, 3], dtype=dtype))  # every integer dtype is accepted


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(device, dtype, reduction):
    """Gradients with respect to both the input and the target."""
    a, b = (torch.randn(6, 5, device=device, dtype=dtype) for _ in range(2))
    check_same(tnn.MSELoss(reduction), torch.nn.MSELoss(reduction=reduction), [a, b], dtype)


def test_loss_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(torch.randn(3), torch.randn(3), reduction="max")


# ---- matmul ------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),  # plain 2-D
    ((2, 3, 4), (2, 4, 5)),  # equal batches
    ((2, 3, 4), (4, 5)),  # batch folded into rows
    ((4, 5), (2, 5, 6)),  # 2-D a broadcast over b's batch
    ((2, 1, 3, 4), (5, 4, 6)),  # batch broadcast on both sides
    ((2, 1, 3, 4), (1, 5, 4, 6)),
    ((1, 3, 4), (2, 1, 4, 5)),  # size-1 batch against a bigger one
    ((3, 1, 2, 3, 4), (4, 5)),
    ((4,), (4,)),  # vector . vector -> 0-dim
    ((4,), (2, 4, 5)),  # vector @ batch
    ((2, 3, 4), (4,)),  # batch @ vector
    ((3, 4), (4,)),
    ((0, 3, 4), (4, 2)),  # empty batch
    ((2, 3, 0), (0, 4)),  # empty inner dim: zeros
]


@pytest.mark.parametrize("shape_a, shape_b", MATMUL_SHAPES, ids=str)
def test_matmul_matches_torch(device, dtype, shape_a, shape_b):
    a = torch.randn(shape_a, device=device, dtype=dtype)
    b = torch.randn(shape_b, device=device, dtype=dtype)
    check_same(torch_tiles.matmul, torch.matmul, [a, b], dtype)


def test_matmul_strided_operands(device, dtype):
    """Transposed and sliced operands (whose batches reshape by copy) give the same results."""
    a = torch.randn(2, 3, 5, 4, device=device, dtype=dtype).transpose(-1, -2)[:, ::2]  # [2, 2, 4, 5]
    b = torch.randn(7, 5, device=device, dtype=dtype).T[:, 1:]  # [5, 6], column-major
    check_same(torch_tiles.matmul, torch.matmul, [a, b], dtype)
    check_same(torch_tiles.matmul, torch.matmul, [a, torch.randn(2, 1, 5, 3, device=device, dtype=dtype)], dtype)


def test_matmul_rejects_scalars():
    with pytest.raises(RuntimeError, match="at least 1 dimension"):
        torch_tiles.matmul(torch.tensor(2.0), torch.randn(3))


# ---- everything runs on tiles ops --------------------------------------------------------------

class RecordOps(TorchDispatchMode):
    """Records the name of every operator that reaches the dispatcher's kernels."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.name())
        return func(*args, **(kwargs or {}))


# Ops that compute nothing: views, dtype casts, constant factories, and the ones_like that seeds backward.
NO_COMPUTE = {"aten::view", "aten::_unsafe_view", "aten::expand", "aten::transpose.int", "aten::t",
              "aten::unsqueeze", "aten::squeeze.dim", "aten::detach", "aten::alias", "aten::_to_copy", "aten::to.dtype",
              "aten::arange", "aten::arange.start_step", "aten::new_full", "aten::new_ones", "aten::ones_like",
              "aten::scalar_tensor"}


def _case(name):
    """(function of no arguments giving an output, the leaves to differentiate) for one recorded case."""
    x = torch.randn(5, 6, requires_grad=True)
    if name == "mlp_cross_entropy":
        model = torch.nn.Sequential(tnn.Linear(6, 8), tnn.GELU(), tnn.Linear(8, 8), tnn.ReLU(), tnn.Linear(8, 3))
        target = torch.tensor([0, 2, 1, 1, 0])
        return lambda: tnn.CrossEntropyLoss()(model(x), target), [x, *model.parameters()]
    if name == "mse_3d":
        lin, target = tnn.Linear(3, 4), torch.randn(5, 2, 4, requires_grad=True)
        return lambda: F.mse_loss(lin(x.reshape(5, 2, 3)), target), [x, target, *lin.parameters()]
    if name == "softmax":
        return lambda: F.softmax(x, 0), [x]
    if name == "log_softmax":
        return lambda: F.log_softmax(x, 1), [x]
    b = torch.randn(1, 3, 6, 2, requires_grad=True)  # "matmul_broadcast": both batches expand
    return lambda: torch_tiles.matmul(x.reshape(5, 1, 1, 6), b), [x, b]


@pytest.mark.parametrize("name", ["mlp_cross_entropy", "mse_3d", "softmax", "log_softmax", "matmul_broadcast"])
def test_forward_and_backward_run_on_tiles_ops_only(name):
    """No native PyTorch kernel computes anything, in the forward or in the backward."""
    forward, leaves = _case(name)
    with RecordOps() as rec:
        out = forward()
        torch.autograd.grad(out, leaves, torch.ones_like(out))
    compute = {n for n in rec.names if n not in NO_COMPUTE and not n.startswith("tiles::")}
    assert not compute, f"native compute in a tiles forward/backward: {sorted(compute)}"


def test_matmul_of_two_matrices_is_one_bmm_node():
    # A 2-D @ 2-D product (every nn.Linear call on a batch of rows) records the bmm node alone: no views,
    # whose autograd nodes cost host time in every training step.
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    y = torch_tiles.matmul(a, b)
    assert y.grad_fn.name() == "tiles::BmmBackward", y.grad_fn.name()
    assert {type(f).__name__ for f, _ in y.grad_fn.next_functions} == {"AccumulateGrad"}


def test_matmul_of_contiguous_operands_copies_nothing():
    shapes = [((2, 3, 4, 5), (2, 3, 5, 6)), ((2, 3, 4, 5), (5, 6)), ((4, 5), (2, 3, 5, 6)), ((5,), (2, 5, 3))]
    for shape_a, shape_b in shapes:
        a, b = torch.randn(shape_a), torch.randn(shape_b)
        with RecordOps() as rec:
            torch_tiles.matmul(a, b)
        assert rec.names <= NO_COMPUTE | {"tiles::bmm"}, (shape_a, shape_b, sorted(rec.names))
