"""Tensors of more than 2^31 elements (64-bit index math) through map, zip (broadcasting), reduce and a
bmm whose output has more than 2^31 elements; bfloat16 on the GPU.

Results are checked against PyTorch on the GPU, chunk by chunk over the *whole* output (float32 or
float64 per chunk, never a float64 copy of a 4 GiB tensor). Marker values sit past index 2^31 so that
a dropped tail or an index that wraps at 2^31 changes a reduction's result by more than the tolerance.

Marked ``big``: each case needs up to ~16 GiB of free GPU memory and is skipped (with the reason) when
there is not that much. Run these alone, not beside other GPU tests (no pytest-xdist):
    pytest -q -p no:xdist -m big tests/test_scale.py
"""

import gc

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from conftest import requires_cuda
from helpers import TOL, hopper_streams_short_k

pytestmark = [pytest.mark.big, requires_cuda]

T = torch.ops.tiles
BF16, F32, F64 = torch.bfloat16, torch.float32, torch.float64
GiB = 1 << 30
N = 2 ** 31 + 17  # elements of the 1-D cases
M = 2 ** 30 + 9  # row length of the [2, M] cases: 2 * M = 2^31 + 18 elements
CHUNK = 1 << 27  # elements compared at a time
BF16_TOL = TOL[BF16]


@pytest.fixture(autouse=True)
def free_memory():
    _release()
    yield
    _release()


def _release():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def need_gib(gib):
    """Skip unless ``gib`` GiB of GPU memory are free (counting the caching allocator's free blocks)."""
    free, total = torch.cuda.mem_get_info()
    free += torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    if free < gib * GiB:
        pytest.skip(f"needs {gib} GiB of free GPU memory; {free / GiB:.1f} of {total / GiB:.1f} GiB free")


def generator(seed):
    return torch.Generator(device="cuda").manual_seed(seed)


def check_chunks(out, ref_of, tol=BF16_TOL):
    """Compare the flat ``out`` with ``ref_of(start, stop)`` (float32 values of out's elements
    start..stop-1) chunk by chunk, over every element."""
    flat = out.view(-1)
    numel = flat.numel()
    covered = 0
    for start in range(0, numel, CHUNK):
        stop = min(start + CHUNK, numel)
        got = flat[start:stop].float()
        ref = ref_of(start, stop)
        assert ref.shape == got.shape, (ref.shape, got.shape)
        torch.testing.assert_close(got, ref, rtol=tol.rtol, atol=tol.atol,
                                   msg=lambda m, s=start, e=stop: f"elements [{s}, {e}):\n{m}")
        del got, ref
        covered = stop
    assert covered == numel


def test_sizes_exceed_int32():
    assert N > 2 ** 31 and 2 * M > 2 ** 31
    assert 2 * 32768 * 32769 > 2 ** 31


# ------------------------------------------------------------------------------------------------ map

def test_map_exp_over_2_31_elements():
    need_gib(14)
    x = torch.randn(N, dtype=BF16, device="cuda", generator=generator(0))
    out = T.map(x, "exp")
    assert out.shape == (N,) and out.dtype == BF16 and out.is_contiguous()
    check_chunks(out, lambda s, e: torch.exp(x[s:e].float()))


def test_map_neg_transposed_over_2_31_elements():
    # the strided (transposed) path: a [M, 2] view of a [2, M + 1] tensor, output [M, 2] contiguous
    # (the padded row keeps x non-dense; a dense x.t() would give the output its layout and stream)
    need_gib(14)
    x = torch.randn(2, M + 1, dtype=BF16, device="cuda", generator=generator(1))[:, :M].t()
    out = T.map(x, "neg")
    assert out.shape == (M, 2) and out.is_contiguous()
    rows = CHUNK // 2
    for r in range(0, M, rows):
        got, ref = out[r:r + rows], -x[r:r + rows]
        assert torch.equal(got, ref), f"rows [{r}, {r + rows})"


# ------------------------------------------------------------------------------------------------ zip

def test_zip_with_zero_dim_over_2_31_elements():
    # [N] bf16 + 0-dim float32: the 0-dim operand does not promote, the result is bf16
    need_gib(14)
    a = torch.randn(N, dtype=BF16, device="cuda", generator=generator(2))
    b = torch.tensor(0.75, dtype=F32, device="cuda")
    out = T.zip(a, b, "add")
    assert out.shape == (N,) and out.dtype == BF16
    check_chunks(out, lambda s, e: a[s:e].float() + 0.75)


def test_zip_column_broadcast_over_2_31_elements():
    # [2, M] * [2, 1]
    need_gib(14)
    a = torch.randn(2, M, dtype=BF16, device="cuda", generator=generator(3))
    b = torch.randn(2, 1, dtype=BF16, device="cuda", generator=generator(4))
    out = T.zip(a, b, "mul")
    assert out.shape == (2, M) and out.dtype == BF16
    for row in range(2):
        for s in range(0, M, CHUNK):
            e = min(s + CHUNK, M)
            torch.testing.assert_close(out[row, s:e].float(), a[row, s:e].float() * b[row].float(),
                                       rtol=BF16_TOL.rtol, atol=BF16_TOL.atol,
                                       msg=lambda m, r=row, s=s: f"row {r}, columns from {s}:\n{m}")


def test_zip_row_broadcast_over_2_31_elements():
    # [2, M] - [M]
    need_gib(16)
    a = torch.randn(2, M, dtype=BF16, device="cuda", generator=generator(5))
    b = torch.randn(M, dtype=BF16, device="cuda", generator=generator(6))
    out = T.zip(a, b, "sub")
    assert out.shape == (2, M) and out.dtype == BF16
    for row in range(2):
        for s in range(0, M, CHUNK):
            e = min(s + CHUNK, M)
            torch.testing.assert_close(out[row, s:e].float(), a[row, s:e].float() - b[s:e].float(),
                                       rtol=BF16_TOL.rtol, atol=BF16_TOL.atol,
                                       msg=lambda m, r=row, s=s: f"row {r}, columns from {s}:\n{m}")


# --------------------------------------------------------------------------------------------- reduce

def _sum64(t):
    """float64 sum of a huge tensor, chunk by chunk (no float64 copy of the whole)."""
    flat = t.reshape(-1)
    return sum(torch.sum(flat[s:s + CHUNK], dtype=F64).item() for s in range(0, flat.numel(), CHUNK))


def test_reduce_all_dims_over_2_31_elements():
    need_gib(8)
    x = torch.rand(N, dtype=BF16, device="cuda", generator=generator(7))  # in [0, 1): sum ~ 2^30
    # markers past 2^31: the unique max, the unique min, and a max worth ~3% of the sum
    x[N - 1] = 2.0 ** 25
    x[2 ** 31 + 3] = -1.0
    ref = _sum64(x)
    out = T.reduce(x, None, "sum")
    assert out.shape == () and out.dtype == BF16
    # all but one value are >= 0, so |sum| ~ sum |x|: a relative bound (as assert_reduce_close's)
    assert abs(out.double().item() - ref) <= BF16_TOL.rtol * ref, (out.item(), ref)
    mean = T.reduce(x, [0], "mean")
    assert abs(mean.double().item() - ref / N) <= BF16_TOL.rtol * ref / N, (mean.item(), ref / N)
    assert T.reduce(x, None, "max").item() == 2.0 ** 25
    assert T.reduce(x, [-1], "min").item() == -1.0


def test_reduce_dim1_of_2_by_2_30():
    # each row has M elements; row 1 starts at flat index M and ends past 2^31
    need_gib(8)
    x = torch.rand(2, M, dtype=BF16, device="cuda", generator=generator(8))
    x[:, -1] = 2.0 ** 24  # ~3% of a row's sum, at the end of each row
    refs = [_sum64(x[r]) for r in range(2)]
    out = T.reduce(x, [1], "sum")
    assert out.shape == (2,) and out.dtype == BF16
    for r in range(2):
        assert abs(out[r].double().item() - refs[r]) <= BF16_TOL.rtol * refs[r], (r, out[r].item(), refs[r])
    out = T.reduce(x, [1], "max", keepdim=True)
    assert out.shape == (2, 1) and out.flatten().tolist() == [2.0 ** 24] * 2


def test_reduce_dim0_of_2_by_2_30():
    # output of M elements, each the sum of two inputs M apart (the second past 2^31 at the end)
    need_gib(10)
    x = torch.randn(2, M, dtype=BF16, device="cuda", generator=generator(9))
    out = T.reduce(x, [0], "sum")
    assert out.shape == (M,) and out.dtype == BF16
    check_chunks(out, lambda s, e: x[0, s:e].float() + x[1, s:e].float())


# ------------------------------------------------------------------------------------------------ bmm

ROWS, COLS = 32768, 32769  # 2 * ROWS * COLS = 2^31 + 2^16 output elements


def _small_ints(shape, seed):
    """Integers in [-2, 2] as bf16: products and sums of two are exact in bf16 and float32."""
    gen = generator(seed)
    return torch.randint(-2, 3, shape, device="cuda", generator=gen).to(BF16)


def _check_bmm(out, a3, b3, cols=COLS):
    """out[i] == a3[i] @ b3[i] exactly, rows in chunks; a3 / b3 are 3-D (possibly expanded) views."""
    assert out.shape == (2, ROWS, cols) and out.dtype == BF16 and out.is_contiguous()
    k = a3.shape[-1]
    rows = max(1, CHUNK // cols)
    for i in range(2):
        for r in range(0, ROWS, rows):
            a_blk = a3[i, r:r + rows].float()
            ref = sum(a_blk[:, j:j + 1] * b3[i, j:j + 1].float() for j in range(k))
            got = out[i, r:r + rows].float()
            if not torch.equal(got, ref):
                bad = (got != ref).nonzero()[0].tolist()
                raise AssertionError(f"batch {i}, rows from {r}: first mismatch at {bad}: "
                                     f"{got[tuple(bad)].item()} != {ref[tuple(bad)].item()}")


def test_bmm_output_over_2_31_elements_k2():
    need_gib(8)
    a = _small_ints((2, ROWS, 2), 10)
    b = _small_ints((2, 2, COLS), 11)
    out = T.bmm(a, b)
    _check_bmm(out, a, b)


def test_bmm_output_over_2_31_elements_k1_broadcast_2d():
    # a 2-D [ROWS, 1] operand broadcast against a batch of 2
    need_gib(8)
    a = _small_ints((ROWS, 1), 12)
    b = _small_ints((2, 1, COLS), 13)
    out = T.bmm(a, b)
    _check_bmm(out, a.expand(2, ROWS, 1), b)


def test_bmm_output_over_2_31_elements_transposed_operands():
    need_gib(8)
    a = _small_ints((2, 2, ROWS), 14).transpose(1, 2)  # [2, ROWS, 2], column-major
    b = _small_ints((2, COLS, 2), 15).transpose(1, 2)  # [2, 2, COLS], column-major
    out = T.bmm(a, b)
    _check_bmm(out, a, b)


HOPPER_STORES = {  # id: (N, K, the path bmm must name on an sm_90 GPU)
    "streaming_store": (32776, 16, "hopper-wgmma streaming-store"),  # short K, output over L2; DRAM < 4 TB/s
    "tma_store": (32776, 264, "hopper-wgmma"),  # K > 128 never streams; 256-wide tiles held under the next
    "whole_tile_store": (32776, 136, "hopper-wgmma whole-tile-store"),  # three k-blocks: whole tiles at once
    "direct_store": (32769, 16, "hopper-wgmma"),  # rows of N elements are not 16-byte multiples
}


@pytest.mark.parametrize("store", HOPPER_STORES)
def test_bmm_hopper_output_over_2_31_elements(store):
    # the Hopper tensor-core kernel's four epilogues; b's rows are padded to 32776 elements so TMA can
    # read them; with K > 16 only the first 16 k are nonzero, so every sum stays exact in bf16
    need_gib(8)
    cols, k, expected = HOPPER_STORES[store]
    a = torch.zeros(2, ROWS, k, dtype=BF16, device="cuda")
    a[:, :, :16] = _small_ints((2, ROWS, 16), 12)
    b = torch.zeros(2, k, 32776, dtype=BF16, device="cuda")
    b[:, :16] = _small_ints((2, 16, 32776), 13)
    b = b[:, :, :cols]
    assert 2 * ROWS * cols > 2 ** 31
    path = T._bmm_path(a, b)
    on_hopper = torch.cuda.get_device_capability() == (9, 0) and "without sm_90a" not in path
    forced = store == "streaming_store" and on_hopper and not hopper_streams_short_k()
    if forced:  # this GPU's DRAM keeps TMA's stores: run the streaming ones by name
        expected = "hopper-wgmma"
    if on_hopper:
        assert path == expected, path
    out = torch.ops.tiles._bmm_on_path(a, b, "hopper-256 streaming-store") if forced else T.bmm(a, b)
    _check_bmm(out, a[:, :, :16], b[:, :16], cols)  # the k beyond 16 add zeros
