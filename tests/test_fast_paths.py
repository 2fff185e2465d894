"""Inputs shaped to force each kernel path, with the edges each path must handle.

The CUDA elementwise kernels (csrc/cuda/elementwise/kernels.cuh) pick contiguous / rows / transpose / strided
from the layout, in the output's memory order (map and zip give a dense input's layout to the output,
so a dense transposed or permuted input streams as contiguous); the reduce kernels (csrc/cuda/reduce/kernels.cuh) pick short rows / long rows (split or
not) / columns / generic. Each case below names the path it is built to reach on CUDA and covers its
edges: sizes not divisible by the vector width, misaligned storage offsets, odd strides, broadcasting
along every axis, grids larger than one launch dimension. On CPU the same cases run through the CPU
kernels, so the expectations are checked there too.
"""
import pytest
import torch

from helpers import (FLOAT_DTYPES, assert_close_to_ref, assert_elementwise_layout, assert_reduce_close, dtype_id,
                     make_tensor)

T = torch.ops.tiles

dtypes = pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)


def _rand(shape, dtype, device):
    return make_tensor(shape, dtype, device)


def _check_map(x, fn="exp"):
    ref = {"exp": torch.exp, "neg": torch.neg}[fn](x.double())
    out = T.map(x, fn)
    assert out.shape == x.shape
    assert_elementwise_layout(out, x)
    assert_close_to_ref(out, ref, x.dtype)


def _check_zip(a, b, fn="add"):
    ref = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "max": torch.maximum}[fn](a.double(), b.double())
    out = T.zip(a, b, fn)
    assert out.shape == ref.shape
    assert_elementwise_layout(out, a, b)
    assert_close_to_ref(out, ref, torch.result_type(a, b))


# ---- elementwise: contiguous ---------------------------------------------------------------------

@dtypes
@pytest.mark.parametrize("n", [1, 7, 1037, 4099, 65536 + 3])
def test_contiguous_sizes_not_divisible_by_vector(n, dtype, device):
    _check_map(_rand((n,), dtype, device))
    _check_zip(_rand((n,), dtype, device), _rand((n,), dtype, device), "mul")


@dtypes
@pytest.mark.parametrize("offset", [1, 3])
def test_contiguous_misaligned_storage_offset(offset, dtype, device):
    base = _rand((5000 + offset,), dtype, device)
    x = base[offset:]  # contiguous, but not 16-byte aligned
    assert x.storage_offset() == offset
    _check_map(x)
    _check_zip(x, _rand((5000,), dtype, device), "add")
    _check_zip(_rand((5000,), dtype, device), x, "max")


@dtypes
@pytest.mark.parametrize("shape,perm", [((97, 33), (1, 0)), ((5, 7, 9), (2, 0, 1)), ((3, 4, 5, 6), (0, 2, 3, 1))])
def test_contiguous_in_memory_order(shape, perm, dtype, device):
    # dense transposed / permuted inputs: the output takes their layout, so every operand is
    # contiguous in the output's memory order and the flat path runs (sizes not vector multiples);
    # with a 0-dim operand, one row of the rows path
    x = _rand(shape, dtype, device).permute(perm)
    _check_map(x)
    _check_zip(x, _rand(shape, dtype, device).permute(perm), "mul")
    _check_zip(x, _rand((), dtype, device), "add")


# ---- elementwise: rows (every operand steps 0 or 1 along the row) ---------------------------------

@dtypes
@pytest.mark.parametrize("rows,cols", [(3, 64), (257, 1024), (5, 8 * 1024 + 8), (70000, 8)])
def test_rows_broadcast_along_rows_and_columns(rows, cols, dtype, device):
    a = _rand((rows, cols), dtype, device)
    _check_zip(a, _rand((cols,), dtype, device), "add")        # row vector, broadcast over rows
    _check_zip(_rand((rows, 1), dtype, device), a, "mul")      # column vector, broadcast along rows
    _check_zip(a, _rand((rows, cols), dtype, device), "max")   # same layout


@dtypes
def test_rows_one_dimensional_with_scalar(dtype, device):
    x = _rand((4096 + 8,), dtype, device)
    _check_zip(x, _rand((), dtype, device), "mul")
    _check_zip(_rand((), dtype, device), x, "add")


@dtypes
def test_rows_with_row_stride_not_a_vector_multiple(dtype, device):
    wide = _rand((64, 129), dtype, device)
    a = wide[:, :128]  # row stride 129: rows not 16-byte aligned
    _check_zip(a, _rand((128,), dtype, device), "add")
    _check_map(a)


@dtypes
@pytest.mark.parametrize("cols", [1, 3, 33])
def test_rows_short_or_odd_rows(cols, dtype, device):
    _check_zip(_rand((40, cols), dtype, device), _rand((cols,), dtype, device), "add")


@dtypes
def test_broadcast_on_every_axis_3d(dtype, device):
    full = (6, 5, 8)
    for shape in [(1, 5, 8), (6, 1, 8), (6, 5, 1), (1, 1, 8), (6, 1, 1), (1, 5, 1), (8,), (5, 1)]:
        _check_zip(_rand(full, dtype, device), _rand(shape, dtype, device), "add")
        _check_zip(_rand(shape, dtype, device), _rand(full, dtype, device), "mul")


# ---- elementwise: transpose tiles -----------------------------------------------------------------

def _column_major(rows, cols, dtype, device):
    """[rows, cols] stored column-major with a padded column stride (rows + 1): not dense, so map and
    zip give the output row-major strides and read this operand transposed."""
    return _rand((cols, rows + 1), dtype, device)[:, :rows].t()


@dtypes
@pytest.mark.parametrize("rows,cols", [(32, 32), (33, 70), (1, 100), (2, 100), (100, 1 + 32 * 3), (4096, 3)])
def test_transpose_input(rows, cols, dtype, device):
    x = _column_major(rows, cols, dtype, device)
    _check_map(x)
    _check_zip(x, _rand((rows, cols), dtype, device), "add")                # one staged, one direct operand
    _check_zip(_column_major(rows, cols, dtype, device), x, "mul")          # both staged
    _check_zip(x, _rand((cols,), dtype, device), "max")                     # staged + broadcast row
    # a dense column-major operand gives the output its layout; then the row-major one is staged
    _check_zip(_rand((cols, rows), dtype, device).t(), _rand((rows, cols), dtype, device), "sub")


@dtypes
def test_transpose_square_plus_its_transpose(dtype, device):
    sq = _rand((97, 97), dtype, device)
    _check_zip(sq, sq.t(), "add")


def test_transpose_more_row_tiles_than_one_grid_dimension(device):
    # 2.1M rows of 2: more than 65535 tiles of 32 rows, so the kernel's grid-stride loop over rows runs
    # (a padded column stride keeps the input non-dense, so the output is row-major: a transpose)
    x = _rand((2, (1 << 21) + 6), torch.float32, device)[:, :-1].t()
    _check_map(x, "neg")


# ---- elementwise: strided -------------------------------------------------------------------------

@dtypes
def test_strided_odd_strides_and_permutations(dtype, device):
    base = _rand((7, 9, 11, 5), dtype, device)
    x = base.permute(2, 0, 3, 1)[::2, :, 1:, ::3]
    _check_map(x)
    _check_zip(x, _rand(x.shape[-1:], dtype, device), "add")
    _check_zip(x, x, "mul")


@pytest.mark.parametrize("dtypes_", [(torch.float16, torch.float32), (torch.bfloat16, torch.float64)])
def test_mixed_dtypes_in_every_layout(dtypes_, device):
    a = _rand((33, 64), dtypes_[0], device)
    b = _rand((64, 33), dtypes_[1], device).t()
    _check_zip(a, b, "add")
    _check_zip(a, _rand((64,), dtypes_[1], device), "mul")


# ---- reduce: rows ---------------------------------------------------------------------------------

REDUCE_FNS = ["sum", "max", "prod", "mean"]


def _reduce_input(shape, fn, dtype, device):
    """Random values; for prod, random signs with a few factors of 2 or 1/2 among ones, so that
    products of thousands of elements stay in range in every dtype (and are exact)."""
    if fn != "prod":
        return _rand(shape, dtype, device)
    rare = torch.rand(shape) < 20 / torch.Size(shape).numel()  # about 20 factors of 2 or 1/2
    values = torch.where(rare, torch.where(torch.rand(shape) < 0.5, 2.0, 0.5), 1.0)
    values = values * torch.where(torch.rand(shape) < 0.5, -1.0, 1.0)
    return values.to(device=device, dtype=dtype)


@dtypes
@pytest.mark.parametrize("fn", REDUCE_FNS)
@pytest.mark.parametrize("rows,cols", [(1000, 1), (999, 3), (513, 64), (300, 65), (64, 1000), (8, 4095)])
def test_reduce_short_rows(rows, cols, fn, dtype, device):
    x = _reduce_input((rows, cols), fn, dtype, device)
    assert_reduce_close(T.reduce(x, [1], fn), x, [1], fn)


@dtypes
@pytest.mark.parametrize("fn", REDUCE_FNS)
@pytest.mark.parametrize("rows,cols", [(3, 4096), (5, 8188), (5, 8192), (5, 16384), (2, 10001), (300, 8192 + 4),
                                       (1, 1 << 20), (1, (1 << 20) + 4000), (3, (1 << 18) + 8)])
def test_reduce_long_rows_split_or_not(rows, cols, fn, dtype, device):
    # on CUDA, rows of 32 KiB or more get a block each (float32: 8192 elements exactly, 8188 just under;
    # half types: 16384), and so do shorter ones too few for lanes (all but 300 rows here); few of them
    # are split into segments of about 4096 vectors (16-byte ones when the rows allow, else elements),
    # the last one shorter unless the row divides evenly
    x = _reduce_input((rows, cols), fn, dtype, device)
    assert_reduce_close(T.reduce(x, [-1], fn), x, [-1], fn)


@dtypes
@pytest.mark.parametrize("start", [8, 1], ids=["aligned", "misaligned"])
def test_reduce_split_rows_of_a_wider_matrix(start, dtype, device):
    # split rows whose stride is not their length: 16-byte vectors from an aligned start, elements otherwise
    x = _rand((3, (1 << 18) + 16), dtype, device)[:, start:]
    for fn in ("sum", "max"):
        assert_reduce_close(T.reduce(x, [1], fn), x, [1], fn)


@dtypes
@pytest.mark.parametrize("fn", ["sum", "min"])
def test_reduce_rows_misaligned_and_strided_rows(fn, dtype, device):
    wide = _rand((100, 4099), dtype, device)
    x = wide[:, 3:]  # rows start at odd offsets
    assert_reduce_close(T.reduce(x, [1], fn), x, [1], fn)
    y = _rand((50, 130), dtype, device)[:, :128]  # row stride 130
    assert_reduce_close(T.reduce(y, [1], fn), y, [1], fn)


@dtypes
@pytest.mark.parametrize("n", [1, 5, 4096 * 3 + 1, (1 << 20) + 7])
def test_reduce_all_contiguous(n, dtype, device):
    x = _rand((n,), dtype, device)
    for fn in ("sum", "max"):
        assert_reduce_close(T.reduce(x, None, fn), x, None, fn)


# ---- reduce: columns ------------------------------------------------------------------------------

@dtypes
@pytest.mark.parametrize("fn", ["sum", "max", "mean"])
@pytest.mark.parametrize("rows,cols", [(1, 64), (5, 8), (3000, 256), (257, 33), (64, 4096 + 4), (10000, 3)])
def test_reduce_columns(rows, cols, fn, dtype, device):
    x = _rand((rows, cols), dtype, device)
    assert_reduce_close(T.reduce(x, [0], fn), x, [0], fn)


@dtypes
def test_reduce_columns_of_a_sliced_matrix(dtype, device):
    x = _rand((300, 70), dtype, device)[:, 2:66]  # row stride 70, misaligned start
    assert_reduce_close(T.reduce(x, [0], "sum"), x, [0], "sum")


# On an H100 (132 SMs, sm_90a build) these take the cluster variant of the column kernel, whose row
# segments combine in one block's shared memory (cluster sizes for half types / float / float64):
# (1200, 2000) 16 / 8 / 4; (2100, 1000) partials / 16 / 8; (700, 1001) 4 for each, without vectors
# (odd columns); (2000, 3000) 8 / 4 / 2. Clusters of 16 need an opt-in the GPU may refuse (then half
# types take partials on the first shape). Other GPUs reach partials or other cluster sizes.
@dtypes
@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("rows,cols", [(1200, 2000), (2100, 1000), (700, 1001), (2000, 3000)])
def test_reduce_columns_in_clusters(rows, cols, fn, dtype, device):
    x = _rand((rows, cols), dtype, device)
    first = T.reduce(x, [0], fn)
    assert_reduce_close(first, x, [0], fn)
    assert torch.equal(T.reduce(x, [0], fn), first)  # the segments combine in a fixed order


@dtypes
def test_reduce_columns_in_clusters_sliced(dtype, device):
    x = _rand((1200, 2003), dtype, device)[:, 1:2001]  # misaligned start, row stride 2003: no vectors (H100: 2)
    assert_reduce_close(T.reduce(x, [0], "sum"), x, [0], "sum")
    y = _rand((3, 1200, 2000), dtype, device)[1]  # a storage offset of a whole matrix: vectors
    assert_reduce_close(T.reduce(y, [0], "max"), y, [0], "max")


# ---- reduce: generic, and determinism across paths ------------------------------------------------

@dtypes
def test_reduce_middle_and_multiple_dims(dtype, device):
    x = _rand((6, 300, 7), dtype, device)
    for dims in ([1], [0, 2], [0, 1]):
        assert_reduce_close(T.reduce(x, dims, "sum"), x, dims, "sum")


@pytest.mark.parametrize("shape,dim", [((1 << 22,), None), ((4, 1 << 20), [1]), ((4096, 256), [0]), ((65536, 64), [1])])
def test_reduce_is_bitwise_deterministic(shape, dim, device):
    x = _rand(shape, torch.float32, device)
    first = T.reduce(x, dim, "sum")
    for _ in range(3):
        assert torch.equal(T.reduce(x, dim, "sum"), first)
