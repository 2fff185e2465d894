"""Shared helpers for the torch_tiles test suite.

Conventions
-----------
* Random values come from torch's global generator, which the autouse ``seed`` fixture in
  ``conftest.py`` re-seeds per test (from the test id), so every test draws its own fresh data and a
  failure reproduces with the same values.
* Values are drawn in float64 on the CPU, rounded to the target dtype *before* the layout is built, and
  only then moved to the device.  The tensor under test therefore holds exactly the values the
  reference sees.
* References are computed by PyTorch in float64 on the upcast inputs (``x.double()``).  We compare
  ``out.double()`` against that float64 reference (we do not round the reference to the output dtype):
  the per-dtype tolerances in ``TOL`` cover one rounding of the result to the output dtype plus the
  float32 internal arithmetic that half types use.  ``torch.testing.assert_close`` is always called with
  explicit ``rtol``/``atol`` and ``equal_nan=True``.
"""

import math
from dataclasses import dataclass

import torch

import torch_tiles

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
HALF_DTYPES = (torch.float16, torch.bfloat16)

# The fn names come from the extension's C++ tables (tests/test_readme.py checks the README lists them);
# a name added there with no reference (MAP_REF: torch's function of the same name, or one named there;
# ZIP_REF, ...) fails the tests that use it.
MAP_FNS = torch_tiles.MAP_FNS
ZIP_FNS = torch_tiles.ZIP_FNS
COMPARE_FNS = ("lt", "le", "gt", "ge", "eq", "ne")
ARITH_ZIP_FNS = tuple(f for f in ZIP_FNS if f not in COMPARE_FNS)
REDUCE_FNS = torch_tiles.REDUCE_FNS

LAYOUTS = ("contiguous", "permuted", "sliced", "expanded", "transposed")


def dtype_id(dtype):
    """Short test id for a dtype: torch.float16 -> 'float16'."""
    return str(dtype).replace("torch.", "")


@dataclass(frozen=True)
class Tol:
    rtol: float
    atol: float


# Tolerances against a float64 reference.  Half types: one rounding of the result is at most 2^-11
# (float16) or 2^-8 (bfloat16) relative; float32: a few ulps of float32 arithmetic.
TOL = {
    torch.float64: Tol(rtol=1e-12, atol=1e-12),
    torch.float32: Tol(rtol=1e-5, atol=1e-6),
    torch.float16: Tol(rtol=1e-3, atol=1e-5),
    torch.bfloat16: Tol(rtol=1e-2, atol=1e-4),
}


def assert_close_to_ref(out, ref, dtype=None, *, exact=False, msg=None):
    """Compare ``out`` (any float dtype) with a float64 reference using ``dtype``'s tolerance.

    ``exact=True`` requires bit-equal values after upcasting (for max/min/comparisons/id..., where
    the result is one of the inputs or 0/1)."""
    dtype = out.dtype if dtype is None else dtype
    tol = Tol(0.0, 0.0) if exact else TOL[dtype]
    torch.testing.assert_close(out.detach().double().cpu(), ref.detach().double().cpu(),
                               rtol=tol.rtol, atol=tol.atol, equal_nan=True, msg=msg)


GELU_SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 20.0, -20.0, 1e30, -1e30, 3e38, -3e38]


def assert_gelu_special_values(map_fn):
    """float32 gelu of GELU_SPECIAL as the float64 gelu rounded, signed zeros included: gelu(-inf) is NaN
    (-inf * 0), a huge negative x -0 (x^2 overflows or leaves exp's range, where the CPU's float lanes set
    exp(-x^2 / 2) to 0), a huge positive one x."""
    special = torch.tensor(GELU_SPECIAL)
    got, ref = map_fn(special, "gelu"), torch.nn.functional.gelu(special.double()).float()
    torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(got.signbit()[~ref.isnan()], ref.signbit()[~ref.isnan()])


def assert_sin_cos_ulps(map_fn, floor):
    """The CPU kernels' float32 sin / cos (csrc/cpu/simd_body.h vsincos) against float64: within 2 float32
    ulps for |x| <= 125 (the vector reduction; 1.56 measured), or `floor` absolute where that is larger
    (the base set, without FMA, rounds q times π/2's third part: 2.1e-13 near sin(30 π)), including the
    floats next to k π / 2 (where the results are near zero); past 125 (libm's per lane) within 2 ulps."""
    k = (torch.arange(-79, 80, dtype=torch.float64) * (math.pi / 2)).float()
    near_zeros, up, down = [k], k, k
    for _ in range(3):  # the three floats on either side of each
        up, down = up.nextafter(up + 1), down.nextafter(down - 1)
        near_zeros += [up, down]
    x = torch.cat([torch.empty(40000, dtype=torch.float64).uniform_(-125, 125).float(),
                   torch.empty(4000, dtype=torch.float64).uniform_(-1e5, 1e5).float(), *near_zeros,
                   torch.tensor([125.0, -125.0, 125.00001, 1e-30, -1e-40, 3e38])])
    for fn, ref in (("sin", torch.sin), ("cos", torch.cos)):
        out, exact = map_fn(x, fn).double(), ref(x.double())
        rounded = exact.float().abs()
        ulp = (rounded.nextafter(torch.full_like(rounded, float("inf"))) - rounded).double()
        err = (out - exact).abs()
        worst = (err / torch.maximum(2 * ulp, torch.full_like(ulp, floor))).argmax()
        assert err[worst] <= max(2 * ulp[worst].item(), floor), (fn, x[worst].item(), (err[worst] / ulp[worst]).item())


# --------------------------------------------------------------------------------------------------
# Random values
# --------------------------------------------------------------------------------------------------

def rand_values(shape, domain="real", generator=None):
    """float64 CPU tensor of random values in a named domain.

    real      uniform in [-3, 3]
    positive  uniform in [0.25, 3]             (log, sqrt, pow base)
    nonzero   +-uniform in [0.5, 2.5]          (inv, division, |x|/relu away from the kink)
    grid      k/4 for integer k in [-8, 8]     (exact in every dtype, many ties)
    coarse    k/2 for integer k in [-2, 2]     (ties in about one pair out of five: comparisons)
    near_one  +-uniform in [0.8, 1.25]         (products that neither overflow nor underflow)
    very_near_one  +-uniform in [0.9, 1.1]     (the same for products of hundreds of values)
    """
    shape = tuple(shape)
    kw = dict(dtype=torch.float64, generator=generator)
    if domain == "real":
        return torch.rand(shape, **kw) * 6 - 3
    if domain == "positive":
        return torch.rand(shape, **kw) * 2.75 + 0.25
    if domain in ("nonzero", "near_one", "very_near_one"):
        lo, hi = {"nonzero": (0.5, 2.5), "near_one": (0.8, 1.25), "very_near_one": (0.9, 1.1)}[domain]
        mag = torch.rand(shape, **kw) * (hi - lo) + lo
        sign = torch.randint(0, 2, shape, generator=generator).double() * 2 - 1
        return mag * sign
    if domain == "grid":
        return torch.randint(-8, 9, shape, generator=generator).double() / 4
    if domain == "coarse":
        return torch.randint(-2, 3, shape, generator=generator).double() / 2
    raise ValueError(f"unknown domain {domain!r}")


# --------------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------------

def _contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return list(reversed(strides))


def _non_identity_permutation(rank, generator=None):
    perm = list(range(rank))
    if rank < 2:
        return perm
    while perm == list(range(rank)):
        perm = torch.randperm(rank, generator=generator).tolist()
    return perm


def _sliced_view(values, device, max_sliced_dims=4):
    """A view of ``values`` taken with step 2 out of a larger NaN-filled buffer, at a non-zero storage
    offset.  Step 2 is applied to (up to ``max_sliced_dims``, last first) dims of size > 1; the NaN
    filler makes any read outside the view show up in the results."""
    shape = list(values.shape)
    sliced = [i for i in range(len(shape)) if shape[i] > 1][-max_sliced_dims:]
    big = [2 * s if i in sliced else s for i, s in enumerate(shape)]
    big_strides = _contiguous_strides(big)
    strides = [bs * (2 if i in sliced else 1) for i, bs in enumerate(big_strides)]
    # start at index 1 of each sliced dim, plus one extra element so the offset is never zero
    offset = 1 + sum(big_strides[i] for i in sliced)
    numel_big = math.prod(max(s, 1) for s in big) if big else 1
    buf = torch.full((offset + numel_big + 1,), float("nan"), dtype=values.dtype, device=device)
    view = buf.as_strided(shape, strides, offset)
    view.copy_(values.to(device))
    return view


def make_tensor(shape, dtype=torch.float32, device="cpu", layout="contiguous", *, domain="real",
                expand_dims=None, requires_grad=False, generator=None):
    """A tensor of ``shape`` / ``dtype`` on ``device`` in a given memory layout.

    contiguous  plain contiguous tensor
    permuted    contiguous tensor of a (random, non-identity) permuted shape, ``.permute``d back
    sliced      taken with step 2 out of a bigger tensor, non-zero storage offset
    expanded    size-1 dims expanded to the shape (stride 0); ``expand_dims`` picks which dims are
                broadcast (default: the even-numbered ones), so values are constant along them
    transposed  contiguous tensor with the last two dims swapped, ``.transpose``d back (rank >= 2)

    For every layout except "expanded" the logical values are the same for a given random state.
    """
    shape = tuple(shape)
    rank = len(shape)
    if layout == "expanded":
        if expand_dims is None:
            expand_dims = range(0, rank, 2)
        expand_dims = {d % rank for d in expand_dims} if rank else set()
        base_shape = tuple(1 if i in expand_dims else s for i, s in enumerate(shape))
    else:
        base_shape = shape
    values = rand_values(base_shape, domain, generator).to(dtype)

    if layout == "contiguous":
        x = values.to(device).clone()
    elif layout == "permuted":
        perm = _non_identity_permutation(rank, generator)
        inverse = [perm.index(i) for i in range(rank)]
        storage = values.permute(perm).contiguous().to(device)
        x = storage.permute(inverse)
    elif layout == "sliced":
        x = _sliced_view(values, device)
    elif layout == "expanded":
        x = values.to(device).expand(shape)
    elif layout == "transposed":
        if rank < 2:
            raise ValueError("the transposed layout needs rank >= 2")
        x = values.transpose(-1, -2).contiguous().to(device).transpose(-1, -2)
    else:
        raise ValueError(f"unknown layout {layout!r}")
    assert x.shape == shape and x.dtype == dtype
    if requires_grad:
        x.requires_grad_(True)
    return x


def layout_is_strided(x):
    """True when ``x`` is not a plain dense contiguous tensor (used to check that the layout
    helpers really produce the memory layouts that the tests claim to cover)."""
    return not x.is_contiguous() or x.storage_offset() != 0


def is_dense(t):
    """Non-overlapping and dense, checked by brute force: the element offsets of ``t`` (relative to its
    storage offset) are exactly 0 .. numel-1, each once. (An independent check of what
    at::Tensor::is_non_overlapping_and_dense() computes from strides.)"""
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return torch.equal(offsets.reshape(-1).sort().values, torch.arange(t.numel(), dtype=torch.int64))


def elementwise_out_strides(shape, *inputs):
    """The strides README's rule gives the output of map(x) (inputs = (x,)) or zip(a, b) (inputs =
    (a, b)) with output shape ``shape``: those of the first input that has the output's shape and is
    non-overlapping and dense, else contiguous strides."""
    shape = torch.Size(shape)
    for t in inputs:
        if t.shape == shape and is_dense(t):
            return tuple(t.stride())
    return tuple(torch.empty(shape, device="meta").stride())


def assert_elementwise_layout(out, *inputs):
    """``out`` (the result of map or zip on ``inputs``) is laid out by README's rule: dense, starting
    at its storage's first element, with elementwise_out_strides."""
    expected = elementwise_out_strides(out.shape, *inputs)
    assert tuple(out.stride()) == expected, (
        f"output strides {tuple(out.stride())}, expected {expected} for inputs "
        + ", ".join(f"{tuple(t.shape)}/{tuple(t.stride())}" for t in inputs))
    assert out.storage_offset() == 0 and is_dense(out)


# --------------------------------------------------------------------------------------------------
# References (float64 PyTorch)
# --------------------------------------------------------------------------------------------------

# The reference of a map fn is torch's function of the same name where there is one (a fn added in C++
# under such a name needs nothing here); the others are named below.
MAP_REF = {fn: getattr(torch, fn) for fn in MAP_FNS if callable(getattr(torch, fn, None))}
MAP_REF.update({
    "id": lambda x: x.clone(),
    "inv": torch.reciprocal,
    "gelu": lambda x: torch.nn.functional.gelu(x, approximate="none"),
    "silu": torch.nn.functional.silu,
})

# Input domain per map fn (see rand_values).  abs/relu stay off the kink so gradcheck is valid.
MAP_DOMAIN = {fn: "real" for fn in MAP_FNS}
MAP_DOMAIN.update(log="positive", sqrt="positive", inv="nonzero", abs="nonzero", relu="nonzero")

ZIP_REF = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "max": torch.maximum,
    "min": torch.minimum,
    "pow": torch.pow,
    "lt": lambda a, b: torch.lt(a, b).double(),
    "le": lambda a, b: torch.le(a, b).double(),
    "gt": lambda a, b: torch.gt(a, b).double(),
    "ge": lambda a, b: torch.ge(a, b).double(),
    "eq": lambda a, b: torch.eq(a, b).double(),
    "ne": lambda a, b: torch.ne(a, b).double(),
}

# (domain of a, domain of b).  max/min and comparisons use grids so that ties actually occur.
ZIP_DOMAIN = {fn: ("real", "real") for fn in ZIP_FNS}
ZIP_DOMAIN.update(div=("real", "nonzero"), pow=("positive", "real"))
ZIP_DOMAIN.update({fn: ("grid", "grid") for fn in ("max", "min")})
ZIP_DOMAIN.update({fn: ("coarse", "coarse") for fn in COMPARE_FNS})

# Zip fns whose result is exactly one input value or 0/1: must match the reference bit for bit.
ZIP_EXACT = set(COMPARE_FNS) | {"max", "min"}

REDUCE_DOMAIN = {"sum": "real", "mean": "real", "prod": "near_one", "max": "grid", "min": "grid", "logsumexp": "real"}


def normalize_dims(dim, rank):
    """README semantics: None or [] -> all dims; negative dims wrap (a 0-dim tensor has one
    addressable dim, 0 / -1, as in PyTorch)."""
    if dim is None or len(dim) == 0:
        return list(range(rank))
    wrap = max(rank, 1)
    return sorted({d % wrap for d in dim if rank > 0})


def ref_reduce(x64, dim, fn, keepdim=False):
    """float64 reference for tiles::reduce, built from torch.sum/mean/prod/amax/amin/logsumexp over one
    flattened trailing dim (torch.prod takes only one dim)."""
    rank = x64.dim()
    if rank == 0:
        return x64.clone()
    dims = normalize_dims(dim, rank)
    kept = [d for d in range(rank) if d not in dims]
    reduced_numel = math.prod(x64.shape[d] for d in dims)
    flat = x64.permute(kept + dims).reshape([x64.shape[d] for d in kept] + [reduced_numel])
    op = {"sum": torch.sum, "mean": torch.mean, "prod": torch.prod,
          "max": torch.amax, "min": torch.amin, "logsumexp": torch.logsumexp}[fn]
    out = op(flat, dim=-1)
    if keepdim:
        out = out.reshape([1 if d in dims else x64.shape[d] for d in range(rank)])
    return out


def assert_reduce_close(out, x, dim, fn, keepdim=False):
    """Check tiles::reduce's result against ``ref_reduce``.

    sum/mean: |out - ref| <= rtol * (sum or mean of |x| over the reduced elements) + atol, which is
    the natural error scale of a floating-point sum (cancellation makes a relative bound on the result
    itself meaningless).  prod: relative.  max/min: exact (the result is one of the inputs).
    logsumexp: |out - ref| <= rtol * logsumexp(|x|), at least rtol: the result's own magnitude, up to the
    log of the count (an empty reduction gives -inf, compared as it is)."""
    x64 = x.detach().double().cpu()
    ref = ref_reduce(x64, dim, fn, keepdim)
    assert out.dtype == x.dtype, (out.dtype, x.dtype)
    assert tuple(out.shape) == tuple(ref.shape), (tuple(out.shape), tuple(ref.shape))
    assert out.is_contiguous()
    assert out.device == x.device
    if fn in ("max", "min"):
        assert_close_to_ref(out, ref, exact=True)
    elif fn == "prod":
        assert_close_to_ref(out, ref, x.dtype)
    elif fn == "logsumexp":
        scale = ref_reduce(x64.abs(), dim, fn, keepdim).clamp_min(1.0)
        torch.testing.assert_close(out.detach().double().cpu() / scale, ref / scale, rtol=0.0,
                                   atol=TOL[x.dtype].rtol, equal_nan=True,
                                   msg=lambda m: f"{fn} over dim={dim}, values scaled by 1/logsumexp|x|:\n{m}")
    else:
        tol = TOL[x.dtype]
        # (an empty reduction has scale 0, or NaN for mean: then compare the values as they are)
        scale = ref_reduce(x64.abs(), dim, fn, keepdim).nan_to_num(nan=1.0).clamp_min(1e-300)
        torch.testing.assert_close(out.detach().double().cpu() / scale, ref / scale,
                                   rtol=0.0, atol=tol.rtol, equal_nan=True,
                                   msg=lambda m: f"{fn} over dim={dim}, values scaled by 1/sum|x|:\n{m}")


def rel_error(out, ref):
    """||out - ref|| / ||ref|| in float64 (Frobenius norm)."""
    out64 = out.detach().double().cpu()
    ref64 = ref.detach().double().cpu()
    return (torch.linalg.vector_norm(out64 - ref64) / torch.linalg.vector_norm(ref64)).item()


def cpu64(t):
    return t.detach().double().cpu()


# The largest tensor (output or operand) whose float64 reference assert_bmm_close computes on the GPU
# (at most ~4.5 GiB for the float64 tensors of its check); larger ones go to the CPU, so that 16 test
# workers sharing a GPU fit.
GPU_REFERENCE_MAX_ELEMENTS = 1 << 26


def assert_bmm_close(out, a, b, tol=None, msg=""):
    """|out - a @ b| <= rtol * (|a| @ |b|) + atol elementwise (the error scale of a dot product),
    against float64 (cuBLAS's for a CUDA output of moderate size, else the CPU's, which 16 test workers
    on one host share), with out's dtype's tolerance (or `tol`); `msg` names what ran."""
    on_gpu = out.is_cuda and max(out.numel(), a.numel(), b.numel()) <= GPU_REFERENCE_MAX_ELEMENTS
    as64 = (lambda t: t.detach().double()) if on_gpu else cpu64
    a64, b64 = as64(a), as64(b)
    ref = torch.matmul(a64, b64)
    assert out.shape == ref.shape, (tuple(out.shape), tuple(ref.shape))
    tol = tol or TOL[out.dtype]
    bound = tol.rtol * torch.matmul(a64.abs(), b64.abs()) + tol.atol
    err = (as64(out) - ref).abs()
    assert (err <= bound).all(), (f"bmm{' ' + msg if msg else ''}: max error {err.max().item():.3g}, "
                                  f"max excess {(err - bound).max().item():.3g}")


def hopper_streams_short_k():
    """Whether bmm's Hopper kernel stores a short-K output larger than L2 with the threads' streaming
    stores on this GPU: where its peak DRAM bandwidth is under 4 TB/s (an H100's, not an H200's; the
    rule is `kStreamingStoreMaxDram` in csrc/cuda/bmm/hopper.cu, written again here to test it)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return 2e3 * props.memory_clock_rate * (props.memory_bus_width // 8) < 4.0e12


def cuda_kernel_names(fn):
    """The names of the CUDA kernels one call of fn launches (after a warm-up call, so that no lazy
    initialisation lands inside the profile); skips where the profiler records no CUDA kernels."""
    import pytest
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not names:
        pytest.skip("the profiler recorded no CUDA kernels here")
    return names
