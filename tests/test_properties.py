"""Property-based tests (hypothesis): random shapes (rank 0-4, sizes 0-5), random permutations,
slices and expansions, broadcast-compatible pairs; map/zip/reduce against PyTorch in float64."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from helpers import (FLOAT_DTYPES, MAP_DOMAIN, MAP_FNS, MAP_REF, REDUCE_DOMAIN, REDUCE_FNS, ZIP_DOMAIN,
                     ZIP_EXACT, ZIP_FNS, ZIP_REF, assert_close_to_ref, assert_elementwise_layout, assert_reduce_close,
                     rand_values)

# the device fixture is constant across examples, so sharing it is fine
SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)
dtypes = st.sampled_from(FLOAT_DTYPES)


@st.composite
def strided_tensors(draw, shape, dtype, domain, device):
    """A tensor of ``shape`` whose memory layout is drawn too: the storage holds the dims in a random
    order, each dim is taken with step 1 or 2 from a random start, and some size-1 dims of the
    storage may be expanded (stride 0)."""
    rank = len(shape)
    perm = draw(st.permutations(range(rank)))
    steps = draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    starts = draw(st.lists(st.integers(0, 1), min_size=rank, max_size=rank))
    expand = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    seed = draw(st.integers(0, 2**31 - 1))
    sizes = [1 if expand[p] else shape[p] for p in perm]  # storage order
    big = [n * step + start for n, step, start in zip(sizes, steps, starts)]
    gen = torch.Generator().manual_seed(seed)
    storage = rand_values(big, domain, generator=gen).to(dtype).to(device)
    view = storage[tuple(slice(start, start + n * step, step)
                         for n, step, start in zip(sizes, steps, starts))]
    inverse = [perm.index(i) for i in range(rank)]
    x = view.permute(inverse).expand(shape)
    assert x.shape == shape
    return x


@st.composite
def broadcast_shapes(draw):
    """Two shapes that broadcast: each is a suffix of a common shape with some dims set to 1."""
    out = draw(shapes)

    def operand():
        rank = draw(st.integers(0, len(out)))
        suffix = out[len(out) - rank:]
        ones = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
        return tuple(1 if one else n for n, one in zip(suffix, ones))

    return operand(), operand()


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=dtypes, fn=st.sampled_from(MAP_FNS))
def test_map_property(data, shape, dtype, fn, device):
    x = data.draw(strided_tensors(shape, dtype, MAP_DOMAIN[fn], device))
    out = torch.ops.tiles.map(x, fn)
    assert out.shape == x.shape and out.dtype == dtype
    assert_elementwise_layout(out, x)
    assert_close_to_ref(out, MAP_REF[fn](x.double().cpu()), dtype,
                        exact=fn in ("id", "neg", "abs", "relu"))


@SETTINGS
@given(data=st.data(), shapes_ab=broadcast_shapes(), dtype_a=dtypes, dtype_b=dtypes,
       fn=st.sampled_from(ZIP_FNS))
def test_zip_property(data, shapes_ab, dtype_a, dtype_b, fn, device):
    dom_a, dom_b = ZIP_DOMAIN[fn]
    a = data.draw(strided_tensors(shapes_ab[0], dtype_a, dom_a, device))
    b = data.draw(strided_tensors(shapes_ab[1], dtype_b, dom_b, device))
    # keep 0-dim operands representable in both dtypes (see test_zip._zero_dim)
    if a.dim() == 0 and b.dim() > 0:
        a = a.to(dtype_b).to(dtype_a)
    if b.dim() == 0 and a.dim() > 0:
        b = b.to(dtype_a).to(dtype_b)
    out = torch.ops.tiles.zip(a, b, fn)
    result_dtype = torch.result_type(a, b)
    assert out.dtype == result_dtype
    assert out.shape == torch.broadcast_shapes(a.shape, b.shape)
    assert_elementwise_layout(out, a, b)
    assert_close_to_ref(out, ZIP_REF[fn](a.double().cpu(), b.double().cpu()), result_dtype,
                        exact=fn in ZIP_EXACT)


@st.composite
def reduce_dims(draw, rank):
    """None, [] or a list of distinct dims in random order, each possibly written negatively."""
    kind = draw(st.sampled_from(["none", "empty", "subset"]))
    if kind == "none":
        return None
    if kind == "empty":
        return []
    addressable = list(range(max(rank, 1)))  # a 0-dim tensor has dim 0 / -1
    chosen = draw(st.lists(st.sampled_from(addressable), unique=True, min_size=1,
                           max_size=1 if rank == 0 else rank))
    negative = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    return [d - max(rank, 1) if neg else d for d, neg in zip(chosen, negative)]


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=dtypes, fn=st.sampled_from(REDUCE_FNS),
       keepdim=st.booleans())
def test_reduce_property(data, shape, dtype, fn, keepdim, device):
    # up to 625 factors in a product: stay closer to 1 than REDUCE_DOMAIN does
    domain = "very_near_one" if fn == "prod" else REDUCE_DOMAIN[fn]
    x = data.draw(strided_tensors(shape, dtype, domain, device))
    dim = data.draw(reduce_dims(len(shape)))
    if dim is None or dim == [] or x.dim() == 0:
        reduced_numel = x.numel()
    else:
        reduced_numel = 1
        for d in dim:
            reduced_numel *= shape[d]
    if fn in ("max", "min") and reduced_numel == 0:
        # README: max/min over an empty set of elements raise (even if the result would be empty)
        with pytest.raises(RuntimeError):
            torch.ops.tiles.reduce(x, dim, fn, keepdim=keepdim)
        return
    out = torch.ops.tiles.reduce(x, dim, fn, keepdim=keepdim)
    assert_reduce_close(out, x, dim, fn, keepdim)
