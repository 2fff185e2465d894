"""Gradients: gradcheck / gradgradcheck in float64, explicit comparisons with PyTorch's gradients where
gradcheck is ill-defined (ties, zeros of prod), and gradient dtypes."""

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from helpers import (ARITH_ZIP_FNS, COMPARE_FNS, MAP_DOMAIN, MAP_FNS, MAP_REF, REDUCE_FNS, ZIP_REF,
                     assert_close_to_ref, dtype_id, make_tensor, ref_reduce)

ops = torch.ops.tiles
F64 = torch.float64
# gradient comparisons against PyTorch's own float64 gradients
GRAD_TOL = dict(rtol=1e-10, atol=1e-12)

# domains for gradcheck: away from the kinks of max/min (random continuous values never tie)
ZIP_GRAD_DOMAIN = {fn: ("real", "real") for fn in ARITH_ZIP_FNS}
ZIP_GRAD_DOMAIN.update(div=("real", "nonzero"), pow=("positive", "real"))


def leaf(shape, device, domain="real", layout="contiguous", dtype=F64):
    return make_tensor(shape, dtype, device, layout, domain=domain).detach().requires_grad_(True)


# ----------------------------------------------------------------------------------------- map

@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_gradcheck(fn, device):
    x = leaf((3, 4), device, MAP_DOMAIN[fn])
    f = lambda t: ops.map(t, fn)  # noqa: E731
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_grad_matches_torch_on_strided_input(fn, device):
    base = leaf((4, 5), device, MAP_DOMAIN[fn])
    grad_out = torch.randn(5, 4, dtype=F64, device=device)
    out = ops.map(base.t(), fn)
    (g,) = torch.autograd.grad(out, base, grad_out)
    ref_base = base.detach().clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(MAP_REF[fn](ref_base.t()), ref_base, grad_out)
    torch.testing.assert_close(g, g_ref, **GRAD_TOL)


@pytest.mark.parametrize("fn", MAP_FNS)
def test_map_grad_at_zero_matches_torch(fn, device):
    # README lists pow as the only op whose gradients differ from PyTorch at singular points, so at
    # x = 0 (the kink of abs/relu, the pole of log/inv/sqrt's gradient) the gradients equal torch's
    x = torch.tensor([0.0, -0.0, 1.0], dtype=F64, device=device, requires_grad=True)
    out = ops.map(x, fn)
    (g,) = torch.autograd.grad(out, x, torch.ones_like(out))
    x2 = x.detach().clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(MAP_REF[fn](x2), x2, torch.ones_like(out))
    torch.testing.assert_close(g, g_ref, **GRAD_TOL, equal_nan=True)


@pytest.mark.parametrize("create_graph", [False, True], ids=["kernel", "composite"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_relu_grad_at_nan_and_inf_matches_torch(dtype, create_graph, device):
    # torch's threshold_backward selects: a NaN x passes the gradient, an inactive x (<= 0) drops even an
    # inf or NaN one. The kernel (first-order backward) matches all of it; the differentiable form
    # (create_graph) multiplies by a mask, so it matches at a NaN x and at finite gradients only.
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([nan, 2.0, -1.0, 0.0, -0.0, -3.0, nan, 1.0], dtype=dtype, device=device, requires_grad=True)
    g = torch.tensor([1.5, 1.5, inf, nan, -inf, 2.0, nan, inf], dtype=dtype, device=device)
    if create_graph:
        g = g.clone().requires_grad_(True)
    (got,) = torch.autograd.grad(ops.map(x, "relu"), x, g, create_graph=create_graph)
    (ref,) = torch.autograd.grad(torch.relu(x), x, g)
    checked = slice(None) if not create_graph else [0, 1, 5, 6, 7]  # NaN x, finite g, active inf g
    torch.testing.assert_close(got[checked], ref[checked], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("op", ["relu", "abs", "max", "min", "maximum"])
def test_gradient_penalty_through_masks_matches_torch(op, device):
    # The gradient of a gradient with respect to the input (a gradient penalty): the input reaches it
    # only through relu's / abs's / max's masks, whose derivative is zero. torch gives zeros for relu and
    # abs; for amax / maximum it calls the input unused (None here), where tiles gives zeros.
    ours = {"relu": lambda t: ops.map(t, "relu"), "abs": lambda t: ops.map(t, "abs"),
            "max": lambda t: ops.reduce(t, [1], "max"), "min": lambda t: ops.reduce(t, [1], "min"),
            "maximum": lambda t: ops.zip(t, t.flip(0), "max")}[op]
    theirs = {"relu": torch.relu, "abs": torch.abs, "max": lambda t: t.amax(1), "min": lambda t: t.amin(1),
              "maximum": lambda t: torch.maximum(t, t.flip(0))}[op]
    x0, w0 = torch.randn(4, 3, dtype=F64, device=device), torch.randn(3, 3, dtype=F64, device=device)
    results = []
    for f in (ours, theirs):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        (gx,) = torch.autograd.grad(f(x @ w).sum(), x, create_graph=True)
        results.append(torch.autograd.grad((gx ** 2).sum(), (w, x), allow_unused=f is theirs))
    assert all(g is not None for g in results[0])
    for got, want, like in zip(*results, (w0, x0)):
        torch.testing.assert_close(got, torch.zeros_like(like) if want is None else want, **GRAD_TOL)


def test_zip_gradient_rounds_a_wider_zero_dim_operand(device):
    # A float32 0-dim factor of a float16 tensor enters the product and its gradient rounded to float16,
    # as every torch op but mul / div with the 0-dim operand second rounds it (those two keep its value).
    s = torch.tensor(0.1, device=device, requires_grad=True)
    s16 = s.detach().half().float()
    t = torch.tensor([0.3, -2.0, 7.0], dtype=torch.float16, device=device, requires_grad=True)
    g = torch.tensor([1.0, 0.5, -3.0], dtype=torch.float16, device=device)
    for fn, grad_t in (("mul", g.float() * s16), ("div", g.float() / s16)):
        got_t, got_s = torch.autograd.grad(ops.zip(t, s, fn), (t, s), g)
        assert got_t.dtype == torch.float16 and got_s.dtype == torch.float32
        torch.testing.assert_close(got_t, grad_t.half(), rtol=0, atol=0)
    # -3 * 0.1 rounds to another float16 than -3 * float16(0.1): the test tells the two apart
    assert (g.float() * s16).half()[2] != (g.float() * 0.1).half()[2]


def test_map_gradcheck_zero_dim_and_empty(device):
    x = leaf((), device)
    assert gradcheck(lambda t: ops.map(t, "tanh"), (x,))
    e = leaf((0, 3), device)
    out = ops.map(e, "sin")
    (g,) = torch.autograd.grad(out, e, torch.ones_like(out))
    assert g.shape == (0, 3)


# ----------------------------------------------------------------------------------------- zip

ZIP_GRAD_SHAPES = {
    "same": ((3, 4), (3, 4)),
    "row": ((3, 4), (4,)),
    "column": ((3, 1), (3, 4)),
    "both_ways": ((3, 1, 4), (5, 1)),
    "zero_dim": ((), (2, 3)),
}


@pytest.mark.parametrize("shapes", ZIP_GRAD_SHAPES.values(), ids=ZIP_GRAD_SHAPES.keys())
@pytest.mark.parametrize("fn", ARITH_ZIP_FNS)
def test_zip_gradcheck(fn, shapes, device):
    dom_a, dom_b = ZIP_GRAD_DOMAIN[fn]
    a = leaf(shapes[0], device, dom_a)
    b = leaf(shapes[1], device, dom_b)
    f = lambda s, t: ops.zip(s, t, fn)  # noqa: E731
    assert gradcheck(f, (a, b))
    assert gradgradcheck(f, (a, b))


@pytest.mark.parametrize("shapes", ZIP_GRAD_SHAPES.values(), ids=ZIP_GRAD_SHAPES.keys())
@pytest.mark.parametrize("fn", ARITH_ZIP_FNS)
def test_zip_grad_matches_torch(fn, shapes, device):
    # also pins down that broadcast gradients are summed back to each input's shape
    dom_a, dom_b = ZIP_GRAD_DOMAIN[fn]
    a = leaf(shapes[0], device, dom_a)
    b = leaf(shapes[1], device, dom_b)
    out = ops.zip(a, b, fn)
    grad_out = torch.randn_like(out)
    ga, gb = torch.autograd.grad(out, (a, b), grad_out)
    a2, b2 = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    ga_ref, gb_ref = torch.autograd.grad(ZIP_REF[fn](a2, b2), (a2, b2), grad_out)
    assert ga.shape == a.shape and gb.shape == b.shape
    torch.testing.assert_close(ga, ga_ref, **GRAD_TOL)
    torch.testing.assert_close(gb, gb_ref, **GRAD_TOL)


@pytest.mark.parametrize("shapes", [((4, 6), (4, 6)), ((4, 6), (6,)), ((4, 1), (4, 6))],
                         ids=["same", "row", "column"])
@pytest.mark.parametrize("fn", ["max", "min"])
def test_zip_max_min_ties_split_gradient_like_torch(fn, shapes, device):
    # gradcheck is ill-defined at a tie; torch.maximum / torch.minimum give each side half
    a = make_tensor(shapes[0], F64, device, domain="grid")
    b = make_tensor(shapes[1], F64, device, domain="grid")
    # force ties in a good share of positions
    big = torch.broadcast_shapes(a.shape, b.shape)
    if b.shape == big:
        b = torch.where(torch.rand(big, device=device) < 0.5, a.expand(big), b)
    else:
        a = torch.where(torch.rand(big, device=device) < 0.5, b.expand(big), a.expand(big)).clone()
    assert (a == b).any()
    a.requires_grad_(True)
    b.requires_grad_(True)
    out = ops.zip(a, b, fn)
    grad_out = torch.randn_like(out)
    ga, gb = torch.autograd.grad(out, (a, b), grad_out)
    a2, b2 = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    ga_ref, gb_ref = torch.autograd.grad(ZIP_REF[fn](a2, b2), (a2, b2), grad_out)
    torch.testing.assert_close(ga, ga_ref, **GRAD_TOL)
    torch.testing.assert_close(gb, gb_ref, **GRAD_TOL)


@pytest.mark.parametrize("fn", ["add", "mul", "sub", "div", "max", "pow"])
def test_zip_same_tensor_as_both_args_grad(fn, device):
    # both gradient contributions land on the one tensor (max: a tie everywhere, 1/2 + 1/2)
    a = leaf((3, 4), device, "positive")
    out = ops.zip(a, a, fn)
    grad_out = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, a, grad_out)
    a2 = a.detach().clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(ZIP_REF[fn](a2, a2), a2, grad_out)
    torch.testing.assert_close(g, g_ref, **GRAD_TOL)


def test_zip_grad_of_empty_broadcast(device):
    # a [0, 3] + [3]: the gradient of b sums over an empty dim, so it is zero
    a = leaf((0, 3), device)
    b = leaf((3,), device)
    out = ops.zip(a, b, "mul")
    ga, gb = torch.autograd.grad(out, (a, b), torch.randn_like(out))
    assert ga.shape == (0, 3)
    torch.testing.assert_close(gb, torch.zeros(3, dtype=F64, device=device), rtol=0, atol=0)


@pytest.mark.parametrize("fn", COMPARE_FNS)
def test_comparisons_have_zero_gradient(fn, device):
    a = leaf((3, 4), device, "coarse")
    b = leaf((4,), device, "coarse")
    out = ops.zip(a, b, fn)
    assert_close_to_ref(out, ZIP_REF[fn](a.detach(), b.detach()), exact=True)
    if not out.requires_grad:
        return  # treated as non-differentiable: fine
    # and inside a differentiable expression the comparison contributes nothing
    grads = torch.autograd.grad((out * 3.0).sum(), (a, b))  # a zero, not "unused"
    for g, t in zip(grads, (a, b)):
        assert g.shape == t.shape and g.dtype == t.dtype and (g == 0).all()


def test_comparison_inside_differentiable_expression(device):
    # out = x * (x > 0): gradient is (x > 0), the comparison adds nothing
    x = leaf((5, 3), device, "nonzero")
    mask = ops.zip(x, torch.zeros((), dtype=F64, device=device), "gt")
    out = ops.zip(x, mask, "mul")
    (g,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(g, (x.detach() > 0).double(), rtol=0, atol=0)


# -------------------------------------------------------------------------------------- reduce

REDUCE_GRAD_DIMS = {"None": None, "1": [1], "0,2": [0, 2], "-1": [-1], "all": [0, 1, 2]}
REDUCE_GRAD_DOMAIN = {"sum": "real", "mean": "real", "prod": "near_one", "max": "real", "min": "real", "logsumexp": "real"}


@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keepdim"])
@pytest.mark.parametrize("dim", REDUCE_GRAD_DIMS.values(), ids=REDUCE_GRAD_DIMS.keys())
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_gradcheck(fn, dim, keepdim, device):
    # continuous random values: no ties for max/min
    x = leaf((2, 3, 4), device, REDUCE_GRAD_DOMAIN[fn], layout="permuted")
    f = lambda t: ops.reduce(t, dim, fn, keepdim=keepdim)  # noqa: E731
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


@pytest.mark.parametrize("dim", [None, [0], [-1]], ids=["None", "0", "-1"])
@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_gradcheck_zero_dim(fn, dim, device):
    x = leaf((), device, REDUCE_GRAD_DOMAIN[fn])
    for keepdim in (False, True):
        f = lambda t: ops.reduce(t, dim, fn, keepdim=keepdim)  # noqa: E731
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))


def _with_zeros(rows_zero_cols, shape, device):
    x = make_tensor(shape, F64, device, domain="near_one")
    for r, cols in rows_zero_cols.items():
        for c in cols:
            x[r, c] = 0.0
    return x.requires_grad_(True)


# row 0: no zero, row 1: one zero, row 2: two zeros, row 3: zeros at both ends, row 4: all zero
PROD_ZERO_PATTERN = {1: [2], 2: [1, 4], 3: [0, 5], 4: [0, 1, 2, 3, 4, 5]}


def _first_and_second_order(f, x, grad_out, v):
    out = f(x)
    (g,) = torch.autograd.grad(out, x, grad_out, create_graph=True)
    gx, ggo = torch.autograd.grad(g, (x, grad_out), v)
    return out, g, gx, ggo


@pytest.mark.parametrize("dim", [[-1], [0], None], ids=["rows", "columns", "all"])
def test_reduce_prod_with_zeros_matches_torch(dim, device):
    x = _with_zeros(PROD_ZERO_PATTERN, (5, 6), device)
    if dim is None:  # exactly one zero in the whole tensor
        x = _with_zeros({2: [3]}, (5, 6), device)
    ours = lambda t: ops.reduce(t, dim, "prod")  # noqa: E731
    theirs = (lambda t: torch.prod(t)) if dim is None else (lambda t: torch.prod(t, dim[0]))
    out_shape = ours(x.detach()).shape
    grad_out = torch.randn(out_shape, dtype=F64, device=device, requires_grad=True)
    v = torch.randn_like(x)
    out, g, gx, ggo = _first_and_second_order(ours, x, grad_out, v)
    x2 = x.detach().clone().requires_grad_(True)
    out_r, g_r, gx_r, ggo_r = _first_and_second_order(theirs, x2, grad_out, v)
    torch.testing.assert_close(out, out_r, **GRAD_TOL)
    torch.testing.assert_close(g, g_r, **GRAD_TOL)
    torch.testing.assert_close(gx, gx_r, **GRAD_TOL)
    torch.testing.assert_close(ggo, ggo_r, **GRAD_TOL)
    assert torch.isfinite(g).all() and torch.isfinite(gx).all()


def test_reduce_prod_gradient_with_an_infinite_element(device):
    # 0 * inf in the zero bookkeeping once made every gradient of the slice NaN; torch gives the
    # products of the other elements (inf, and inf / inf = NaN at an infinite element). A slice that
    # also holds a zero still differs (README).
    inf = float("inf")
    for row in ([1.0, inf, 3.0, 2.0], [-2.0, 0.5, -inf, 4.0], [inf, 1.0, -inf, 2.0]):
        x = torch.tensor([row, [1.0, 2.0, 3.0, 4.0]], dtype=F64, device=device, requires_grad=True)
        (got,) = torch.autograd.grad(ops.reduce(x, [1], "prod").sum(), x)
        x2 = x.detach().clone().requires_grad_(True)
        (want,) = torch.autograd.grad(x2.prod(1).sum(), x2)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("zeros", [{0: [1]}, {0: [1, 3]}, {0: [0, 1, 2, 3]}],
                         ids=["one_zero", "two_zeros", "all_zeros"])
def test_reduce_prod_gradcheck_with_zeros(zeros, device):
    # prod is a polynomial, so gradcheck is well defined at zeros too
    x = _with_zeros(zeros, (2, 4), device)
    f = lambda t: ops.reduce(t, [1], "prod")  # noqa: E731
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keepdim"])
@pytest.mark.parametrize("dim", [[-1], [0, 2], None], ids=["-1", "0,2", "None"])
@pytest.mark.parametrize("fn", ["max", "min"])
def test_reduce_max_min_ties_share_gradient_like_torch(fn, dim, keepdim, device):
    x = make_tensor((3, 4, 5), F64, device, domain="coarse").requires_grad_(True)  # many ties
    out = ops.reduce(x, dim, fn, keepdim=keepdim)
    grad_out = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, x, grad_out)
    x2 = x.detach().clone().requires_grad_(True)
    torch_fn = torch.amax if fn == "max" else torch.amin
    dims = tuple(range(3)) if dim is None else tuple(dim)
    (g_ref,) = torch.autograd.grad(torch_fn(x2, dim=dims, keepdim=keepdim), x2, grad_out)
    torch.testing.assert_close(g, g_ref, **GRAD_TOL)


@pytest.mark.parametrize("fn", REDUCE_FNS)
def test_reduce_grad_matches_torch_on_expanded_input(fn, device):
    # the input is a stride-0 view: gradient flows back to the small base tensor
    base = leaf((3, 1, 5), device, REDUCE_GRAD_DOMAIN[fn])
    out = ops.reduce(base.expand(3, 4, 5), [0, 1], fn)
    grad_out = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, base, grad_out)
    b2 = base.detach().clone().requires_grad_(True)
    ref = ref_reduce(b2.expand(3, 4, 5), [0, 1], fn)
    (g_ref,) = torch.autograd.grad(ref, b2, grad_out)
    torch.testing.assert_close(g, g_ref, **GRAD_TOL)


# ----------------------------------------------------------------------------------------- bmm

BMM_GRAD_CASES = {
    "3d": ((2, 3, 4), (2, 4, 5)),
    "2d": ((3, 4), (4, 5)),
    "batch1_left": ((1, 3, 4), (3, 4, 5)),
    "batch1_right": ((3, 3, 4), (1, 4, 5)),
    "2d_left": ((3, 4), (2, 4, 5)),
    "2d_right": ((2, 3, 4), (4, 5)),
}


@pytest.mark.parametrize("shapes", BMM_GRAD_CASES.values(), ids=BMM_GRAD_CASES.keys())
def test_bmm_gradcheck(shapes, device):
    a = leaf(shapes[0], device)
    b = leaf(shapes[1], device)
    assert gradcheck(ops.bmm, (a, b))
    assert gradgradcheck(ops.bmm, (a, b))


def test_bmm_gradcheck_transposed_views(device):
    # bases are [B, K, M] and [B, N, K]; the op sees transposed strided views
    at = leaf((2, 4, 3), device)
    bt = leaf((2, 5, 4), device)
    f = lambda s, t: ops.bmm(s.transpose(1, 2), t.mT)  # noqa: E731
    assert gradcheck(f, (at, bt))
    assert gradgradcheck(f, (at, bt))


@pytest.mark.parametrize("shapes", BMM_GRAD_CASES.values(), ids=BMM_GRAD_CASES.keys())
def test_bmm_grad_matches_torch(shapes, device):
    a = leaf(shapes[0], device)
    b = leaf(shapes[1], device)
    out = ops.bmm(a, b)
    grad_out = torch.randn_like(out)
    ga, gb = torch.autograd.grad(out, (a, b), grad_out)
    a2, b2 = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    ga_ref, gb_ref = torch.autograd.grad(torch.matmul(a2, b2), (a2, b2), grad_out)
    torch.testing.assert_close(ga, ga_ref, **GRAD_TOL)
    torch.testing.assert_close(gb, gb_ref, **GRAD_TOL)


def test_bmm_grad_with_k_zero(device):
    a = leaf((2, 3, 0), device)
    b = leaf((2, 0, 4), device)
    out = ops.bmm(a, b)
    ga, gb = torch.autograd.grad(out, (a, b), torch.randn_like(out))
    assert ga.shape == a.shape and gb.shape == b.shape


# ------------------------------------------------------------------------------ gradient dtypes

LOW_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# loose: only checks the gradient is the right function, in the input's dtype
LOW_GRAD_TOL = {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-4, atol=1e-5),
                torch.bfloat16: dict(rtol=3e-2, atol=3e-2), torch.float16: dict(rtol=5e-3, atol=5e-3)}


def _ref_grad_close(g, g_ref, dtype):
    assert g.dtype == dtype, (g.dtype, dtype)
    tol = LOW_GRAD_TOL[dtype]
    # absolute slack scaled by the gradient's magnitude: sums of rounded terms may cancel
    atol = tol["atol"] * (1.0 + g_ref.abs().max().item())
    torch.testing.assert_close(g.double(), g_ref.double(), rtol=tol["rtol"], atol=atol)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
def test_map_grad_dtype(dtype, device):
    x = leaf((4, 5), device, dtype=dtype)
    out = ops.map(x, "sin")  # a well-conditioned gradient (cos x), no cancellation
    go = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, x, go)
    x64 = x.detach().double().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(torch.sin(x64), x64, go.double())
    _ref_grad_close(g, g_ref, dtype)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("fn", ["sum", "mean", "max"])
def test_reduce_grad_dtype(fn, dtype, device):
    x = leaf((4, 5), device, "real", dtype=dtype)
    out = ops.reduce(x, [1], fn)
    go = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, x, go)
    x64 = x.detach().double().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(ref_reduce(x64, [1], fn), x64, go.double())
    _ref_grad_close(g, g_ref, dtype)


@pytest.mark.parametrize("dtype", LOW_DTYPES, ids=dtype_id)
def test_bmm_grad_dtype(dtype, device):
    a = leaf((2, 3, 4), device, dtype=dtype)
    b = leaf((4, 5), device, dtype=dtype)
    out = ops.bmm(a, b)
    go = torch.randn_like(out)
    ga, gb = torch.autograd.grad(out, (a, b), go)
    a64 = a.detach().double().requires_grad_(True)
    b64 = b.detach().double().requires_grad_(True)
    ga_ref, gb_ref = torch.autograd.grad(torch.matmul(a64, b64), (a64, b64), go.double())
    _ref_grad_close(ga, ga_ref, dtype)
    _ref_grad_close(gb, gb_ref, dtype)


@pytest.mark.parametrize("fn", ["add", "mul", "div", "max"])
@pytest.mark.parametrize("dtypes", [(torch.float16, torch.float32), (torch.float32, torch.bfloat16),
                                    (torch.bfloat16, torch.float64)], ids=dtype_id)
def test_zip_mixed_dtype_grads_have_input_dtypes(fn, dtypes, device):
    a = leaf((3, 4), device, dtype=dtypes[0])
    b = leaf((4,), device, "nonzero", dtype=dtypes[1])
    out = ops.zip(a, b, fn)
    assert out.dtype == torch.promote_types(*dtypes)
    go = torch.randn_like(out)
    ga, gb = torch.autograd.grad(out, (a, b), go)
    a64 = a.detach().double().requires_grad_(True)
    b64 = b.detach().double().requires_grad_(True)
    ga_ref, gb_ref = torch.autograd.grad(ZIP_REF[fn](a64, b64), (a64, b64), go.double())
    # each gradient in its own input's dtype, within that dtype's rounding
    _ref_grad_close(ga, ga_ref, dtypes[0])
    _ref_grad_close(gb, gb_ref, dtypes[1])


# ----------------------------------------------------------------------------------------- the autograd nodes

# One call of each op whose backward reads saved values: an input (map sin, zip mul, reduce prod, bmm), the
# op's own output (map exp, reduce max: saved without a reference to their node, recovered at unpack).
SAVING_CALLS = {
    "map sin": lambda x: ops.map(x, "sin"),
    "map exp": lambda x: ops.map(x, "exp"),
    "zip mul": lambda x: ops.zip(x, x.detach() + 1, "mul"),
    "reduce prod": lambda x: ops.reduce(x, [1], "prod"),
    "reduce max": lambda x: ops.reduce(x, [0], "max", True),
    "bmm": lambda x: ops.bmm(x, x.detach().t() + 1),
}


@pytest.mark.parametrize("call", SAVING_CALLS)
def test_second_backward_through_freed_graph_raises(call, device):
    x = leaf((3, 3), device)
    out = SAVING_CALLS[call](x).sum()
    out.backward(retain_graph=True)
    first = x.grad.clone()
    out.backward()  # retained: runs again and accumulates
    torch.testing.assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()  # the saved values were released by the backward before


@pytest.mark.parametrize("call", SAVING_CALLS)
def test_saved_values_go_through_saved_tensor_hooks(call, device):
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return t

    def unpack(t):
        unpacked.append(t.shape)
        return t

    x = leaf((3, 3), device)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = SAVING_CALLS[call](x).sum()
    (g,) = torch.autograd.grad(out, x)
    (g_plain,) = torch.autograd.grad(SAVING_CALLS[call](x).sum(), x)
    assert packed and len(unpacked) == len(packed), (packed, unpacked)
    torch.testing.assert_close(g, g_plain)


def test_in_place_change_of_a_saved_input_is_detected(device):
    x = leaf((3, 4), device)
    y = x * 1
    out = ops.map(y, "sin")
    y.add_(1)  # sin's gradient reads y, which has changed since
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("call, name", [(lambda x: ops.map(x, "exp"), "tiles::MapBackward"),
                                        (lambda x: ops.zip(x, x, "add"), "tiles::ZipBackward"),
                                        (lambda x: ops.reduce(x, None, "sum"), "tiles::ReduceBackward"),
                                        (lambda x: ops.bmm(x, x), "tiles::BmmBackward")])
def test_nodes_are_named_and_point_at_their_inputs(call, name, device):
    x = leaf((3, 3), device)
    out = call(x)
    assert out.grad_fn.name() == name
    assert all(type(f).__name__ == "AccumulateGrad" for f, _ in out.grad_fn.next_functions)


class CountCalls(TorchDispatchMode):
    """Counts the calls of each operator that reach the dispatcher's kernels."""

    def __init__(self):
        super().__init__()
        self.counts = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.name()] = self.counts.get(func.name(), 0) + 1
        return func(*args, **(kwargs or {}))


def test_gradient_only_for_the_operand_asked_for(device):
    # Both operands require grad, only a's gradient is asked for: b's (a product and a sum over the
    # broadcast dim) is not computed.
    a, b = leaf((3, 4), device), leaf((4,), device)
    out = ops.zip(a, b, "mul")
    with CountCalls() as calls:
        (ga,) = torch.autograd.grad(out, a, torch.ones_like(out))
    torch.testing.assert_close(ga, b.detach().expand(3, 4))
    assert calls.counts.get("tiles::zip") == 1 and "tiles::reduce" not in calls.counts, calls.counts
    w = leaf((4, 5), device)
    out = ops.bmm(a, w)
    with CountCalls() as calls:
        torch.autograd.grad(out, w, torch.ones_like(out))
    assert calls.counts.get("tiles::bmm") == 1, calls.counts  # aᵀ @ grad only


@pytest.mark.parametrize("call", [lambda x: ops.map(x, "exp"), lambda x: ops.zip(x, x, "mul"),
                                  lambda x: ops.reduce(x, None, "sum"), lambda x: ops.bmm(x, x)],
                         ids=["map", "zip", "reduce", "bmm"])
def test_forward_mode_ad_is_refused(call, device):
    # No forward derivatives: a dual tensor's tangent must not be dropped silently.
    import torch.autograd.forward_ad as fwAD
    x = make_tensor((3, 3), F64, device, "contiguous")
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        with pytest.raises(NotImplementedError, match="forward-mode AD is not supported"):
            call(dual)
