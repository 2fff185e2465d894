"""Property-based fuzzing (hypothesis) of map / zip / reduce / bmm and their gradients against PyTorch.

Every draw builds its inputs from a printable spec (shape, memory layout, value seed), runs the tiles op
and compares with PyTorch computing the same in float64 on the CPU, with the dtype-aware tolerances of
``helpers.TOL``. A failure prints the drawn spec (``Draw n (label): ...``) plus a ``note`` with the
strides and storage offsets the op saw, and a ``@reproduce_failure`` blob.

What is drawn:
* shapes of rank 0-6, sizes 0..5 (mostly 1..4);
* memory layouts: contiguous, or the dims stored in a random order (permuted / transposed), each dim
  sliced with step 1-3 from a random start, random size-1 dims expanded to stride 0, and a random
  extra storage offset; the storage around the view is NaN, so a read outside the view shows up;
* broadcast-compatible pairs (and incompatible ones, which must raise) for zip, with independent,
  usually mixed, float dtypes; every dtype and, by parametrization, every fn of map / zip / reduce;
* reduce dim lists: None, [], distinct dims in any order written positively or negatively, keepdim;
  repeated and out-of-range dims must raise RuntimeError;
* bmm: 2-D / 3-D operands, transposed and strided layouts, batch broadcasting, sizes 0..9;
* gradients (and second-order gradients) in float64 for every differentiable op, on domain-safe
  inputs, against ``torch.autograd.grad`` of the PyTorch reference for random upstream gradients.

Profiles (selected by TILES_FUZZ_PROFILE; TILES_FUZZ_EXAMPLES=<n> overrides the number of draws):
* ``ci`` (default): a few dozen draws per test, the whole file in well under two minutes on 2 cores;
* ``long``: 3000 draws per test, for the GPU machine, e.g.
  ``TILES_FUZZ_PROFILE=long pytest -q tests/test_fuzz.py --hypothesis-show-statistics``.
The profiles are registered as ``tiles-fuzz-ci`` / ``tiles-fuzz-long`` and applied to this file's tests
only: registering a profile named ``ci`` would replace the profile Hypothesis itself loads when the CI
environment variable is set (``.ci/run`` sets it), and with it every other hypothesis test's settings.
"""

import math
import os
from dataclasses import dataclass

import pytest
import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from helpers import (ARITH_ZIP_FNS, COMPARE_FNS, FLOAT_DTYPES, MAP_DOMAIN, MAP_FNS, MAP_REF, REDUCE_DOMAIN,
                     REDUCE_FNS, TOL, ZIP_DOMAIN, ZIP_EXACT, ZIP_FNS, ZIP_REF, assert_close_to_ref,
                     assert_elementwise_layout, assert_reduce_close, normalize_dims, rand_values, ref_reduce)

# ------------------------------------------------------------------------------------------ profiles

_SUPPRESS = [HealthCheck.function_scoped_fixture,  # `device` is constant across the draws of a test
             HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("tiles-fuzz-ci", max_examples=50, deadline=None, derandomize=False,
                          print_blob=True, suppress_health_check=_SUPPRESS)
settings.register_profile("tiles-fuzz-long", max_examples=3000, deadline=None, derandomize=False,
                          print_blob=True, suppress_health_check=_SUPPRESS)

PROFILE = os.environ.get("TILES_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "long"):
    raise ValueError(f"TILES_FUZZ_PROFILE must be 'ci' or 'long', not {PROFILE!r}")
FUZZ = settings.get_profile(f"tiles-fuzz-{PROFILE}")
if os.environ.get("TILES_FUZZ_EXAMPLES"):
    FUZZ = settings(FUZZ, max_examples=int(os.environ["TILES_FUZZ_EXAMPLES"]))

ops = torch.ops.tiles
F64 = torch.float64
NAN = float("nan")
# storage elements one drawn layout may allocate (steps and starts are shrunk to stay below)
MAX_STORAGE = 1 << 18

# ----------------------------------------------------------------------------------------- strategies

dtypes = st.sampled_from(FLOAT_DTYPES)
# mostly 1..4; shrinks towards 1
sizes = st.sampled_from((1, 2, 3, 4) * 4 + (5, 0))


def shapes(min_rank=0, max_rank=6):
    return st.integers(min_rank, max_rank).flatmap(
        lambda r: st.lists(sizes, min_size=r, max_size=r).map(tuple))


@dataclass(frozen=True)
class Layout:
    """How a tensor of logical shape ``shape`` sits in memory.

    perm     storage order: storage dim i holds logical dim perm[i] (outermost first)
    steps    slice step of each logical dim in the storage
    starts   slice start of each logical dim in the storage
    expand   logical dims stored with size 1 and expanded to their size (stride 0)
    offset   extra elements in front of the storage (storage_offset grows by this)
    """
    perm: tuple
    steps: tuple
    starts: tuple
    expand: tuple
    offset: int


@dataclass(frozen=True)
class Spec:
    """A drawn input: logical shape, memory layout and the seed of its values."""
    shape: tuple
    layout: Layout
    seed: int


def contiguous_layout(rank):
    return Layout(tuple(range(rank)), (1,) * rank, (0,) * rank, (), 0)


def _extents(base_shape, steps, starts):
    return [start + n * step for n, step, start in zip(base_shape, steps, starts)]


@st.composite
def layouts(draw, shape):
    rank = len(shape)
    if draw(st.sampled_from(["contiguous", "strided", "strided", "strided"])) == "contiguous":
        return contiguous_layout(rank)
    perm = tuple(draw(st.permutations(range(rank))))
    steps = list(draw(st.lists(st.sampled_from((1, 1, 2, 3)), min_size=rank, max_size=rank)))
    starts = list(draw(st.lists(st.integers(0, 2), min_size=rank, max_size=rank)))
    expand_flags = draw(st.lists(st.sampled_from((False, False, False, True)), min_size=rank,
                                 max_size=rank))
    offset = draw(st.integers(0, 5))
    expand = tuple(d for d in range(rank) if expand_flags[d])
    base = [1 if d in expand else n for d, n in enumerate(shape)]
    # keep the storage small: drop steps, then starts, of the largest dims first
    while math.prod(_extents(base, steps, starts)) > MAX_STORAGE:
        d = max(range(rank), key=lambda i: (steps[i] > 1, starts[i] > 0, base[i]))
        if steps[d] > 1:
            steps[d] = 1
        elif starts[d] > 0:
            starts[d] = 0
        else:
            break
    return Layout(perm, tuple(steps), tuple(starts), expand, offset)


@st.composite
def specs(draw, shape):
    return Spec(tuple(shape), draw(layouts(tuple(shape))), draw(st.integers(0, 2**32 - 1)))


def base_shape(spec):
    """The shape of the values behind a spec: its shape with the expanded dims at size 1."""
    return tuple(1 if d in spec.layout.expand else n for d, n in enumerate(spec.shape))


@st.composite
def broadcast_pairs(draw):
    """Two shapes that broadcast: each a suffix of one common shape with some dims set to 1."""
    out = draw(shapes())

    def operand():
        rank = draw(st.integers(0, len(out)))
        suffix = out[len(out) - rank:]
        ones = draw(st.lists(st.sampled_from((False, False, False, True)), min_size=rank, max_size=rank))
        return tuple(1 if one else n for n, one in zip(suffix, ones))

    return operand(), operand()


@st.composite
def valid_dims(draw, rank):
    """None, [] or distinct dims in random order, each possibly written negatively."""
    kind = draw(st.sampled_from(["subset", "subset", "none", "empty"]))
    if kind == "none":
        return None
    if kind == "empty":
        return []
    wrap = max(rank, 1)  # a 0-dim tensor has one addressable dim, 0 / -1
    chosen = draw(st.lists(st.integers(0, wrap - 1), unique=True, min_size=1, max_size=wrap))
    negative = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    return [d - wrap if neg else d for d, neg in zip(chosen, negative)]


# --------------------------------------------------------------------------------- building inputs

def draw_values(shape, domain, generator):
    """float64 CPU values. ``domain`` is a helpers.rand_values domain, or ("prod", n): +-(1 + u) with
    |u| <= min(1/4, 2.5/sqrt(n)), so that log|product| has a standard deviation of at most ~1.5 when
    the reduction multiplies n independent factors (see reduce_domain); far inside float16's range."""
    if isinstance(domain, tuple) and domain[0] == "prod":
        delta = min(0.25, 2.5 / math.sqrt(max(domain[1], 1)))
        mag = 1 + delta * (torch.rand(shape, dtype=F64, generator=generator) * 2 - 1)
        sign = torch.randint(0, 2, shape, generator=generator).double() * 2 - 1
        return mag * sign
    return rand_values(shape, domain, generator=generator)


def place(values, spec, device):
    """Lay ``values`` (of ``base_shape(spec)``, already of the wanted dtype) out in device memory as
    ``spec.layout`` says, inside a NaN-filled buffer, and return the view of shape ``spec.shape``.
    Differentiable with respect to ``values``."""
    layout, shape = spec.layout, spec.shape
    rank = len(shape)
    base = list(values.shape)
    assert base == list(base_shape(spec)), (base, spec)
    s_sizes = [base[p] for p in layout.perm]
    s_steps = [layout.steps[p] for p in layout.perm]
    s_starts = [layout.starts[p] for p in layout.perm]
    extent = _extents(s_sizes, s_steps, s_starts)
    buf = torch.full((layout.offset + math.prod(extent),), NAN, dtype=values.dtype, device=device)
    storage = buf[layout.offset:].view(extent)
    view = storage[tuple(slice(a, a + n * s, s) for n, s, a in zip(s_sizes, s_steps, s_starts))]
    view = view.permute([layout.perm.index(d) for d in range(rank)])
    view.copy_(values.to(device))
    x = view.expand(shape)
    assert tuple(x.shape) == shape and x.dtype == values.dtype
    return x


def build(spec, dtype, domain, device, *, round_through=None):
    """The tensor a spec describes, of ``dtype`` on ``device``. ``round_through``: round the values
    through that dtype too (0-dim zip operands, see test_zip._zero_dim)."""
    gen = torch.Generator().manual_seed(spec.seed)
    values = draw_values(base_shape(spec), domain, gen).to(dtype)
    if round_through is not None:
        values = values.to(round_through).to(dtype)
    x = place(values, spec, device)
    note(f"{dtype} {tuple(x.shape)} strides={x.stride()} storage_offset={x.storage_offset()}")
    return x


def grad_leaf(spec, domain, device):
    """float64 leaf of base_shape(spec) on ``device`` and the view of it the op sees."""
    gen = torch.Generator().manual_seed(spec.seed)
    leaf = draw_values(base_shape(spec), domain, gen).to(device).requires_grad_(True)
    x = place(leaf, spec, device)
    note(f"float64 {tuple(x.shape)} strides={x.stride()} storage_offset={x.storage_offset()}")
    return leaf, x


def cpu_leaf(leaf):
    return leaf.detach().cpu().requires_grad_(True)


def randn(shape, seed, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), dtype=F64, generator=gen).to(device)


def expected_result_type(shape_a, dtype_a, shape_b, dtype_b):
    return torch.result_type(torch.empty(shape_a, dtype=dtype_a, device="meta"),
                             torch.empty(shape_b, dtype=dtype_b, device="meta"))


def reduced_numel(shape, dim):
    return math.prod(shape[d] for d in normalize_dims(dim, len(shape))) if shape else 1


def check_output(out, shape, dtype, device, layout_from=None):
    """layout_from: the inputs of map or zip, whose layout rule (README) the output follows; reduce
    and bmm outputs are contiguous."""
    assert tuple(out.shape) == tuple(shape), (tuple(out.shape), tuple(shape))
    assert out.dtype == dtype, (out.dtype, dtype)
    assert out.device.type == torch.device(device).type, (out.device, device)
    if layout_from is None:
        assert out.is_contiguous()
    else:
        assert_elementwise_layout(out, *layout_from)


# --------------------------------------------------------------------------------------- gradients

def assert_grads_close(grads, ref_grads, inputs, what):
    """float64 gradients against PyTorch's; None (unused) counts as zeros. The absolute slack scales
    with the largest reference gradient: gradients of broadcasts are sums of thousands of terms."""
    for i, (g, g_ref, t) in enumerate(zip(grads, ref_grads, inputs)):
        g = torch.zeros_like(t, device="cpu") if g is None else g.detach().cpu()
        g_ref = torch.zeros_like(t, device="cpu") if g_ref is None else g_ref.detach().cpu()
        assert g.shape == t.shape, (i, tuple(g.shape), tuple(t.shape))
        atol = 1e-10 * (1.0 + (g_ref.abs().max().item() if g_ref.numel() else 0.0))
        torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=atol, equal_nan=True,
                                   msg=lambda m, i=i: f"{what} gradient with respect to input {i}:\n{m}")


def check_first_and_second_order(out, theirs, leaves, seed, device):
    """Gradients of ``out`` (a tiles op's result, computed from ``leaves`` on ``device``) and of
    ``theirs(*cpu_copies_of_leaves)`` (the PyTorch reference, CPU) for one random upstream gradient,
    then the second-order gradients of <grads, v> with respect to the inputs and the upstream
    gradient, for random v."""
    ref_leaves = [cpu_leaf(t) for t in leaves]
    ref = theirs(*ref_leaves)
    assert tuple(out.shape) == tuple(ref.shape), (tuple(out.shape), tuple(ref.shape))
    go_cpu = randn(ref.shape, seed)
    go = go_cpu.to(device).requires_grad_(True)
    go_ref = go_cpu.clone().requires_grad_(True)
    grads = torch.autograd.grad(out, leaves, go, create_graph=True, allow_unused=True)
    ref_grads = torch.autograd.grad(ref, ref_leaves, go_ref, create_graph=True, allow_unused=True)
    assert_grads_close(grads, ref_grads, leaves, "first-order")

    vs = [randn(t.shape, seed + 1 + i) for i, t in enumerate(leaves)]

    def second(gs, xs, g_out, device_):
        pairs = [(g, v.to(device_)) for g, v in zip(gs, vs) if g is not None and g.requires_grad]
        if not pairs:
            return [None] * (len(xs) + 1)
        return torch.autograd.grad([g for g, _ in pairs], list(xs) + [g_out], [v for _, v in pairs],
                                   allow_unused=True)

    second_ours = second(grads, leaves, go, device)
    second_ref = second(ref_grads, ref_leaves, go_ref, "cpu")
    # (input len(leaves) is the upstream gradient)
    assert_grads_close(second_ours, second_ref, list(leaves) + [go], "second-order")


# -------------------------------------------------------------------------------------------- map

@pytest.mark.parametrize("fn", MAP_FNS)
@FUZZ
@given(data=st.data())
def test_map(fn, device, data):
    dtype = data.draw(dtypes, label="dtype")
    spec = data.draw(shapes().flatmap(specs), label="x")
    x = build(spec, dtype, MAP_DOMAIN[fn], device)
    before = x.clone()
    out = ops.map(x, fn)
    check_output(out, spec.shape, dtype, device, layout_from=(x,))
    assert_close_to_ref(out, MAP_REF[fn](x.double().cpu()), dtype,
                        exact=fn in ("id", "neg", "abs", "relu"))
    torch.testing.assert_close(x, before, rtol=0, atol=0, equal_nan=True)  # input untouched


# -------------------------------------------------------------------------------------------- zip

@pytest.mark.parametrize("fn", ZIP_FNS)
@FUZZ
@given(data=st.data())
def test_zip(fn, device, data):
    shape_a, shape_b = data.draw(broadcast_pairs(), label="shapes")
    dtype_a = data.draw(dtypes, label="dtype_a")
    dtype_b = data.draw(dtypes, label="dtype_b")
    spec_a = data.draw(specs(shape_a), label="a")
    spec_b = data.draw(specs(shape_b), label="b")
    result = expected_result_type(shape_a, dtype_a, shape_b, dtype_b)
    dom_a, dom_b = ZIP_DOMAIN[fn]
    # a 0-dim operand of a wider dtype than the result: keep its value representable in the result
    # dtype, so the reference does not depend on when the kernel rounds it (see test_zip._zero_dim)
    a = build(spec_a, dtype_a, dom_a, device, round_through=result)
    b = build(spec_b, dtype_b, dom_b, device, round_through=result)
    out = ops.zip(a, b, fn)
    assert torch.result_type(a, b) == result
    check_output(out, torch.broadcast_shapes(shape_a, shape_b), result, device, layout_from=(a, b))
    assert_close_to_ref(out, ZIP_REF[fn](a.double().cpu(), b.double().cpu()), result,
                        exact=fn in ZIP_EXACT)


@st.composite
def incompatible_pairs(draw):
    """Two shapes that do not broadcast: in one aligned dim the sizes differ and neither is 1."""
    out = list(draw(shapes(min_rank=1)))
    d = draw(st.integers(0, len(out) - 1))
    p, q = draw(st.lists(st.sampled_from((0, 2, 3, 4, 5)), min_size=2, max_size=2, unique=True))
    a, b = list(out), list(out)
    a[d], b[d] = p, q
    cut_a = draw(st.integers(0, d))  # leading dims may be missing (right alignment)
    cut_b = draw(st.integers(0, d))
    return tuple(a[cut_a:]), tuple(b[cut_b:])


@FUZZ
@given(data=st.data())
def test_zip_rejects_shapes_that_do_not_broadcast(device, data):
    shape_a, shape_b = data.draw(incompatible_pairs(), label="shapes")
    fn = data.draw(st.sampled_from(ZIP_FNS), label="fn")
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes(shape_a, shape_b)
    a = torch.ones(shape_a, device=device)
    b = torch.ones(shape_b, device=device)
    with pytest.raises(RuntimeError, match="zip"):
        ops.zip(a, b, fn)
    # the op still works afterwards
    ok = ops.zip(a, a, "add")
    torch.testing.assert_close(ok.cpu(), torch.full(shape_a, 2.0), rtol=0, atol=0)


# ----------------------------------------------------------------------------------------- reduce

def reduce_domain(fn, spec, dim):
    """prod: keep the product of the reduced elements well inside every dtype's range. An expanded
    (stride-0) dim repeats each value r times: log|product| = sum of r * log|v| over the distinct
    values, of variance n * r * var(log|v|) for n reduced elements, so draw as for n * r factors."""
    if fn != "prod":
        return REDUCE_DOMAIN[fn]
    n = reduced_numel(spec.shape, dim)
    distinct = reduced_numel(base_shape(spec), dim)
    return ("prod", n * (n // distinct if distinct else 1))


@pytest.mark.parametrize("fn", REDUCE_FNS)
@FUZZ
@given(data=st.data())
def test_reduce(fn, device, data):
    dtype = data.draw(dtypes, label="dtype")
    spec = data.draw(shapes().flatmap(specs), label="x")
    dim = data.draw(valid_dims(len(spec.shape)), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    x = build(spec, dtype, reduce_domain(fn, spec, dim), device)
    check_reduce(x, dim, fn, keepdim)


def check_reduce(x, dim, fn, keepdim):
    if fn in ("max", "min") and reduced_numel(tuple(x.shape), dim) == 0:
        # README: max/min over an empty set of elements raise
        with pytest.raises(RuntimeError, match="reduce"):
            ops.reduce(x, dim, fn, keepdim=keepdim)
        return
    before = x.clone()
    out = ops.reduce(x, dim, fn, keepdim=keepdim)
    assert_reduce_close(out, x, dim, fn, keepdim)
    torch.testing.assert_close(x, before, rtol=0, atol=0, equal_nan=True)  # input untouched


@st.composite
def bad_dims(draw, rank):
    """A dim list with a repeated dim (possibly once positive, once negative) or a dim out of range."""
    wrap = max(rank, 1)
    chosen = draw(st.lists(st.integers(0, wrap - 1), unique=True, min_size=1, max_size=wrap))
    negative = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    dims = [d - wrap if neg else d for d, neg in zip(chosen, negative)]
    if draw(st.booleans()):
        kind = "repeated"
        repeat = draw(st.sampled_from(dims))
        extra = draw(st.sampled_from([repeat, repeat + wrap if repeat < 0 else repeat - wrap]))
    else:
        kind = "out_of_range"
        extra = draw(st.one_of(st.integers(wrap, wrap + 30), st.integers(-wrap - 30, -wrap - 1)))
    pos = draw(st.integers(0, len(dims)))
    return kind, dims[:pos] + [extra] + dims[pos:]


@FUZZ
@given(data=st.data())
def test_reduce_rejects_repeated_and_out_of_range_dims(device, data):
    spec = data.draw(shapes().flatmap(specs), label="x")
    kind, dim = data.draw(bad_dims(len(spec.shape)), label="kind, dim")
    fn = data.draw(st.sampled_from(REDUCE_FNS), label="fn")
    keepdim = data.draw(st.booleans(), label="keepdim")
    x = build(spec, torch.float32, "real", device)
    with pytest.raises(RuntimeError, match="reduce"):
        ops.reduce(x, dim, fn, keepdim=keepdim)
    # a valid call right after the error works
    assert_reduce_close(ops.reduce(x, None, "sum"), x, None, "sum")


# -------------------------------------------------------------------------------------------- bmm

@st.composite
def bmm_shapes(draw):
    """Shapes of a 2-D / 3-D pair with sizes 0..9 and batch broadcasting (a batch of 1 or 2-D)."""
    form = draw(st.sampled_from(["3d_3d", "2d_2d", "2d_3d", "3d_2d"]))
    m, k, n = (draw(st.integers(0, 9)) for _ in range(3))
    batch = draw(st.integers(0, 4))
    broadcast = draw(st.sampled_from(["none", "a", "b"]))
    ba = 1 if broadcast == "a" else batch
    bb = 1 if broadcast == "b" else batch
    shape_a = (m, k) if form.startswith("2d") else (ba, m, k)
    shape_b = (k, n) if form.endswith("2d") else (bb, k, n)
    return shape_a, shape_b


def expected_bmm_shape(shape_a, shape_b):
    m, n = shape_a[-2], shape_b[-1]
    if len(shape_a) == 2 and len(shape_b) == 2:
        return (m, n)
    ba = shape_a[0] if len(shape_a) == 3 else 1
    bb = shape_b[0] if len(shape_b) == 3 else 1
    return (0 if 0 in (ba, bb) else max(ba, bb), m, n)


@pytest.mark.usefixtures("highest_float32_precision")
@FUZZ
@given(data=st.data())
def test_bmm(device, data):
    shape_a, shape_b = data.draw(bmm_shapes(), label="shapes")
    dtype = data.draw(dtypes, label="dtype")
    spec_a = data.draw(specs(shape_a), label="a")
    spec_b = data.draw(specs(shape_b), label="b")
    a = build(spec_a, dtype, "real", device)
    b = build(spec_b, dtype, "real", device)
    out = ops.bmm(a, b)
    check_output(out, expected_bmm_shape(shape_a, shape_b), dtype, device)
    a64, b64 = a.double().cpu(), b.double().cpu()
    ref = torch.matmul(a64, b64)
    out64 = out.double().cpu()
    if shape_a[-1] == 0:
        assert torch.equal(out64, torch.zeros_like(ref)), out64
        return
    # elementwise: |out - ref| <= rtol * (|a| @ |b|) + atol, the error scale of a dot product
    tol = TOL[dtype]
    bound = tol.rtol * torch.matmul(a64.abs(), b64.abs()) + tol.atol
    err = (out64 - ref).abs()
    bad = ~(err <= bound)  # NaN (a read outside an operand's view) fails too
    assert not bad.any(), (f"{int(bad.sum())} of {bad.numel()} elements off; first at "
                           f"{[i.item() for i in bad.nonzero()[0]]}: out={out64[bad][0].item()!r} "
                           f"ref={ref[bad][0].item()!r} bound={bound[bad][0].item()!r}")


@FUZZ
@given(data=st.data())
def test_bmm_rejects_mismatched_operands(device, data):
    shape_a, shape_b = data.draw(bmm_shapes(), label="shapes")
    kind = data.draw(st.sampled_from(["inner", "batch", "dtype"]), label="kind")
    dtype_a = data.draw(dtypes, label="dtype_a")
    dtype_b = dtype_a
    if kind == "inner":
        shape_b = shape_b[:-2] + (shape_b[-2] + data.draw(st.integers(1, 3)),) + shape_b[-1:]
    elif kind == "batch":
        ba = data.draw(st.sampled_from((0, 2, 3)), label="batch_a")
        bb = data.draw(st.sampled_from([s for s in (0, 2, 3, 4) if s != ba]), label="batch_b")
        shape_a, shape_b = (ba,) + shape_a[-2:], (bb,) + shape_b[-2:]
    else:
        dtype_b = data.draw(st.sampled_from([d for d in FLOAT_DTYPES if d != dtype_a]), label="dtype_b")
    a = torch.ones(shape_a, dtype=dtype_a, device=device)
    b = torch.ones(shape_b, dtype=dtype_b, device=device)
    with pytest.raises(RuntimeError, match="bmm"):
        ops.bmm(a, b)
    # still works afterwards: ones @ ones = K everywhere
    ok = ops.bmm(a, a.mT)
    torch.testing.assert_close(ok.double().cpu(), torch.full(ok.shape, float(shape_a[-1]), dtype=F64),
                               rtol=0, atol=0)


# ------------------------------------------------------------------- wide rows (vector paths, tails)

@FUZZ
@given(data=st.data())
def test_wide_elementwise_and_reduce(device, data):
    """Shapes with one long dim (1..3000): the vectorized / row / transposed / split-reduction kernel
    paths and their tails on the GPU, with sliced and transposed layouts."""
    long_dim = data.draw(st.integers(1, 3000), label="long")
    shape = list(data.draw(shapes(min_rank=1, max_rank=3), label="shape"))
    shape[data.draw(st.integers(0, len(shape) - 1), label="where")] = long_dim
    shape = tuple(shape)
    dtype = data.draw(dtypes, label="dtype")
    op = data.draw(st.sampled_from(["map", "zip", "reduce"]), label="op")
    spec = data.draw(specs(shape), label="x")
    if op == "map":
        fn = data.draw(st.sampled_from(MAP_FNS), label="fn")
        x = build(spec, dtype, MAP_DOMAIN[fn], device)
        assert_close_to_ref(ops.map(x, fn), MAP_REF[fn](x.double().cpu()), dtype,
                            exact=fn in ("id", "neg", "abs", "relu"))
    elif op == "zip":
        fn = data.draw(st.sampled_from(ZIP_FNS), label="fn")
        # the other operand: the same shape, or a broadcast row / column of it
        other = data.draw(st.sampled_from(["same", "row", "column"]), label="other")
        shape_b = {"same": shape, "row": shape[-1:],
                   "column": shape[:-1] + (1,)}[other]
        dtype_b = data.draw(dtypes, label="dtype_b")
        spec_b = data.draw(specs(shape_b), label="b")
        result = expected_result_type(shape, dtype, shape_b, dtype_b)
        a = build(spec, dtype, ZIP_DOMAIN[fn][0], device)
        b = build(spec_b, dtype_b, ZIP_DOMAIN[fn][1], device)
        out = ops.zip(a, b, fn)
        check_output(out, shape, result, device, layout_from=(a, b))
        assert_close_to_ref(out, ZIP_REF[fn](a.double().cpu(), b.double().cpu()), result,
                            exact=fn in ZIP_EXACT)
    else:
        fn = data.draw(st.sampled_from(REDUCE_FNS), label="fn")
        dim = data.draw(valid_dims(len(shape)), label="dim")
        keepdim = data.draw(st.booleans(), label="keepdim")
        x = build(spec, dtype, reduce_domain(fn, spec, dim), device)
        check_reduce(x, dim, fn, keepdim)


# ------------------------------------------------------------------------------ gradients (float64)

# domain-safe inputs: log / sqrt / inv / pow's base positive or away from 0, abs / relu off the kink
# (helpers.MAP_DOMAIN); max / min on continuous values, so no ties between a and b
ZIP_GRAD_DOMAIN = {fn: ("real", "real") for fn in ZIP_FNS}
ZIP_GRAD_DOMAIN.update(div=("real", "nonzero"), pow=("positive", "real"))
REDUCE_GRAD_DOMAIN = {"sum": "real", "mean": "real", "max": "real", "min": "real", "logsumexp": "real"}


@pytest.mark.parametrize("fn", MAP_FNS)
@FUZZ
@given(data=st.data())
def test_map_grad(fn, device, data):
    spec = data.draw(shapes().flatmap(specs), label="x")
    seed = data.draw(st.integers(0, 2**31), label="grad_seed")
    leaf, x = grad_leaf(spec, MAP_DOMAIN[fn], device)
    check_first_and_second_order(ops.map(x, fn),
                                 lambda t: MAP_REF[fn](t.expand(spec.shape)), [leaf], seed, device)


@pytest.mark.parametrize("fn", ZIP_FNS)
@FUZZ
@given(data=st.data())
def test_zip_grad(fn, device, data):
    shape_a, shape_b = data.draw(broadcast_pairs(), label="shapes")
    spec_a = data.draw(specs(shape_a), label="a")
    spec_b = data.draw(specs(shape_b), label="b")
    seed = data.draw(st.integers(0, 2**31), label="grad_seed")
    dom_a, dom_b = ZIP_GRAD_DOMAIN[fn]
    leaf_a, a = grad_leaf(spec_a, dom_a, device)
    leaf_b, b = grad_leaf(spec_b, dom_b, device)
    if fn in COMPARE_FNS:
        # comparisons: exact 0/1 values, and no gradient (None or zeros)
        out = ops.zip(a, b, fn)
        assert_close_to_ref(out, ZIP_REF[fn](a.detach().cpu(), b.detach().cpu()), exact=True)
        if out.requires_grad:
            go = randn(out.shape, seed, device)
            grads = torch.autograd.grad(out, (leaf_a, leaf_b), go, allow_unused=True)
            for g in grads:
                assert g is None or not g.any(), g
        return
    assert fn in ARITH_ZIP_FNS
    check_first_and_second_order(ops.zip(a, b, fn),
                                 lambda s, t: ZIP_REF[fn](s.expand(shape_a), t.expand(shape_b)),
                                 [leaf_a, leaf_b], seed, device)


@pytest.mark.parametrize("fn", REDUCE_FNS)
@FUZZ
@given(data=st.data())
def test_reduce_grad(fn, device, data):
    spec = data.draw(shapes().flatmap(specs), label="x")
    dim = data.draw(valid_dims(len(spec.shape)), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    seed = data.draw(st.integers(0, 2**31), label="grad_seed")
    if fn in ("max", "min") and reduced_numel(spec.shape, dim) == 0:
        return  # raises (test_reduce covers it)
    # max/min: continuous values never tie, except along expanded (stride-0) dims, where PyTorch's
    # amax/amin share the gradient equally among the copies, as README says tiles does
    domain = reduce_domain(fn, spec, dim) if fn == "prod" else REDUCE_GRAD_DOMAIN[fn]
    leaf, x = grad_leaf(spec, domain, device)
    check_first_and_second_order(ops.reduce(x, dim, fn, keepdim=keepdim),
                                 lambda t: ref_reduce(t.expand(spec.shape), dim, fn, keepdim),
                                 [leaf], seed, device)


@FUZZ
@given(data=st.data())
def test_bmm_grad(device, data):
    shape_a, shape_b = data.draw(bmm_shapes(), label="shapes")
    spec_a = data.draw(specs(shape_a), label="a")
    spec_b = data.draw(specs(shape_b), label="b")
    seed = data.draw(st.integers(0, 2**31), label="grad_seed")
    leaf_a, a = grad_leaf(spec_a, "real", device)
    leaf_b, b = grad_leaf(spec_b, "real", device)
    check_first_and_second_order(ops.bmm(a, b),
                                 lambda s, t: torch.matmul(s.expand(shape_a), t.expand(shape_b)),
                                 [leaf_a, leaf_b], seed, device)


# ------------------------------------------------------------------------ regressions found by fuzzing

@pytest.mark.parametrize("shape, dim", [((2, 0), None), ((3, 0, 2), [1]), ((1, 1, 0), [-1, 0])],
                         ids=["all", "dim1", "dims"])
def test_reduce_mean_over_no_elements_second_order(shape, dim, device):
    # found by test_reduce_grad[mean]: d/d(grad_out) of mean's gradient over an empty set is a sum of
    # no terms, 0 in PyTorch (the first-order gradient is empty or 0, fine either way)
    x = torch.randn(shape, dtype=F64, device=device, requires_grad=True)
    out = ops.reduce(x, dim, "mean")
    assert torch.isnan(out).all()
    go = torch.randn(out.shape, dtype=F64, device=device, requires_grad=True)
    (g,) = torch.autograd.grad(out, x, go, create_graph=True)
    (g_go,) = torch.autograd.grad(g, go, torch.ones_like(g), allow_unused=True)
    x_ref = x.detach().cpu().requires_grad_(True)
    go_ref = go.detach().cpu().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(ref_reduce(x_ref, dim, "mean"), x_ref, go_ref, create_graph=True)
    (g_go_ref,) = torch.autograd.grad(g_ref, go_ref, torch.ones_like(g_ref), allow_unused=True)
    assert g.shape == x.shape
    g_go = torch.zeros_like(go) if g_go is None else g_go
    g_go_ref = torch.zeros_like(go_ref) if g_go_ref is None else g_go_ref
    torch.testing.assert_close(g_go.cpu(), g_go_ref, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["contiguous", "expanded"])
@pytest.mark.parametrize("fn", ["sum", "mean"])
@pytest.mark.parametrize("n", [3000, 100_000])
def test_float32_sum_of_equal_values(n, fn, layout, device):
    # found by test_wide_elementwise_and_reduce: a float32 sum of n equal values (a stride-0 row of
    # 777) off by 1.0e-5 of sum|x|; each rounding of a running sum errs the same way, so a sum that
    # accumulates element after element drifts by ~n ulps, where PyTorch's stays within a few
    x = torch.full((1,) if layout == "expanded" else (n,), 0.1, dtype=torch.float32, device=device)
    x = x.expand(n)
    assert_reduce_close(ops.reduce(x, None, fn), x, None, fn)
