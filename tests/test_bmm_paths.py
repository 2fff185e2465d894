"""Each CUDA bmm kernel path, forced by dtype and layout, against a float64 reference.

``torch.ops.tiles._bmm_path(a, b)`` names the kernel bmm runs. On an sm_90 GPU with a build that has
sm_90a code, bf16 / fp16 operands with contiguous rows or columns, 16-byte-aligned strides and base
must take the Hopper tensor-core kernel (either major order, batch broadcast, edge tiles: M, N, K not
multiples of the tile sizes; ``hopper-wgmma streaming-store`` when K <= 128, the output is larger
than L2 and DRAM is under 4 TB/s, which the threads' own evict-first stores write instead of TMA's;
``hopper-wgmma split-k`` when few tiles over a long K split it); float32 operands with a unit-stride matrix dim take the Hopper TF32
kernel (TF32 or 3xTF32 by the float32 matmul precision; b's tiles transposed in shared memory when
neither operand is K-major; ``hopper-wgmma <kind> copied`` when an operand's strides or base are not
16-byte aligned, which its producer warps then copy themselves, for products of at least 2^30 flops whose
output spans 128 rows and columns, under "highest" only where b's tiles are transposed). float64 takes
the mma.sync kernel (DMMA) on sm_80 and newer, and so do 16-bit operands whose strides or base are not
16-byte aligned, and float32 ones that the Hopper kernel does not take (``mma-sync <kind> unaligned 8-byte`` / ``4-byte`` where such copies
divide them, else ``mma-sync <kind> unaligned``: 16-bit elements loaded one by one; `` split-k`` after
it where few tiles over a long K split K). Thin products (K <= 16, or at most 4 output columns or rows, 8 where K >= 64) take
the thin CUDA-core kernels (``thin short-k`` / ``thin few-columns``) unless the Hopper kernel can (or, for
a K of 9 to 16 over few outputs, the mma.sync kernel; at full float32 precision the general kernel, where
it runs 32-wide tiles, up to 2^22 multiply-adds). Float32 products of at most 2^24 multiply-adds
under the "highest" precision (2^26 over few outputs where the Hopper kernel reads both operands through
TMA), and everything else, take the general kernel. ``torch.ops.tiles._bmm_on_path(a, b, path)``
runs one named path, so each is tested on every dtype it can take (the mma.sync kernel on bf16 / fp16
too: the path sm_80 GPUs run). Outputs are checked element by element, and each call's output memory is first
filled with NaN through the caching allocator, so an output element the kernel never wrote fails.
"""
import functools
import itertools
import re

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from conftest import requires_cuda
from helpers import Tol, assert_bmm_close, cuda_kernel_names, hopper_streams_short_k, make_tensor

# Every test starts at "highest", and the precision it had is restored after the test: tests that pick the
# TF32 kernels set "high" and leave it to the fixture.
pytestmark = pytest.mark.usefixtures("highest_float32_precision")

HALF_DTYPES = [torch.bfloat16, torch.float16]
HOPPER = "hopper-wgmma"


def hopper_expected():
    """Whether this GPU and build should run the Hopper kernel; skips (with why) where it cannot."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Hopper tensor-core path needs an sm_90 GPU")
    probe = torch.ones(8, 8, dtype=torch.bfloat16, device="cuda")
    path = torch.ops.tiles._bmm_path(probe, probe)
    if path != HOPPER:
        pytest.skip(f"this build has no sm_90a code ({path})")
    return True


@functools.lru_cache(maxsize=None)
def mma_unavailable():
    """Why this GPU and build cannot run the mma.sync kernel, or None where they can."""
    if torch.cuda.get_device_capability()[0] < 8:
        return "the mma.sync path needs an sm_80 or newer GPU"
    probe = torch.ones(64, 64, dtype=torch.float64, device="cuda")  # not thin: bmm's path is mma's or why not
    path = torch.ops.tiles._bmm_path(probe, probe)
    return f"this build has no sm_80 code ({path})" if "without sm_80" in path else None


def mma_expected():
    """Whether this GPU and build can run the mma.sync kernel; skips (with why) where it cannot."""
    if mma_unavailable():
        pytest.skip(mma_unavailable())
    return True


def sm_count():
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def l2_bytes():
    return torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size


def b_is_k_major(b):
    """Whether the Hopper kernel reads b ([..., k, n]) K-major (bmm/operand_layout.h: K has unit stride or
    size 1), where one-wave products take 96-wide tiles instead of 128 (hopper_tile_width)."""
    return b.stride(-2) == 1 or b.size(-2) == 1


def assert_tile(a, b, width):
    """The Hopper kernel's output tile for a and b: 128 x `width`, where `width` is the tile for an
    N-major b; a K-major b narrows 128 to 96 on one wave (hopper_tile_width); 192 x 192 where tall tiles
    pay (hopper_tall_tiles), 64 x 64 where small ones do (hopper_small_tiles). Checked on 132 SMs (H100
    SXM, H200), where the shapes of these tests were worked out against the tile-width rule; the rule
    counts waves, so elsewhere a shape may change width."""
    if sm_count() == 132:
        batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
        m, n, k = a.shape[-2], b.shape[-1], a.shape[-1]
        if width == 128 and b_is_k_major(b):
            width = hopper_tile_width(batch, m, n, b_k_major=True, k=k)
        assert torch.ops.tiles._bmm_tile(a, b) == "{}x{}".format(*hopper_tile(a, b, width))


HOPPER_WIDTHS = (64, 96, 112, 128, 160, 192, 256)


def hopper_tile_width(batch, m, n, sms=132, b_k_major=False, k=0):
    """The 16-bit Hopper kernel's tile width for a batch x m x n output (bmm/hopper.cu tile_width): 64 for
    N <= 64; else the narrowest of 192, 128 and (only where 256-wide tiles take one wave) 160 that takes
    no more waves of 128-row tiles over the SMs than 256 columns do; then 96 for a K-major b and K >= 1024
    where 128 takes one wave and 96 does too, with more tiles. 112 runs by name only."""
    if n <= 64:
        return 64

    def tiles(width):
        return batch * -(-m // 128) * -(-n // width)

    def waves(width):
        return -(-tiles(width) // sms)
    width = 256
    for w in (192, 160, 128):
        if waves(w) <= waves(256) and (w % 64 == 0 or waves(256) == 1):
            width = w
    if width == 128 and b_k_major and k >= 1024 and waves(128) == 1 and waves(96) == 1 and tiles(96) > tiles(128):
        width = 96
    return width


# One k-block of a 128-row tile by width, of a tall (192 x 192) one and of a small (64 x 64) one
# (bmm/hopper.cu k_block_us, kTallKBlockUs, kSmallKBlockUs), H100 microseconds.
K_BLOCK_US = {256: 0.76, 192: 0.51, 128: 0.40, 64: 0.48}
TALL_K_BLOCK_US, SMALL_K_BLOCK_US = 0.765, 0.32


def hopper_tall_tiles(batch, m, n, width, sms=132):
    """Whether the 16-bit Hopper kernel takes 192 x 192 tiles for a batch x m x n output over 128 x `width`
    ones (bmm/hopper.cu tall_tiles_pay): where 128-row tiles take at most two waves over the SMs and tall
    ones cost less by waves x k-block time; only over 192- and 256-wide tiles (nor, in `plan`, with the
    threads' streaming stores)."""
    if width < 192:
        return False

    def waves(rows, w):
        return -(-(batch * -(-m // rows) * -(-n // w)) // sms)
    now, tall = waves(128, width), waves(192, 192)
    return now <= 2 and tall * TALL_K_BLOCK_US < now * K_BLOCK_US.get(width, 0.40 * width / 128)


# split_k.cuh cheapest_k_split: slices of at least MIN_SPLIT_K_BLOCKS k-blocks, at most MAX_COSTED_SPLITS
# of them, no more than MAX_SPLIT_PARTIALS partial outputs; the partials' round trip at DRAM_BYTES_PER_US
# plus SUM_SPLITS_US for the summing launch.
MIN_SPLIT_K_BLOCKS, MAX_COSTED_SPLITS, MAX_SPLIT_PARTIALS = 8, 8, 2 ** 24
DRAM_BYTES_PER_US, SUM_SPLITS_US = 2.5e6, 4


def cheapest_k_split(tiles, k_blocks, outputs, sms, k_block_us, wave_us=0.0, with_cost=False):
    """bmm/split_k.cuh cheapest_k_split: the Hopper kernels' split count (slices used) for `tiles` output
    tiles over `k_blocks`, the cheapest by waves x k-blocks a slice x `k_block_us` (+ `wave_us` a wave)
    plus the partials' round trip; with `with_cost`, (count, modelled microseconds)."""
    best_splits, best_us = 1, 0.0
    for splits in range(1, MAX_COSTED_SPLITS + 1):
        if splits > 1 and (k_blocks < splits * MIN_SPLIT_K_BLOCKS or splits * outputs > MAX_SPLIT_PARTIALS):
            break
        per = -(-k_blocks // splits)
        used = -(-k_blocks // per)
        waves = -(-(tiles * used) // sms)
        us = waves * per * k_block_us + waves * wave_us
        if used > 1:
            us += used * outputs * 8 / DRAM_BYTES_PER_US + SUM_SPLITS_US
        if splits == 1 or us < best_us:
            best_splits, best_us = used, us
    return (best_splits, best_us) if with_cost else best_splits


def k_block_us(rows, width):
    """One k-block of a rows x `width` tile (bmm/hopper.cu k_block_us, kTallKBlockUs, kSmallKBlockUs)."""
    return {192: TALL_K_BLOCK_US, 64: SMALL_K_BLOCK_US}.get(rows) or K_BLOCK_US.get(width, 0.40 * width / 128)


def hopper_splits_k(batch, m, n, k, rows, width, sms=132):
    """Whether the 16-bit Hopper kernel splits K over rows x `width` tiles (bmm/hopper.cu `plan`)."""
    tiles = batch * -(-m // rows) * -(-n // width)
    return cheapest_k_split(tiles, -(-k // 64), batch * m * n, sms, k_block_us(rows, width)) > 1


def hopper_small_tiles(batch, m, n, k, sms=132):
    """Whether the 16-bit Hopper kernel takes 64 x 64 tiles for a batch x m x n x k product over 128 x 64
    ones (bmm/hopper.cu small_tiles_pay): N <= 64, where the small tiles' count with its cheapest split
    of K costs less than the 128-row tiles' with theirs (nor, in `plan`, with the threads' streaming
    stores)."""
    if n > 64:
        return False

    def cost(rows):
        tiles = batch * -(-m // rows) * -(-n // 64)
        return cheapest_k_split(tiles, -(-k // 64), batch * m * n, sms, k_block_us(rows, 64), with_cost=True)[1]
    return cost(64) < cost(128)


def hopper_tile(a, b, width, sms=132):
    """The 16-bit Hopper kernel's (rows, columns) tile for a @ b over 128-row tiles `width` wide
    (bmm/hopper.cu `plan`): 192 x 192 where tall tiles pay, 64 x 64 where small ones do, neither where
    the threads' streaming stores write the output."""
    batch, m, n, k = batch_of(a, b), a.shape[-2], b.shape[-1], a.shape[-1]
    if hopper_streams(a, b, width):
        return 128, width
    if hopper_tall_tiles(batch, m, n, width, sms):
        return 192, 192
    if hopper_small_tiles(batch, m, n, k, sms):
        return 64, 64
    return 128, width


def hopper_streams(a, b, width):
    """Whether the 16-bit Hopper kernel writes a @ b's output with the threads' streaming stores on
    128 x `width` tiles (bmm/hopper.cu `plan`): K <= 128 over an output larger than L2 that TMA can
    describe, where DRAM is slower than 4 TB/s (hopper_streams_short_k)."""
    batch, m, n, k = batch_of(a, b), a.shape[-2], b.shape[-1], a.shape[-1]
    tma_output = n * a.element_size() % 16 == 0 and width % 64 == 0
    return tma_output and k <= 128 and batch * m * n * a.element_size() > l2_bytes() and hopper_streams_short_k()


def expected_hopper_path(a, b):
    """The name bmm gives the 16-bit Hopper kernel's run of a @ b (bmm/hopper.cu `plan`): " split-k" where
    the split count's model splits K (cheapest_k_split); else " streaming-store" for K <= 128 over an
    output larger than L2 where DRAM is slower than 4 TB/s (hopper_streams_short_k); else
    " whole-tile-store" for two or three k-blocks (K = 65-192) on 256-wide tiles of an output TMA can
    describe (rows of 16-byte multiples); else TMA's stores from half-tile buffers, the bare name. Either
    store needs a width of 64-column multiples (96 and 160 store directly)."""
    batch, m, n, k = batch_of(a, b), a.shape[-2], b.shape[-1], a.shape[-1]
    sms = sm_count()
    width = hopper_tile_width(batch, m, n, sms, b_k_major=b_is_k_major(b), k=k)
    streams = hopper_streams(a, b, width)
    rows, width = hopper_tile(a, b, width, sms)
    if hopper_splits_k(batch, m, n, k, rows, width, sms):
        return HOPPER + " split-k"
    if streams:
        return HOPPER + " streaming-store"
    tma_output = n * a.element_size() % 16 == 0 and width % 64 == 0
    if tma_output and width == 256 and 64 < k <= 192:
        return HOPPER + " whole-tile-store"
    return HOPPER


# Under the "highest" precision, float32 products of at most SMALL_FLOAT32_MACS multiply-adds, or of fewer
# than SMALL_FLOAT32_OUTPUTS output elements up to FEW_OUTPUTS_MACS_TMA multiply-adds where the Hopper
# kernel reads both operands through TMA, take the general kernel (bmm/bmm.cu
# small_full_precision_float) unless they are thin (thin_path); under TF32, and otherwise, the tensor-core
# kernels.
SMALL_FLOAT32_MACS = 2 ** 24
SMALL_FLOAT32_OUTPUTS = 2 ** 19
FEW_OUTPUTS_MACS_TMA = 2 ** 26
SMALL_FLOAT32 = "general: small float32 product at full precision"


# Products with K <= THIN_K, or at most THIN_COLUMNS output columns or rows (WIDER_THIN_COLUMNS over a
# K of at least WIDER_THIN_MIN_K), take the thin CUDA-core kernels (bmm/thin.cu) unless the Hopper 16-bit
# kernel can take them.
THIN_K, THIN_COLUMNS, WIDER_THIN_COLUMNS, WIDER_THIN_MIN_K = 16, 4, 8, 64


# A short K of SHORT_K_MMA_MIN_K to THIN_K over fewer than SHORT_K_MMA_OUTPUTS outputs takes the mma.sync
# kernel instead of the thin one where it can (bmm/bmm.cu short_k_on_tensor_cores), or at full float32
# precision the general kernel, where that runs 32-wide tiles up to SHORT_K_CUDA_CORES_MACS multiply-adds
# (short_k_on_cuda_cores, general_tile).
SHORT_K_MMA_MIN_K, SHORT_K_MMA_OUTPUTS = 9, 2 ** 20
# The general kernel's 32-wide tiles: products of at most GENERAL_32_MACS multiply-adds whose 64-wide
# tiles are fewer than the SMs (bmm/general.cu tile_for); a short K takes the general kernel for them only
# up to SHORT_K_CUDA_CORES_MACS (bmm/bmm.cu short_k_on_cuda_cores).
GENERAL_32_MACS = 7 * 2 ** 21
SHORT_K_CUDA_CORES_MACS = 2 ** 22


def batch_of(a, b):
    """bmm's batch (binding/problems.cpp): a batch of 1 broadcasts, also against 0."""
    batch_a, batch_b = (a.shape[0] if a.dim() == 3 else 1), (b.shape[0] if b.dim() == 3 else 1)
    return batch_b if batch_a == 1 else batch_a


def operand_alignment(x, rows_dim, k_dim):
    """(bytes, tma, mn_major) of one operand as bmm/operand_layout.h classifies it: the largest of 16, 8,
    4, 2, 1 bytes dividing its base, leading stride and batch stride; whether TMA can address it
    (bmm/tma_maps.cu layout_of: 16 bytes, and a leading stride over 0 unless the outer dim has size 1);
    whether its M or N dim is the contiguous one. None where it has no unit-stride matrix dim."""
    rows, k = x.shape[rows_dim], x.shape[k_dim]
    if x.stride(k_dim) == 1 or k == 1:
        mn_major, outer, ld = False, rows, 0 if rows == 1 else x.stride(rows_dim)
    elif x.stride(rows_dim) == 1 or rows == 1:
        mn_major, outer, ld = True, k, 0 if k == 1 else x.stride(k_dim)
    else:
        return None
    batch_stride = x.stride(0) if x.dim() == 3 and x.shape[0] != 1 else 0
    width = 16
    for v in (x.data_ptr(), ld * x.element_size(), batch_stride * x.element_size()):
        while v % width:
            width //= 2
    return width, width == 16 and (outer == 1 or ld > 0), mn_major


def mma_copy_width(a, b):
    """The mma kernel's copy width for these operands (bmm/operand_layout.h, bmm/mma.cu copy_width): the
    narrower operand's alignment, or None where an operand has no unit-stride matrix dim."""
    layouts = operand_alignment(a, -2, -1), operand_alignment(b, -1, -2)
    return None if None in layouts else min(layout[0] for layout in layouts)


def copied_operands(a, b, three_pass):
    """How many operands the Hopper float32 kernel copies (bmm/hopper_tf32.cu copied_roles): R and Q where
    TMA cannot address them, and Q with a copied R where Q is MN-major or the product runs 3xTF32. R is
    b^T where a is K-major and b is not (the roles swapped), else a. For operands the kernel can take."""
    la, lb = operand_alignment(a, -2, -1), operand_alignment(b, -1, -2)
    r, q = (lb, la) if not la[2] and lb[2] else (la, lb)
    copy_r = not r[1]
    return int(copy_r) + int(not q[1] or (copy_r and (q[2] or three_pass)))


def general_tile(a, b):
    """The general kernel's tile edge for these operands (bmm/general.cu tile_for): 32 or 64."""
    m, n, k, batch = a.shape[-2], b.shape[-1], a.shape[-1], batch_of(a, b)
    blocks_of_64 = -(-m // 64) * -(-n // 64) * min(batch, 65535)
    return 32 if blocks_of_64 < sm_count() and batch * m * n * k <= GENERAL_32_MACS else 64


def short_k_on_tensor_cores(a, b):
    """Whether bmm takes this short-K product off the thin kernel (bmm/bmm.cu short_k_on_tensor_cores, with
    mma::can_run): to the mma kernel, or at full float32 precision maybe the general one (short_k_on_mma)."""
    m, n, k = a.shape[-2], b.shape[-1], a.shape[-1]
    width = mma_copy_width(a, b)
    return (SHORT_K_MMA_MIN_K <= k <= THIN_K and batch_of(a, b) * m * n < SHORT_K_MMA_OUTPUTS
            and width is not None and (a.dtype != torch.float64 or width >= 8) and not mma_unavailable())


def short_k_on_mma(a, b):
    """Whether bmm sends this short-K product to the mma kernel rather than the thin or general one."""
    full_precision = a.dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest"
    macs = batch_of(a, b) * a.shape[-2] * b.shape[-1] * a.shape[-1]
    on_cuda_cores = full_precision and general_tile(a, b) == 32 and macs <= SHORT_K_CUDA_CORES_MACS
    return short_k_on_tensor_cores(a, b) and not on_cuda_cores


def thin_path(a, b):
    """The thin kernel's path name for these operands' sizes, or None when bmm does not take it for them."""
    m, n, k = a.shape[-2], b.shape[-1], a.shape[-1]
    few = min(m, n) <= (WIDER_THIN_COLUMNS if k >= WIDER_THIN_MIN_K else THIN_COLUMNS)
    if short_k_on_tensor_cores(a, b):
        return None
    return "thin short-k" if k <= THIN_K else "thin few-columns" if few else None


def small_float32(a, b):
    """The general kernel's path name where bmm sends these float32 operands there for their size (at this
    precision) and they are not thin, else None."""
    if a.dtype != torch.float32 or thin_path(a, b) or short_k_on_mma(a, b):
        return None
    if short_k_on_tensor_cores(a, b):  # at full precision on 32-wide tiles (short_k_on_mma said no)
        return SMALL_FLOAT32
    outputs, k = batch_of(a, b) * a.shape[-2] * b.shape[-1], a.shape[-1]
    if torch.get_float32_matmul_precision() == "highest":
        through_tma = hopper_float32_runs() and mma_copy_width(a, b) is not None and copied_operands(a, b, True) == 0
        cap = FEW_OUTPUTS_MACS_TMA if through_tma else SMALL_FLOAT32_MACS
        small = outputs * k <= SMALL_FLOAT32_MACS or (outputs < SMALL_FLOAT32_OUTPUTS and outputs * k <= cap)
        return SMALL_FLOAT32 if small else None
    return None


def poisoned_bmm(a, b):
    """tiles.bmm, with the output's future memory filled with NaN first (same size: the caching
    allocator hands the freed block straight back)."""
    batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
    nan = torch.full((batch * a.shape[-2] * b.shape[-1],), float("nan"), dtype=a.dtype, device=a.device)
    del nan
    return torch.ops.tiles.bmm(a, b)


def pad8(x):
    return (x + 7) // 8 * 8


def operand(layout, batch, rows, cols, dtype):
    """[batch, rows, cols]: 'row' (row-major), 'col' (column-major: the .mT of a row-major tensor), or
    'col-sliced' (column-major inside a bigger tensor, every other batch, non-zero offset). The leading
    dimension is padded to a multiple of 8 elements, as TMA needs (so sizes that are multiples of 8 give
    contiguous operands)."""
    if layout == "row":
        return make_tensor((batch, rows, pad8(cols)), dtype, "cuda")[:, :, :cols]
    if layout == "col":
        return make_tensor((batch, cols, pad8(rows)), dtype, "cuda")[:, :, :rows].mT
    if layout == "col-sliced":
        return make_tensor((2 * batch, cols + 8, pad8(rows)), dtype, "cuda")[::2, 8:, :rows].mT
    raise ValueError(layout)


def operands(layouts, batch, m, n, k, dtype):
    """a ([batch, m, k]) and b ([batch, k, n]) in `layouts`, each as operand() makes it."""
    return operand(layouts[0], batch, m, k, dtype), operand(layouts[1], batch, k, n, dtype)


# (batch, M, N, K): whole tiles, edge tiles in every dim, M or N = 1, K below one k-block; N % 8 != 0 takes
# the direct-store epilogue, N % 8 == 0 the TMA-store one (outputs this small never stream). N = 40 and N = 1
# run the 64-wide kernel (as 64 x 64 tiles, which cost less there: hopper_small_tiles), the other five of the
# first seven the 128-wide one; the last four take fewer waves at wider tiles, so they run the 192- and
# 256-wide kernels (on 132 SMs: 504 tiles of 192 columns against 432 of 256 and 792 of 128, 4 waves against 4
# and 6; 210 against 180 and 330, 2 waves against 2 and 3; 432 of 192 against 288 of 256, 4 waves against 3;
# 180 against 120, 2 against 1); N = 1290 and N = 1002 store directly. test_hopper_tile_width_by_name runs
# every width on every layout.
SHAPES = [
    (2, 128, 256, 128),
    (3, 129, 257, 72),
    (1, 1, 40, 64),
    (2, 200, 1, 136),
    (2, 64, 120, 8),
    (1, 300, 520, 1000),
    (5, 37, 130, 24),
    (12, 700, 1288, 136),
    (10, 300, 1290, 200),
    (12, 700, 1000, 136),
    (10, 300, 1002, 200),
]
TILE_WIDTH = {SHAPES[2]: 64, SHAPES[3]: 64, SHAPES[-4]: 192, SHAPES[-3]: 192, SHAPES[-2]: 256, SHAPES[-1]: 256}
LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"), ("col-sliced", "row"),
           ("row", "col-sliced")]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_path(dtype, shape, layouts):
    hopper_expected()
    batch, m, n, k = shape
    a, b = operands(layouts, batch, m, n, k, dtype)
    assert torch.ops.tiles._bmm_path(a, b) == expected_hopper_path(a, b)
    assert_tile(a, b, TILE_WIDTH.get(shape, 128))
    assert_bmm_close(poisoned_bmm(a, b), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_path_batch_broadcast(dtype):
    hopper_expected()
    a2 = make_tensor((150, 96), dtype, "cuda")
    b3 = make_tensor((3, 96, 200), dtype, "cuda")
    a1 = make_tensor((1, 150, 96), dtype, "cuda")
    b2 = make_tensor((200, 96), dtype, "cuda").t()
    for a, b in [(a2, b3), (a1, b3), (make_tensor((4, 150, 96), dtype, "cuda"), b2), (a2, b2)]:
        assert torch.ops.tiles._bmm_path(a, b) == expected_hopper_path(a, b)
        assert_bmm_close(poisoned_bmm(a, b), a, b)


@requires_cuda
def test_hopper_path_many_tiles_and_batches():
    # more tiles than multiprocessors (360 of 192 wide on 132): blocks walk tiles of several batches
    hopper_expected()
    a = make_tensor((12, 520, 264), torch.bfloat16, "cuda")
    b = make_tensor((12, 264, 1032), torch.bfloat16, "cuda")
    assert torch.ops.tiles._bmm_path(a, b) == HOPPER
    assert_bmm_close(poisoned_bmm(a, b), a, b)


# A tile's TMA store is staged during the next tile's first k-blocks (one store group per k-block: two
# groups at 256-wide tiles, three at 192-wide, one at 128- and 64-wide) unless K has no more k-blocks than the
# tile has groups; then it is stored right after its mainloop. In every shape each block walks at least
# two tiles, over several tile columns but in the last, with edge tiles in M and N (on 132 SMs): 14 x 520 x 1000 (280
# tiles at 256-wide, 3 waves, against 4 at 192-wide) runs 256-wide tiles, where K <= 64 stores right
# away, 72 and 128 (two k-blocks) store whole tiles right away (Store::tma_whole_tile, which
# test_hopper_whole_tile_store compares with the half-tile groups) and 200 and 264 are held; 12 x 520 x 1032 (360 tiles at 192-wide: 3 waves, as at 256-wide, against
# 5 at 128-wide) runs 192-wide ones, where K <= 192 stores right away and 200 and 264 are held; 44 x 250
# x 264 (264 tiles at 128-wide: 2 waves, as at 256-wide) runs 128-wide ones, where K <= 64 stores right
# away and 72 (the second k-block partial) and up are held; 200 x 250 x 40 (N <= 64: 400 tiles of 64
# columns in one partial tile column, so its blocks walk tile rows and batches only) runs 64-wide ones,
# one store group, held from K = 72 on.
STORE_WALKS = {(14, 520, 1000): 256, (12, 520, 1032): 192, (44, 250, 264): 128, (200, 250, 40): 64}


@requires_cuda
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col")], ids=["row-row", "col-col"])
@pytest.mark.parametrize("k", [40, 64, 72, 128, 200, 264])
@pytest.mark.parametrize("batch_m_n", list(STORE_WALKS), ids=[f"{w}-wide" for w in STORE_WALKS.values()])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_store_under_the_next_tile(dtype, batch_m_n, k, layouts):
    hopper_expected()
    batch, m, n = batch_m_n
    a, b = operands(layouts, batch, m, n, k, dtype)
    assert torch.ops.tiles._bmm_path(a, b) == expected_hopper_path(a, b)
    if sm_count() == 132:  # the walks named above
        assert ("whole-tile" in expected_hopper_path(a, b)) == (STORE_WALKS[batch_m_n] == 256 and k in (72, 128))
    assert_tile(a, b, STORE_WALKS[batch_m_n])
    assert_bmm_close(poisoned_bmm(a, b), a, b)


# The tile-width rule on training shapes (132 SMs; metadata only, nothing is multiplied): 8192 x 768 is
# 192 tiles of 256 columns, two waves whose second is half idle, and 256 of 192 columns, two full ones;
# 4096^2 keeps 256 (512 tiles, 4 waves, against 6 at 192); N <= 128 and equal waves take 128, N <= 64
# (attention's p @ v at head size 64, 96 x 1024 x 64) 64. Where 256
# takes one wave, 160 joins: the weight gradient 768 x 3072 is 72 tiles of 256 (half the SMs), 96 of 192,
# 120 of 160 and 144 of 128 (two waves); 768 x 2304 keeps 128 (108 tiles, one wave).
WIDTH_CASES = [((1, 8192, 768), 192), ((1, 768, 3072), 160), ((1, 768, 2304), 128), ((1, 2048, 768), 128),
               ((1, 4096, 4096), 256), ((8, 2048, 2048), 256), ((96, 1024, 64), 64), ((2, 130, 264), 128),
               ((96, 1024, 72), 128)]
# With a K-major b (the input gradient g @ W^T) and K >= 1024, one-wave products narrow 128 to 96: 2048
# x 768 is 96 tiles of 128 and 128 of 96, 2 x 128 x 256 4 and 6, but not over K = 768; 768 x 2304 stays
# (108 of 128, 144 of 96: two waves), as do 2 x 130 x 264 (12 tiles either way), more than one wave, and
# the wider tiles; N <= 64 stays 64. (batch, m, n, k)
K_MAJOR_WIDTH_CASES = [((1, 2048, 768, 1024), 96), ((1, 2048, 768, 768), 128), ((2, 128, 256, 1024), 96),
                       ((1, 768, 2304, 4096), 128), ((2, 130, 264, 1024), 128), ((96, 1024, 64, 1024), 64),
                       ((1, 8192, 768, 1024), 192), ((1, 768, 3072, 8192), 160)]


# Tall tiles (192 x 192) on 132 SMs: 2048 x 2304 is 192 tiles of 128 x 192, two waves, and 132 tall ones,
# one wave (cuBLAS's tile there), as 7 x 520 x 1032 is 210 tiles of 128 x 192 and 126 tall ones. 8192 x
# 2304 stays (576 tiles of 128 x 256, five waves: past the two-wave bound), as do 12 x 520 x 1032 (360 of
# 128 x 192, three waves), 2048 x 3072 (256 of 128 x 192 and 176 tall ones, two waves either way), 768 x
# 3072 (120 of 128 x 160, one wave already), 60 x 384 x 128 (180 of 128 x 128, two waves, and 120 tall
# ones: tall tiles replace only 192- and 256-wide ones) and 64-wide tiles.
TALL_CASES = [((1, 2048, 2304), True), ((1, 8192, 2304), False), ((1, 2048, 3072), False),
              ((1, 768, 3072), False), ((7, 520, 1032), True), ((12, 520, 1032), False), ((60, 384, 128), False),
              ((96, 1024, 64), False)]

# Small tiles (64 x 64) on 132 SMs, each tile count costed with its cheapest split of K: 1 x 2048 x 64 x
# 1024 is 16 tiles of 128 x 64 and 32 small ones (one wave either way, each k-block cheaper); 1 x 8192 x
# 64 x 4096 128 small tiles unsplit, where 64 of 128 rows split K in two; 512 x 64 x 64 x 64 has M = 64,
# half of each 128-row tile zeros; 1 x 1024 x 64 x 2048 splits K at either height. 96 x 1024 x 64 x 1024
# stays (768 tiles of 128 rows, 1536 small: the waves double), as do 1 x 4096 x 64 x 8192 (modelled 22.7 us
# at 128 rows in four slices against 26.2 for small tiles in two) and N > 64. (batch, m, n, k)
SMALL_CASES = [((1, 2048, 64, 1024), True), ((1, 8192, 64, 4096), True), ((512, 64, 64, 64), True),
               ((1, 1024, 64, 2048), True), ((3, 130, 40, 200), True), ((96, 1024, 64, 1024), False),
               ((1, 4096, 64, 8192), False), ((200, 250, 40, 200), False), ((1, 2048, 72, 1024), False)]


def test_tile_width_tables_follow_the_rule():
    # the widths these tests expect on 132 SMs, against the Python copy of bmm/hopper.cu tile_width
    # (runs without a GPU: the tables and the comments above them are what the GPU tests assert)
    assert all(TILE_WIDTH.get(s, 128) == hopper_tile_width(*s[:3]) for s in SHAPES)
    assert all(hopper_tile_width(*shape) == width for shape, width in WIDTH_CASES)
    assert all(hopper_tile_width(*s[:3], b_k_major=True, k=s[3]) == width for s, width in K_MAJOR_WIDTH_CASES)
    # none of the tables' shapes takes tall tiles, so their widths are the 128-row tiles'
    assert not any(hopper_tall_tiles(*s[:3], TILE_WIDTH.get(s, 128)) for s in SHAPES)
    assert not any(hopper_tall_tiles(*shape, width) for shape, width in WIDTH_CASES)
    assert not any(hopper_tall_tiles(*s[:3], width) for s, width in K_MAJOR_WIDTH_CASES)
    assert all(hopper_tall_tiles(*shape, hopper_tile_width(*shape)) == tall for shape, tall in TALL_CASES)
    assert all(hopper_small_tiles(*shape) == small for shape, small in SMALL_CASES)
    # where 128-row tiles would split K and small ones do not, and the converse, as the comment says
    assert [hopper_splits_k(*s, 128, 64) for s in ((1, 8192, 64, 4096), (1, 2048, 64, 1024))] == [True, False]
    assert all(hopper_splits_k(*s, 64, 64) for s in ((1, 1024, 64, 2048), (1, 4096, 64, 8192)))


# The planned tall tiles multiply correctly in every layout (2048 x 2304 x 768, one wave of 132 tiles on
# 132 SMs; edge tiles in M: 2048 = 10 x 192 + 128).
@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_tall_tiles_by_plan(dtype, layouts):
    hopper_expected()
    a, b = operands(layouts, 1, 2048, 2304, 768, dtype)
    assert torch.ops.tiles._bmm_path(a, b) == expected_hopper_path(a, b)
    assert_tile(a, b, hopper_tile_width(1, 2048, 2304))
    assert_bmm_close(poisoned_bmm(a, b), a, b)


# The planned small tiles multiply correctly in every layout: SMALL_CASES that take them, one over split
# K (1 x 1024 x 64 x 2048); 3 x 130 x 40 has edge tiles in M (130 = 2 x 64 + 2), N and K.
@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_small_tiles_by_plan(dtype, layouts):
    hopper_expected()
    for shape in [(1, 2048, 64, 1024), (1, 1024, 64, 2048), (3, 130, 40, 200), (512, 64, 64, 64)]:
        a, b = operands(layouts, *shape, dtype)
        assert torch.ops.tiles._bmm_path(a, b) == expected_hopper_path(a, b)
        if sm_count() == 132:
            assert torch.ops.tiles._bmm_tile(a, b) == "64x64", shape
        assert_bmm_close(poisoned_bmm(a, b), a, b, msg=str(shape))


# Tall tiles by name (bmm/hopper_kernel.cuh, three consumer warpgroups), in every layout: 3 x 520 x 1000
# over K = 200 has edge tiles in M (520 = 2 x 192 + 136), N and K; 4 x 1000 x 1000 is 144 tiles, so blocks
# walk two; N = 1002 stores directly; 1 x 256 x 1000 over K = 8192 splits K (float partials, summed in
# order: the same bits every run); a broadcast a, and a broadcast b.
@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_tall_tiles_by_name(dtype, layouts):
    hopper_expected()
    shapes = [(3, 520, 1000, 200), (3, 520, 1002, 200), (3, 2601, 1001, 200), (4, 1000, 1000, 200),
              (1, 256, 1000, 8192)]
    check_on_path("hopper-192x192", shapes, layouts, dtype)


def check_on_path(path, shapes, layouts, dtype):
    """a @ b on `path` for each (batch, m, n, k) in `shapes`, then the first with a broadcast a and with a
    broadcast b, against the reference; where K > 1024 (split) the same bits on a second run."""
    for batch, m, n, k in shapes:
        a, b = operands(layouts, batch, m, n, k, dtype)
        out = poisoned_on_path(a, b, path)
        assert_bmm_close(out, a, b, msg=f"{path} {(batch, m, n, k)}")
        if k > 1024:
            assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, path))
    a, b = operands(layouts, *shapes[0], dtype)
    assert_bmm_close(poisoned_on_path(a[0], b, path), a[0], b, msg=path + " a broadcast")
    assert_bmm_close(poisoned_on_path(a, b[0], path), a, b[0], msg=path + " b broadcast")


# Small tiles by name (64 x 64, one consumer warpgroup), in every layout: 3 x 130 x 40 over K = 200 has
# edge tiles in M (130 = 2 x 64 + 2), N and K; over K = 64 each tile is stored right after its one k-block;
# N = 64 fills the tile; N = 200 walks tile columns; N = 33 stores directly; 200 x 250 x 48 is 800 tiles, so
# blocks walk several (and stage each tile's store under the next one's k-blocks, K > 64); 1 x 256 x 64 over
# K = 8192 splits K on 132 SMs (float partials, summed in order: the same bits every run); a short K over an
# output larger than L2 (the streaming store where DRAM is under 4 TB/s, as on an H100; TMA's on an H200);
# a broadcast a, and a broadcast b.
@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_small_tiles_by_name(dtype, layouts):
    hopper_expected()
    short_k_batch = batches_to_fill(1000, 48, dtype, 1.2)
    shapes = [(3, 130, 40, 200), (3, 130, 40, 64), (3, 130, 64, 200), (3, 130, 200, 200), (3, 130, 33, 200),
              (3, 4099, 13, 200), (200, 250, 48, 136), (1, 256, 64, 8192), (short_k_batch, 1000, 48, 72)]
    check_on_path("hopper-64x64", shapes, layouts, dtype)


# The widths above, and the tall cases' (assert_tile expects 192 x 192 where hopper_tall_tiles says so).
TILE_CASES = WIDTH_CASES + [(s, hopper_tile_width(*s)) for s, _ in TALL_CASES if s not in dict(WIDTH_CASES)]


@requires_cuda
@pytest.mark.parametrize("batch_m_n, width", TILE_CASES,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_hopper_tile_widths(batch_m_n, width):
    hopper_expected()
    batch, m, n = batch_m_n
    a = torch.empty(batch, m, 512, dtype=torch.bfloat16, device="cuda")
    b = torch.empty(batch, 512, n, dtype=torch.bfloat16, device="cuda")
    assert torch.ops.tiles._bmm_path(a, b) == HOPPER
    assert_tile(a, b, width)


@requires_cuda
@pytest.mark.parametrize("batch_m_n_k, width", K_MAJOR_WIDTH_CASES,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_hopper_tile_widths_k_major_b(batch_m_n_k, width):
    hopper_expected()
    batch, m, n, k = batch_m_n_k
    a = torch.empty(batch, m, k, dtype=torch.bfloat16, device="cuda")
    b = torch.empty(batch, n, k, dtype=torch.bfloat16, device="cuda").mT
    assert torch.ops.tiles._bmm_path(a, b).startswith(HOPPER)  # few tiles over a long K may split it
    if sm_count() == 132:
        assert torch.ops.tiles._bmm_tile(a, b) == f"128x{width}"


# Every tile width by name, in every layout: 3 x 520 x 1000 over K = 200 has edge tiles in M, N (1000 is
# no multiple of any width) and K, and at 96 or 112 columns more tiles than 132 SMs, so blocks walk
# several tiles at the widths bmm never picks (112) or picks for one wave only (96, 160), which store
# their rows from registers 16 bytes at a time (N % 8 == 0); N = 1002 stores directly, 4 or 2 bytes at a
# time, at every width; so does an odd N (an LM head's vocabulary of 50257), two at a time on every other
# row only. Where a block walks several tiles, every tile but its last is realigned into 16-byte stores
# row by row instead (store_tile_direct_realigned, at widths of 32-column multiples): 3 x 2601 x 1001
# and 3 x 8191 x 13 make more tiles than SMs at every width, so both stores run; their rows start at all
# eight skews from a 16-byte block, and with M odd the batch entries start alternately on even and odd
# positions. N = 13 leaves a tile's first block straddling N.
@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("width", HOPPER_WIDTHS)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_tile_width_by_name(dtype, width, layouts):
    hopper_expected()
    path = f"hopper-{width}"
    for m, n in ((520, 1000), (520, 1002), (2601, 1001), (8191, 13)):
        a, b = operands(layouts, 3, m, n, 200, dtype)
        assert_bmm_close(poisoned_on_path(a, b, path), a, b, msg=f"{path} M={m} N={n}")


# The same names where K splits (few tiles over K = 8192; the cost model's 64-, 96- and 112-wide k-blocks
# are taken in proportion to the width) and where N is below the width (N = 40: one partial tile column).
@requires_cuda
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col")], ids=["row-row", "col-col"])
@pytest.mark.parametrize("width", [64, 96, 112, 160])
def test_hopper_narrow_widths_split_k_and_narrow_n(width, layouts):
    hopper_expected()
    for batch, m, n, k in [(1, 256, 1000, 8192), (2, 300, 40, 520)]:
        a, b = operands(layouts, batch, m, n, k, torch.bfloat16)
        out = poisoned_on_path(a, b, f"hopper-{width}")
        assert_bmm_close(out, a, b, msg=f"hopper-{width} {(batch, m, n, k)}")
        assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, f"hopper-{width}"))


# Paired blocks by name (clusters of two over adjacent tiles, each block loading half of the operand
# they share into both; bmm/pair.h), in every layout: " pair-b" pairs tile rows 2i and
# 2i + 1, " pair-a" tile columns 2j and 2j + 1. 3 x 520 has five tile rows (the last pair's second tile
# lies past M); N = 1000, 1100 and 1154 give an odd number of tile columns at each width (a pair's
# second tile past N) and edge tiles in N and K; at 96 columns blocks walk several pairs.
PAIRED_WIDTHS = [96, 128, 192]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("pair", ["pair-b", "pair-a"])
@pytest.mark.parametrize("width", PAIRED_WIDTHS)
def test_hopper_pairs_by_name(width, pair, layouts):
    hopper_expected()
    path = f"hopper-{width} {pair}"
    for n in (1000, 1100, 1154):
        a, b = operands(layouts, 3, 520, n, 200, torch.bfloat16)
        assert_bmm_close(poisoned_on_path(a, b, path), a, b, msg=f"{path} N={n}")


# Pairs with split-K (one tile row or column: every pair's second block computes a tile past the
# output), a batch-broadcast a, and many small batch entries (blocks walking many pairs).
@requires_cuda
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col"), ("row", "col-sliced")],
                         ids=["row-row", "col-col", "row-col-sliced"])
@pytest.mark.parametrize("shape", [(1, 128, 128, 8192), (2, 200, 131, 4100), (44, 250, 264, 72)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("pair", ["pair-b", "pair-a"])
def test_hopper_pairs_split_k_and_broadcast(pair, shape, layouts):
    hopper_expected()
    batch, m, n, k = shape
    path = f"hopper-128 {pair}"
    a, b = operands(layouts, batch, m, n, k, torch.bfloat16)
    out = poisoned_on_path(a, b, path)
    assert_bmm_close(out, a, b, msg=path)
    assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, path))  # the same bits every run
    assert_bmm_close(poisoned_on_path(a[0], b, path), a[0], b, msg=path + " a broadcast")


@requires_cuda
def test_hopper_pairs_reject_float16():
    hopper_expected()
    a = make_tensor((2, 64, 64), torch.float16, "cuda")
    with pytest.raises(RuntimeError, match="built for bfloat16 only"):
        torch.ops.tiles._bmm_on_path(a, a, "hopper-128 pair-b")


@requires_cuda
def test_hopper_16_bit_paths_by_name_reject_float32():
    hopper_expected()
    a = make_tensor((2, 64, 64), torch.float32, "cuda")
    for path in ("hopper-96", "hopper-160", "hopper-128 pair-b", "hopper-128 tma-store", "hopper-192x192"):
        with pytest.raises(RuntimeError, match=f"'{path}' is a bfloat16 / float16 kernel's; float32 takes 'hopper', "):
            torch.ops.tiles._bmm_on_path(a, a, path)
    with pytest.raises(RuntimeError, match="path must be one of .*'hopper-96', .*; got 'hopper-80'"):
        torch.ops.tiles._bmm_on_path(a.bfloat16(), a.bfloat16(), "hopper-80")


# The ways a tile reaches memory, forced by name (to time them against each other on a new GPU):
# TMA's bulk stores, the threads' evict-first ones and, at 256 columns, TMA's from buffers for the
# whole tile (a stage fewer) write the same bits. One k-block (the streaming store's own case) and two
# (the whole-tile store's) over edge tiles in M and N, with a batch-broadcast a; and a long K over few
# tiles, which the plan would split and a forced store runs unsplit. (Which store ran, the bits cannot tell.)
FORCED_STORES = ["tma-store", "streaming-store"]


def forced_stores(width):
    return FORCED_STORES + (["whole-tile-store"] if width == 256 else [])


@requires_cuda
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col"), ("row", "col-sliced")],
                         ids=["row-row", "col-col", "row-col-sliced"])
@pytest.mark.parametrize("width", [64, 128, 192, 256])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_stores_by_name(dtype, width, layouts):
    hopper_expected()
    for batch, m, n, k in [(3, 300, 520, 64), (2, 300, 520, 120), (1, 256, 1000, 8192)]:
        a, b = operands(layouts, batch, m, n, k, dtype)
        for lhs in (a, a[0]) if batch > 1 else (a,):
            tma, *others = (poisoned_on_path(lhs, b, f"hopper-{width} {store}") for store in forced_stores(width))
            assert_bmm_close(tma, lhs, b, msg=f"hopper-{width} tma-store {(batch, m, n, k)}")
            for store, out in zip(forced_stores(width)[1:], others):
                assert torch.equal(tma, out), f"hopper-{width}: {store} wrote other bits than tma-store"


@requires_cuda
def test_hopper_forced_store_needs_a_tma_output():
    hopper_expected()
    a = make_tensor((2, 64, 64), torch.bfloat16, "cuda")
    b = make_tensor((2, 1002, 64), torch.bfloat16, "cuda").mT  # K-major: the output's rows are 2004 bytes
    with pytest.raises(RuntimeError, match="'streaming-store' needs an output that TMA can describe"):
        torch.ops.tiles._bmm_on_path(a, b, "hopper-128 streaming-store")
    with pytest.raises(RuntimeError, match="path must be one of .*'hopper-128 tma-store', .*; got 'hopper-96 tma-store'"):
        torch.ops.tiles._bmm_on_path(a, a, "hopper-96 tma-store")
    with pytest.raises(RuntimeError, match="'whole-tile-store' needs an output that TMA can describe"):
        torch.ops.tiles._bmm_on_path(a, b, "hopper-256 whole-tile-store")
    with pytest.raises(RuntimeError, match="'hopper-256 whole-tile-store'"):
        torch.ops.tiles._bmm_on_path(a, a, "hopper-128 whole-tile-store")


@requires_cuda
@pytest.mark.parametrize("k", [72, 128, 192])
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_whole_tile_store(dtype, layouts, k):
    # Two or three k-blocks over 256-wide tiles (40 x 250 x 1000: three waves of 256-wide tiles on 132
    # SMs, four of 192; edge tiles in M, N and K): bmm stages each tile whole in one store group
    # (Store::tma_whole_tile, a stage fewer), which writes what half-tile groups write.
    hopper_expected()
    a, b = operands(layouts, 40, 250, 1000, k, dtype)
    assert_tile(a, b, 256)
    expected = HOPPER + " whole-tile-store" if sm_count() == 132 else expected_hopper_path(a, b)
    assert torch.ops.tiles._bmm_path(a, b) == expected
    out = poisoned_bmm(a, b)
    assert_bmm_close(out, a, b)
    assert torch.equal(out, poisoned_on_path(a, b, "hopper-256 tma-store"))


def batches_to_fill(m, n, dtype, times):
    """The number of [m, n] output matrices whose bytes are `times` the GPU's L2 cache."""
    return max(1, round(times * l2_bytes() / (m * n * dtype.itemsize)))


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("n, width", [(2056, 256), (376, 192), (120, 128), (48, 64)],
                         ids=["256-wide", "192-wide", "128-wide", "64-wide"])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_streaming_store(dtype, n, width, layouts):
    # short K (two k-blocks, the second partial) and an output larger than L2: on DRAM under 4 TB/s the
    # consumers' own evict-first stores instead of TMA's, from 256-wide tiles, 192-wide ones where they
    # take as many waves (N = 376: two tile columns at either width), 128-wide ones when N <= 128 and
    # 64-wide ones when N <= 64;
    # edge tiles in M and N. On faster DRAM bmm keeps TMA's stores, and the streaming ones run by name.
    hopper_expected()
    m, k = 1000, 72
    batch = batches_to_fill(m, n, dtype, 1.2)
    a, b = operands(layouts, batch, m, n, k, dtype)
    assert_tile(a, b, width)
    if hopper_streams_short_k():
        assert torch.ops.tiles._bmm_path(a, b) == HOPPER + " streaming-store"
        out = poisoned_bmm(a, b)
    else:  # TMA's stores: from whole-tile buffers at 256 columns (two k-blocks)
        assert torch.ops.tiles._bmm_path(a, b) == expected_hopper_path(a, b)
        out = poisoned_on_path(a, b, f"hopper-{width} streaming-store")
    assert_bmm_close(out, a, b)


# Few output tiles over a long K: the 16-bit kernel splits K (bmm/hopper.cu `plan`, costed per split
# count) and each slice's float partials are summed in slice order. One tile over K = 8192 (two 96-wide
# ones where b is K-major) takes 8 slices on any GPU of 8 or more SMs; on 132 SMs 2 x 200 x 131 over K = 4100 takes 8 (edge tiles in M and N, an
# odd N: single-element partial stores, a K tail in the last slice) and 300 x 264 over K = 3000 five. Where
# N % 4 == 0 (128, 264) the partials are stored 16 bytes at a time (store_partials_wide).
HALF_SPLIT_K_SHAPES = [(1, 128, 128, 8192), (2, 200, 131, 4100), (1, 300, 264, 3000)]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", HALF_SPLIT_K_SHAPES, ids=["x".join(map(str, s)) for s in HALF_SPLIT_K_SHAPES])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_hopper_split_k(dtype, shape, layouts):
    hopper_expected()
    batch, m, n, k = shape
    a, b = operands(layouts, batch, m, n, k, dtype)
    if shape == HALF_SPLIT_K_SHAPES[0] or sm_count() == 132:
        assert torch.ops.tiles._bmm_path(a, b) == HOPPER + " split-k"
    out = poisoned_bmm(a, b)
    assert_bmm_close(out, a, b)
    assert torch.equal(out, torch.ops.tiles.bmm(a, b))  # the same bits every run


@requires_cuda
def test_hopper_split_k_batch_broadcast():
    # a shared along the batch (a 2-D a), and a batch of b that is a broadcast view
    hopper_expected()
    dtype = torch.bfloat16
    a2 = make_tensor((128, 4096), dtype, "cuda")
    b3 = make_tensor((3, 4096, 136), dtype, "cuda")
    b_shared = make_tensor((1, 4096, 136), dtype, "cuda").expand(3, 4096, 136)
    for a, b in [(a2, b3), (make_tensor((3, 128, 4096), dtype, "cuda"), b_shared)]:
        assert torch.ops.tiles._bmm_path(a, b) == HOPPER + " split-k"
        assert_bmm_close(poisoned_bmm(a, b), a, b)


@requires_cuda
def test_hopper_split_k_only_where_tiles_are_few():
    # metadata only, on 132 SMs: the attention-projection weight gradient of a GPT-2-small block over 8192
    # tokens (768 x 768: 36 tiles) splits K; the MLP's (768 x 3072: 96 tiles of 192) and 8192 x 768 do not
    hopper_expected()
    if sm_count() != 132:
        pytest.skip("the split counts were worked out for 132 SMs")
    for m, n, k, expected in [(768, 768, 8192, HOPPER + " split-k"), (768, 3072, 8192, HOPPER),
                              (8192, 768, 3072, HOPPER), (768, 768, 512, HOPPER)]:
        a = torch.empty(k, m, dtype=torch.bfloat16, device="cuda").t()  # x^T, as autograd passes it
        b = torch.empty(k, n, dtype=torch.bfloat16, device="cuda")
        assert torch.ops.tiles._bmm_path(a, b) == expected, (m, n, k)


@requires_cuda
def test_hopper_store_choice_follows_output_size_and_k():
    # the same short-K problem stores through TMA while its output fits in L2 (and beyond it on DRAM of
    # 4 TB/s or more), of whole tiles at 256 columns and two or three k-blocks; K > 128 never streams
    hopper_expected()
    dtype, m, n = torch.bfloat16, 1000, 2056
    whole = HOPPER + " whole-tile-store"  # 256-wide tiles: more waves at 192 (the batches fill L2)
    streams = HOPPER + " streaming-store" if hopper_streams_short_k() else whole
    for batch, k, expected in [(batches_to_fill(m, n, dtype, 0.8), 128, whole),
                               (batches_to_fill(m, n, dtype, 1.2), 128, streams),
                               (batches_to_fill(m, n, dtype, 1.2), 136, whole),
                               (batches_to_fill(m, n, dtype, 1.2), 200, HOPPER)]:
        a = make_tensor((1, m, k), dtype, "cuda").expand(batch, m, k)  # a broadcast along the batch
        b = make_tensor((batch, k, n), dtype, "cuda")
        expected = expected if sm_count() == 132 else expected_hopper_path(a, b)  # widths worked out for 132
        assert torch.ops.tiles._bmm_path(a, b) == expected, (batch, k)
        assert_bmm_close(poisoned_bmm(a, b), a, b)


# Layouts the Hopper kernel cannot describe to TMA. With a unit-stride matrix dim they take the mma
# kernel's narrow copies or element-by-element loads; without one, the general kernel.
# In float32 under "highest" these products are small enough for the general kernel; the tests then run
# the mma kernel by name.
FALLBACKS = {
    "odd_K_rows": lambda dt: (make_tensor((2, 33, 17), dt, "cuda"), make_tensor((2, 17, 40), dt, "cuda")),
    "misaligned_base": lambda dt: (make_tensor((2, 33, 72), dt, "cuda")[:, :, 1:65],
                                   make_tensor((2, 64, 40), dt, "cuda")),
    "no_unit_stride": lambda dt: (make_tensor((2, 33, 64), dt, "cuda", "sliced"), make_tensor((2, 64, 40), dt, "cuda")),
    "odd_batch_stride": lambda dt: (make_tensor((2 * 33 * 64 + 3,), dt, "cuda")[3:].view(2, 33, 64),
                                    make_tensor((2, 64, 40), dt, "cuda")),
}
MMA_KIND_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "3xtf32", torch.float64: "f64"}


def expected_fallback_path(dtype, case):
    if case == "no_unit_stride":
        return "general"
    mma_expected()
    return f"mma-sync {MMA_KIND_NAMES[dtype]} unaligned"


@requires_cuda
@pytest.mark.parametrize("case", FALLBACKS.keys())
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_other_layouts(dtype, case):
    a, b = FALLBACKS[case](dtype)
    path = torch.ops.tiles._bmm_path(a, b)
    assert path.startswith(expected_fallback_path(dtype, case)), path
    # a tile only for the Hopper and mma.sync kernels
    assert torch.ops.tiles._bmm_tile(a, b) == (mma_tile(a, b) if path.startswith("mma-sync") else "")
    assert_bmm_close(poisoned_bmm(a, b), a, b)


def test_bmm_tile_on_the_cpu():
    a, b = make_tensor((2, 33, 17), torch.float32, "cpu"), make_tensor((2, 17, 40), torch.float32, "cpu")
    assert torch.ops.tiles._bmm_path(a, b) == "cpu"
    assert torch.ops.tiles._bmm_tile(a, b) == ""
    with pytest.raises(RuntimeError, match="tiles::bmm"):  # the same argument checks as bmm
        torch.ops.tiles._bmm_tile(a, make_tensor((2, 16, 40), torch.float32, "cpu"))


@requires_cuda
@pytest.mark.parametrize("case", FALLBACKS.keys())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_other_layouts_wide_dtypes(dtype, case):
    a, b = FALLBACKS[case](dtype)
    path = torch.ops.tiles._bmm_path(a, b)
    expected = expected_fallback_path(dtype, case)
    assert path.startswith(small_float32(a, b) or expected), path
    assert_bmm_close(poisoned_bmm(a, b), a, b)
    if expected.startswith("mma-sync"):  # the kernel bmm would take for a larger product
        for name in mma_paths(dtype):
            assert_bmm_close(poisoned_on_path(a, b, name), a, b, msg=name)


# ---- the mma.sync kernel ------------------------------------------------------------------------
# (dtype, float32 matmul precision) -> the kind _bmm_path names, and the tolerance it is held to:
# TF32 keeps 10 mantissa bits of each operand (relative error up to ~2^-11 per operand); 3xTF32 and
# the others are held to their dtype's usual tolerance.
MMA_KINDS = {
    (torch.bfloat16, "highest"): ("bf16", None),
    (torch.float16, "highest"): ("fp16", None),
    (torch.float32, "highest"): ("3xtf32", None),
    (torch.float32, "high"): ("tf32", Tol(rtol=2e-3, atol=1e-5)),
    (torch.float64, "highest"): ("f64", None),
}
# What bmm takes for few output tiles over a K too short for the mma kernel's split (general_split_k).
SPLIT_K = "general: few output tiles over a long K (split-K)"
# (2, 70, 40, 3000): few tiles over a long K, which the kernel splits (mma_splits_k) at either tile size.
MMA_SHAPES = SHAPES + [(1, 65, 33, 0), (2, 1, 1, 1), (3, 17, 9, 5), (2, 70, 40, 3000)]


def poisoned_on_path(a, b, path):
    batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
    nan = torch.full((batch * a.shape[-2] * b.shape[-1],), float("nan"), dtype=a.dtype, device=a.device)
    del nan
    return torch.ops.tiles._bmm_on_path(a, b, path)


def mma_operand(layout, batch, rows, cols, dtype):
    """operand() with the leading dimension padded to 16 bytes of this dtype (what cp.async needs)."""
    per16 = 16 // torch.empty((), dtype=dtype).element_size()
    pad = lambda x: (x + per16 - 1) // per16 * per16  # noqa: E731
    if layout == "row":
        return make_tensor((batch, rows, pad(cols)), dtype, "cuda")[:, :, :cols]
    if layout == "col":
        return make_tensor((batch, cols, pad(rows)), dtype, "cuda")[:, :, :rows].mT
    if layout == "col-sliced":
        return make_tensor((2 * batch, cols + per16, pad(rows)), dtype, "cuda")[::2, per16:, :rows].mT
    raise ValueError(layout)


# The mma kernel's block tiles, forced by name: 64 x 64, and 128 x 128 (128 x 64 for 3xTF32). float64
# has one tile (its own kernel), which either name runs.
MMA_TILE_PATHS = ("mma-64", "mma-128")


# Each forced tile and the tile name mma_splits_k takes for it ("128" stands for the kind's large tile).
WHOLE_K_TILES = (("mma-64", "64x64"), ("mma-128", "128"))


def mma_paths(dtype):
    return ("mma",) if dtype == torch.float64 else MMA_TILE_PATHS


def check_mma_kind(kind, a, b, paths=None):
    """Runs the mma kernel at each of its tile sizes on a and b under the kind's float32 matmul precision
    and checks it against float64; with `paths`, the path bmm itself takes for them must be one of those
    (or, for a small float32 product, the general kernel: small_float32)."""
    dtype, precision = kind
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        path = torch.ops.tiles._bmm_path(a, b)
        small = small_float32(a, b)
        split_name = mma_split_name(a, b) if path.startswith("mma-sync") else ""
        general_split = general_split_k(a, b)
        outs = {name: poisoned_on_path(a, b, name) for name in mma_paths(dtype)}
        # where a tile splits K, its unsplit walk too: the other side of the split rule
        outs.update({f"{name} whole-k": poisoned_on_path(a, b, f"{name} whole-k") for name, tile in WHOLE_K_TILES
                     if (dtype != torch.float64 or name == "mma-64") and mma_splits_k(a, b, tile)})
    finally:
        torch.set_float32_matmul_precision(old)
    thin = thin_path(a, b)
    if path.startswith("mma-sync"):  # " split-k" / " tail-split-k" where the kernel splits K, else nothing
        assert path.endswith(split_name) if split_name else not path.endswith("split-k"), path
        path = path.removesuffix(split_name)
    if general_split and not (thin or small or path.startswith("hopper-wgmma")):  # (Hopper is asked first)
        assert path == SPLIT_K, path
    else:
        assert paths is None or (path == thin if thin else path == small if small else path in paths), path
    for name, out in outs.items():
        assert_bmm_close(out, a, b, MMA_KINDS[kind][1], msg=name)


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", MMA_SHAPES, ids=["x".join(map(str, s)) for s in MMA_SHAPES])
@pytest.mark.parametrize("kind", MMA_KINDS.keys(), ids=[v[0] for v in MMA_KINDS.values()])
def test_mma_path(kind, shape, layouts):
    mma_expected()
    dtype, name = kind[0], MMA_KINDS[kind][0]
    batch, m, n, k = shape
    a = mma_operand(layouts[0], batch, m, k, dtype)
    b = mma_operand(layouts[1], batch, k, n, dtype)
    # bmm's own path is checked for float32 / float64 (bf16 / fp16 take the Hopper kernel on an H100)
    paths = ((f"mma-sync {name}", f"hopper-wgmma {name}", f"hopper-wgmma {name} split-k")
             if dtype in (torch.float32, torch.float64) else None)
    check_mma_kind(kind, a, b, paths)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_mma_path_batch_broadcast_and_many_tiles(dtype):
    mma_expected()
    a2 = make_tensor((150, 96), dtype, "cuda")
    b3 = make_tensor((3, 96, 200), dtype, "cuda")
    b2 = make_tensor((200, 96), dtype, "cuda").t()
    big_a, big_b = make_tensor((7, 520, 264), dtype, "cuda"), make_tensor((7, 264, 1032), dtype, "cuda")
    for a, b in [(a2, b3), (make_tensor((4, 150, 96), dtype, "cuda"), b2), (a2, b2), (big_a, big_b)]:
        path = torch.ops.tiles._bmm_path(a, b)
        small = small_float32(a, b)
        assert path == small if small else path.startswith(("mma-sync", "hopper-wgmma")), path
        assert_bmm_close(poisoned_bmm(a, b), a, b)
        for name in mma_paths(dtype):
            assert_bmm_close(poisoned_on_path(a, b, name), a, b, msg=name)


# The mma kernel's large block tile per kind, rows x columns (bmm/mma_kernel.cuh ConfigFor), and, for
# 16-bit and TF32 on sm_90, the cost in thousandths of a large block of a round of 1, 2 or 3 small 64 x 64
# blocks on an SM (bmm/mma.cu tile_size).
MMA_LARGE_TILES = {"bf16": (128, 128), "fp16": (128, 128), "tf32": (128, 128), "3xtf32": (128, 64)}
MMA_SMALL_ROUND = (0, 550, 700, 835)


def mma_kind_name(dtype):
    if dtype == torch.float32:
        return "tf32" if torch.get_float32_matmul_precision() != "highest" else "3xtf32"
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "f64"}[dtype]


def mma_tile(a, b):
    """The mma kernel's block tile for a and b as _bmm_tile names it (bmm/mma.cu tile_size): on sm_90,
    64 x 64 where its blocks on the busiest SM, three at a time, cost under 0.95 of the large ones, and
    always for 3xTF32; elsewhere the large tile; float64's one tile."""
    kind = mma_kind_name(a.dtype)
    if kind == "f64":
        return "64x64"
    rows, cols = MMA_LARGE_TILES[kind]
    if torch.cuda.get_device_capability() != (9, 0):
        return f"{rows}x{cols}"
    if kind == "3xtf32":
        return "64x64"
    m, n, batch, sms = a.shape[-2], b.shape[-1], batch_of(a, b), sm_count()
    large = -(-(-(-m // rows) * -(-n // cols) * batch) // sms)
    small = -(-(-(-m // 64) * -(-n // 64) * batch) // sms)
    cost = small // 3 * MMA_SMALL_ROUND[3] + MMA_SMALL_ROUND[small % 3]
    return "64x64" if 20 * cost < 19 * 1000 * large else f"{rows}x{cols}"


# The mma kernel's split-K costs (bmm/mma.cu SplitCosts): blocks at once on one SM, a k-tile's
# microseconds for a round of 1 .. that many blocks, the bytes of an output's partial.
DMMA_SPLIT_COSTS = (3, (0, 0.49, 0.80, 1.08), 16)
SMALL_TILE_SPLIT_COSTS = (3, (0, 0.55, 0.70, 0.835), 8)
LARGE_TILE_SPLIT_COSTS = (1, (0, 1.0), 8)


def split_cost(costs, blocks, slices, per, outputs, sms):
    """bmm/mma.cu split_cost: the busiest SM's rounds of blocks, plus the partials' round trip and the sum."""
    per_sm, round_us, partial_bytes = costs
    on_sm = -(-(blocks * slices) // sms)
    us = float(per) * (float(on_sm // per_sm) * round_us[per_sm] + round_us[on_sm % per_sm])
    return us + (float(slices * outputs * partial_bytes) / 2.5e6 + 4 if slices > 1 else 0)


def cheapest_split(costs, blocks, k_tiles, outputs, sms):
    """The mma kernel's split count and its modelled time, with the time unsplit (bmm/mma.cu
    cheapest_split): the cheapest count by split_cost; a tenth must be saved."""
    whole = split_cost(costs, blocks, 1, k_tiles, outputs, sms)
    best, best_us = 1, whole
    for splits in range(2, 17):
        per = -(-k_tiles // splits)
        if per < 8:
            break
        used = -(-k_tiles // per)
        if used * outputs > 2 ** 24:
            break
        us = split_cost(costs, blocks, used, per, outputs, sms)
        if us < best_us:
            best, best_us = used, us
    return (best, best_us, whole) if best_us < 0.9 * whole else (1, whole, whole)


def tail_split(m, n, batch, k_tiles, best_us, sms):
    """bmm/mma.cu tail_split for float64: (tile rows run whole, slices of the rest), or None."""
    costs = DMMA_SPLIT_COSTS
    tiles_m, tiles_n, slots = -(-m // 64), -(-n // 64), costs[0] * sms
    waves = tiles_m * tiles_n // slots
    rows = waves * slots // tiles_n
    if batch != 1 or waves == 0 or rows == 0 or rows >= tiles_m:
        return None
    main_us = split_cost(costs, rows * tiles_n, 1, k_tiles, 0, sms)
    splits, tail_us, _ = cheapest_split(costs, (tiles_m - rows) * tiles_n, k_tiles, (m - 64 * rows) * n, sms)
    return (rows, splits) if splits > 1 and main_us + tail_us < best_us else None


def mma_split_name(a, b, tile=None):
    """How the mma kernel splits K for a and b at `tile` ("64x64" or the large tile; default the one bmm
    picks, mma_tile), as _bmm_path names it: "", " split-k" or (float64) " tail-split-k"; bmm/mma.cu
    split_plan."""
    m, n, k, batch, sms = a.shape[-2], b.shape[-1], a.shape[-1], batch_of(a, b), sm_count()
    kind = mma_kind_name(a.dtype)
    if k == 0 or batch * m * n == 0:
        return ""
    if kind == "f64":
        rows, cols, depth, costs = 64, 64, 16, DMMA_SPLIT_COSTS
    else:
        small = (tile or mma_tile(a, b)) == "64x64"
        rows, cols = (64, 64) if small else MMA_LARGE_TILES[kind]
        depth = 16 if kind == "tf32" else 32
        costs = SMALL_TILE_SPLIT_COSTS if small else LARGE_TILE_SPLIT_COSTS
    blocks, k_tiles = -(-m // rows) * -(-n // cols) * batch, -(-k // depth)
    splits, us, whole = cheapest_split(costs, blocks, k_tiles, batch * m * n, sms)
    if kind == "f64" and splits == 1 and tail_split(m, n, batch, k_tiles, 0.9 * whole, sms):
        return " tail-split-k"
    return " split-k" if splits > 1 else ""


def mma_splits_k(a, b, tile=None):
    """Whether the mma kernel splits K for a and b at `tile`, in any way (mma_split_name)."""
    return mma_split_name(a, b, tile) != ""


def general_split_k(a, b):
    """Whether bmm sends operands the mma kernel takes to the general kernel's split-K (bmm/bmm.cu): few
    tiles over a long K that the mma kernel would not split (not float64, whose DMMA kernel decides)."""
    return few_tiles_long_k(a, b) and a.dtype != torch.float64 and not mma_splits_k(a, b)


@requires_cuda
@pytest.mark.parametrize("precision", ["highest", "high"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_mma_tile_by_rounds(dtype, precision):
    """Unaligned operands (the mma kernel's) on both sides of the choice: 64 or 100 rows (one large row
    tile; one or two small) over column tiles that make one to eight large blocks per SM and one more
    column tile, batches of 4 and 8, and 100 x (24 or 25 tiles of 128 columns) over a batch of 4, where
    three small blocks per SM turn into four (on 132 SMs)."""
    mma_expected()
    if dtype != torch.float32 and precision == "high":
        pytest.skip("the float32 matmul precision changes only float32's kernel")
    torch.set_float32_matmul_precision(precision)
    sms, seen = sm_count(), set()
    cols = MMA_LARGE_TILES[mma_kind_name(dtype)][1]
    cases = [(rows, batch, rounds * sms // batch + extra)
             for rows, batch, rounds, extra in itertools.product((64, 100), (4, 8), (1, 2, 3, 5, 8), (0, 1))]
    for rows, batch, tiles_n in cases + [(100, 4, 24), (100, 4, 25)]:
        a = unaligned_operand("row", batch, rows, 72, dtype)
        b = unaligned_operand("row", batch, 72, tiles_n * cols - 5, dtype)
        path = torch.ops.tiles._bmm_path(a, b)
        if not path.startswith("mma-sync"):  # a float32 rule may send it elsewhere
            assert dtype == torch.float32 and precision == "highest", path
            continue
        assert torch.ops.tiles._bmm_tile(a, b) == mma_tile(a, b), (rows, batch, tiles_n)
        seen.add(mma_tile(a, b))
        assert_bmm_close(poisoned_bmm(a, b), a, b, MMA_KINDS[(dtype, precision)][1])
    # 3xTF32 takes small tiles on sm_90, large ones elsewhere, whatever the shape
    sizes = 1 if mma_kind_name(dtype) == "3xtf32" or torch.cuda.get_device_capability() != (9, 0) else 2
    assert len(seen) == sizes, seen


def unaligned_operand(layout, batch, rows, cols, dtype, step=1):
    """[batch, rows, cols] whose base is `step` elements past a 16-byte boundary, with a leading dimension
    of more than its length: 'row', 'col' (the .mT of such a row-major tensor), or 'col-sliced' (every
    other batch of a column-major one, so the batch stride is unaligned too). step 1: the leading
    dimension is one more than the length; step 2: the next one past length + 2 whose bytes are a
    multiple of 4 but not of 16 (so a 16-bit operand is 4-byte aligned, not more)."""
    def ld(length):
        if step == 1:
            return length + 1
        n = length + step
        while (n * dtype.itemsize) % 4 or (n * dtype.itemsize) % 16 == 0:
            n += 1
        return n

    if layout == "row":
        return make_tensor((batch, rows, ld(cols)), dtype, "cuda")[:, :, step:step + cols]
    if layout == "col":
        return make_tensor((batch, cols, ld(rows)), dtype, "cuda")[:, :, step:step + rows].mT
    if layout == "col-sliced":
        return make_tensor((2 * batch, cols + step, ld(rows)), dtype, "cuda")[::2, step:, step:step + rows].mT
    raise ValueError(layout)


# Shapes for the unaligned loads: partial tiles, K past the stage ring (128 x 128 x 32 tiles,
# 3-4 stages), one row or column, K of one. N = 257 and 523 are odd: the outputs go out in pairs on every
# other row only (and 2 x 129 x 257 starts its second matrix on an odd position), 130 in pairs throughout.
UNALIGNED_SHAPES = [(2, 129, 257, 72), (1, 1, 40, 65), (2, 200, 1, 137), (3, 37, 130, 1), (1, 300, 523, 1001),
                    (4, 64, 64, 64)]
UNALIGNED_KINDS = list(MMA_KINDS)
# An odd step leaves 16-bit operands 2-byte aligned (element-by-element loads); an even one, or any
# float32 step, 4-byte aligned (4-byte cp.async copies); float64 operands are 8-byte aligned.
STEPS = [(k, step) for k in UNALIGNED_KINDS for step in ((1, 2) if k[0].itemsize == 2 else (1,))]


def unaligned_path_name(kind, step):
    width = min(8, kind[0].itemsize * step)
    return f"mma-sync {MMA_KINDS[kind][0]} unaligned" + (f" {width}-byte" if width >= 4 else "")


@functools.lru_cache(maxsize=None)
def hopper_float32_runs():
    """Whether float32 products that are not small take the Hopper kernel here (an sm_90a build on an
    sm_90 GPU): then operands TMA cannot address may take it too, copied by its producer warps."""
    probe = torch.ones(1024, 1024, device="cuda")  # not small: 2^30 multiply-adds, 2^20 outputs
    return torch.ops.tiles._bmm_path(probe, probe).startswith("hopper-wgmma")


def few_tiles_long_k(a, b):
    """Whether bmm counts the product as few 128 x 128 output tiles over a long K (bmm/bmm.cu)."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    tiles = -(-m // 128) * -(-n // 128) * batch_of(a, b)
    return tiles * 8 < sm_count() and k >= 256


# Under TF32, products with one operand the Hopper kernel must copy take it over a K of at least
# LONG_K_TF32_COPIES also below `prefers`' size, unless few tiles over a long K keep them on the mma
# kernel, which splits K (bmm/bmm.cu long_k_tf32_on_hopper_copies); with both copied, the mma kernel.
LONG_K_TF32_COPIES = 1024


def copies_preferred(a, b, precision):
    """Whether bmm sends float32 operands the Hopper kernel must copy there (bmm/hopper_tf32.cu `prefers`):
    products of at least 2^30 flops whose output spans 128 rows and columns; under "highest" (3xTF32)
    only with a M-major a and an N-major b (b's tiles transposed as they are copied). Under TF32, also one
    operand copied over a long K but few tiles (bmm.cu long_k_tf32_on_hopper_copies; small ones take the
    general kernel first, small_float32)."""
    batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)  # either may broadcast
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if 2 * batch * m * n * k < 2**30 or min(m, n) < 128:
        long_k = k >= LONG_K_TF32_COPIES and copied_operands(a, b, False) == 1
        return precision != "highest" and long_k and not few_tiles_long_k(a, b)
    return precision != "highest" or (a.stride(-2) == 1 and b.stride(-1) == 1)


def unaligned_bmm_paths(kind, a, b, mma_names):
    """The paths bmm may take for operands TMA cannot address: the mma kernel's `mma_names`, or for float32
    the Hopper kernel's copies (split or not by its plan) where bmm prefers them."""
    if kind[0] == torch.float32 and hopper_float32_runs() and copies_preferred(a, b, kind[1]):
        name = f"hopper-wgmma {MMA_KINDS[kind][0]} copied"
        return (name, name + " split-k")
    return tuple(mma_names)


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", UNALIGNED_SHAPES, ids=["x".join(map(str, s)) for s in UNALIGNED_SHAPES])
@pytest.mark.parametrize("kind_step", STEPS, ids=[f"{MMA_KINDS[k][0]}-step{s}" for k, s in STEPS])
def test_mma_path_unaligned(kind_step, shape, layouts):
    mma_expected()
    kind, step = kind_step
    batch, m, n, k = shape
    a = unaligned_operand(layouts[0], batch, m, k, kind[0], step)
    b = unaligned_operand(layouts[1], batch, k, n, kind[0], step)
    names = {unaligned_path_name(kind, step)}
    if 1 in (m, n, k):  # a dim of size 1 leaves either order to the classifier, and its stride is not ours
        names |= {unaligned_path_name(kind, 1), unaligned_path_name(kind, 2)}
    check_mma_kind(kind, a, b, unaligned_bmm_paths(kind, a, b, names))


# One 16-bit operand 2-byte aligned (register loads) beside a 16-byte aligned one (cp.async copies: the
# mixed kernels of bmm/mma.cu's launch_width), either way round, in every layout: an LM head's odd
# vocabulary beside aligned activations. The path names the narrower width.
@requires_cuda
@pytest.mark.parametrize("odd", ["a", "b"])
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", [(2, 129, 257, 72), (1, 300, 523, 1001)], ids=["2x129x257x72", "1x300x523x1001"])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_mma_path_one_operand_unaligned(dtype, shape, layouts, odd):
    mma_expected()
    batch, m, n, k = shape
    kind = (dtype, "highest")
    a = unaligned_operand(layouts[0], batch, m, k, dtype, 1) if odd == "a" else mma_operand(layouts[0], batch, m, k, dtype)
    b = unaligned_operand(layouts[1], batch, k, n, dtype, 1) if odd == "b" else mma_operand(layouts[1], batch, k, n, dtype)
    check_mma_kind(kind, a, b, {unaligned_path_name(kind, 1)})


def eight_byte_operand(layout, batch, rows, cols, dtype):
    """[batch, rows, cols] at an aligned base whose leading dimension is a multiple of 8 bytes but not of 16
    (as 'row', 'col' or 'col-sliced' in mma_operand): the mma kernel copies it 8 bytes at a time."""
    def ld(length):
        n = length
        while (n * dtype.itemsize) % 8 or (n * dtype.itemsize) % 16 == 0:
            n += 1
        return n

    if layout == "row":
        return make_tensor((batch, rows, ld(cols)), dtype, "cuda")[:, :, :cols]
    if layout == "col":
        return make_tensor((batch, cols, ld(rows)), dtype, "cuda")[:, :, :rows].mT
    if layout == "col-sliced":
        return make_tensor((2 * batch, cols, ld(rows)), dtype, "cuda")[::2, :, :rows].mT
    raise ValueError(layout)


EIGHT_BYTE_SHAPES = [(2, 129, 257, 72), (1, 300, 523, 1001), (3, 64, 64, 40)]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", EIGHT_BYTE_SHAPES, ids=["x".join(map(str, s)) for s in EIGHT_BYTE_SHAPES])
@pytest.mark.parametrize("kind", UNALIGNED_KINDS, ids=[MMA_KINDS[k][0] for k in UNALIGNED_KINDS])
def test_mma_path_8_byte_copies(kind, shape, layouts):
    # strides that are 8-byte but not 16-byte multiples: 8-byte cp.async copies (partial tiles, K tails),
    # but 4-byte ones for 3xTF32 with a K-major a (whose 8-byte variant would spill: bmm/mma.cu)
    mma_expected()
    batch, m, n, k = shape
    a = eight_byte_operand(layouts[0], batch, m, k, kind[0])
    b = eight_byte_operand(layouts[1], batch, k, n, kind[0])
    width = 4 if kind == (torch.float32, "highest") and layouts[0] == "row" else 8
    check_mma_kind(kind, a, b, (f"mma-sync {MMA_KINDS[kind][0]} unaligned {width}-byte",))


# Few 64 x 64 output tiles over a long K, which the DMMA kernel splits into slices of K (bmm/mma.cu,
# cheapest_split): up to 8 slices, the last one partial (K = 2001), over 8-byte copies (odd K) too.
F64_SPLIT_SHAPES = [(1, 200, 300, 8192), (3, 70, 130, 2001), (2, 64, 64, 512)]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", F64_SPLIT_SHAPES, ids=["x".join(map(str, s)) for s in F64_SPLIT_SHAPES])
def test_mma_f64_split_k(shape, layouts):
    mma_expected()
    batch, m, n, k = shape
    a = mma_operand(layouts[0], batch, m, k, torch.float64)
    b = mma_operand(layouts[1], batch, k, n, torch.float64)
    check_mma_kind((torch.float64, "highest"), a, b)
    x, y = unaligned_operand(layouts[0], batch, m, k, torch.float64), unaligned_operand("row", batch, k, n, torch.float64)
    check_mma_kind((torch.float64, "highest"), x, y)


@requires_cuda
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_mma_copy_width_is_the_narrower_operands(dtype):
    # one aligned operand and one 4-byte-aligned one copy 4 bytes; a 2-byte-aligned one, through registers
    mma_expected()
    name = MMA_KINDS[(dtype, "highest")][0]
    a = make_tensor((2, 150, 96), dtype, "cuda")
    b4, b2 = (unaligned_operand("row", 2, 96, 200, dtype, step) for step in (2, 1))
    assert torch.ops.tiles._bmm_path(a, b4) == f"mma-sync {name} unaligned 4-byte"
    assert torch.ops.tiles._bmm_path(b4.mT, b2) == f"mma-sync {name} unaligned"
    for x, y in ((a, b4), (b4.mT, b2)):
        assert_bmm_close(poisoned_bmm(x, y), x, y)


@requires_cuda
def test_choice_between_mma_and_split_k():
    # Few output tiles over a long K: the mma kernel splits K itself (the DMMA one for float64), unless
    # thin (at most 4 columns or rows: the thin kernel's split-K); many tiles are not split.
    mma_expected()
    few = (make_tensor((1, 92, 1858), torch.bfloat16, "cuda"), make_tensor((1, 1858, 24), torch.bfloat16, "cuda"))
    assert torch.ops.tiles._bmm_path(*few) == "mma-sync bf16 unaligned 4-byte split-k"
    assert mma_splits_k(*few)
    assert_bmm_close(poisoned_bmm(*few), *few)
    few64 = tuple(t.double() for t in few)
    assert torch.ops.tiles._bmm_path(*few64) == "mma-sync f64 split-k"
    assert_bmm_close(poisoned_bmm(*few64), *few64)
    # a K of 256 to 511: one slice of 8 k-tiles at most, so the general kernel's split-K
    mid = (make_tensor((1, 92, 402), torch.bfloat16, "cuda"), make_tensor((1, 402, 24), torch.bfloat16, "cuda"))
    assert general_split_k(*mid) and torch.ops.tiles._bmm_path(*mid) == SPLIT_K
    assert_bmm_close(poisoned_bmm(*mid), *mid)
    dtype = torch.bfloat16
    vector = (make_tensor((5, 254, 3985), dtype, "cuda"), make_tensor((5, 3985, 1), dtype, "cuda"))
    head = (make_tensor((1, 512, 96), dtype, "cuda"), make_tensor((1, 96, 2003), dtype, "cuda"))  # odd N
    f64 = (make_tensor((1, 512, 97), torch.float64, "cuda"), make_tensor((1, 97, 256), torch.float64, "cuda"))
    assert torch.ops.tiles._bmm_path(*vector) == "thin few-columns"
    assert torch.ops.tiles._bmm_path(*head) == "mma-sync bf16 unaligned"
    assert torch.ops.tiles._bmm_path(*f64) == "mma-sync f64 unaligned 8-byte"
    for a, b in (vector, head, f64):
        assert_bmm_close(poisoned_bmm(a, b), a, b)
    no_unit_stride = make_tensor((1, 512, 96), torch.float64, "cuda", "sliced")
    with pytest.raises(RuntimeError, match="the mma path cannot take these operands: a has no unit-stride"):
        torch.ops.tiles._bmm_on_path(no_unit_stride, f64[1][:, :96], "mma")


@requires_cuda
@pytest.mark.parametrize("kind", [(torch.float32, "high"), (torch.float64, "highest")], ids=["tf32", "f64"])
def test_mma_whole_k_walks_k_unsplit(kind):
    # The whole-k paths are the other side of the split rule: the same sums in another order, so in
    # float32 / float64 outputs (no rounding to 16 bits to hide it) bits differ from the split run's.
    mma_expected()
    dtype, precision = kind
    a, b = make_tensor((2, 70, 3000), dtype, "cuda"), make_tensor((2, 3000, 40), dtype, "cuda")
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        assert mma_splits_k(a, b, "64x64")
        split, whole = (poisoned_on_path(a, b, name) for name in ("mma-64", "mma-64 whole-k"))
    finally:
        torch.set_float32_matmul_precision(old)
    assert not torch.equal(split, whole)
    for out in (split, whole):
        assert_bmm_close(out, a, b, MMA_KINDS[kind][1])


@requires_cuda
@pytest.mark.parametrize("a_layout", ["row", "col"])
def test_f64_tail_split_splits_only_the_rows_past_whole_waves(a_layout):
    # A float64 product a little over whole waves of 64 x 64 blocks (three an SM): its last tile row,
    # ragged here, split over K, the rows above it walked whole. Those must be the whole-k walk's bits
    # (the same blocks, a's rows from the same place), the tail close to float64 in its own order.
    mma_expected()
    n, k = 2304, 2048
    rows = 3 * sm_count() // (n // 64)  # tile rows in one wave
    m = 64 * (rows + 1) - 5
    a, b = mma_operand(a_layout, 1, m, k, torch.float64), make_tensor((1, k, n), torch.float64, "cuda")
    assert mma_split_name(a, b) == " tail-split-k"
    assert torch.ops.tiles._bmm_path(a, b) == "mma-sync f64 tail-split-k"
    out, whole = poisoned_bmm(a, b), poisoned_on_path(a, b, "mma-64 whole-k")
    assert_bmm_close(out, a, b)
    assert torch.equal(out[:, : 64 * rows], whole[:, : 64 * rows])
    assert not torch.equal(out[:, 64 * rows :], whole[:, 64 * rows :])
    # a batch of two, or one whole wave, is not split
    assert mma_split_name(a.expand(2, -1, -1), b) != " tail-split-k"
    assert mma_split_name(a[:, : 64 * rows], b) == ""


# ---- the Hopper float32 kernel ---------------------------------------------------------------------
FLOAT32_KINDS = {"highest": ("3xtf32", None), "high": ("tf32", Tol(rtol=2e-3, atol=1e-5))}


def hopper_float32_expected():
    """Whether this GPU and build should run the Hopper TF32 kernel; skips (with why) where not."""
    hopper_expected()
    probe = torch.ones(1024, 1024, device="cuda")  # not small: 2^30 multiply-adds, 2^20 outputs
    path = torch.ops.tiles._bmm_path(probe, probe)
    assert path.startswith("hopper-wgmma"), path
    return True


def tf32_operands(layouts, shape):
    batch, m, n, k = shape
    return (mma_operand(layouts[0], batch, m, k, torch.float32),
            mma_operand(layouts[1], batch, k, n, torch.float32))


@pytest.fixture
def float32_precision(request):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(request.param)
    yield FLOAT32_KINDS[request.param]
    torch.set_float32_matmul_precision(old)


# more than one tile per block, K tails of 8 and 24, single rows and columns; on 132 SMs SHAPES' 700 x 1288
# and 300 x 1290 take 192-wide TF32 tiles (700 x 1288 with the roles swapped 256-wide)
TF32_SHAPES = SHAPES + [(2, 1, 1, 1), (3, 17, 9, 5), (2, 640, 1288, 264)]


@requires_cuda
@pytest.mark.parametrize("float32_precision", FLOAT32_KINDS.keys(), indirect=True)
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", TF32_SHAPES, ids=["x".join(map(str, s)) for s in TF32_SHAPES])
def test_hopper_float32_path(float32_precision, shape, layouts):
    # every layout, "col"-"row" included: a M-major times b N-major has no K-major operand, and the
    # kernel transposes b's tiles in shared memory
    hopper_float32_expected()
    name, tol = float32_precision
    a, b = tf32_operands(layouts, shape)
    # K of 16 k-blocks or more may split (two slices of at least 8; bmm/split_k.cuh)
    paths = [f"hopper-wgmma {name}"] + ([f"hopper-wgmma {name} split-k"] if shape[3] > 15 * 32 else [])
    assert torch.ops.tiles._bmm_path(a, b) in [float32_path(a, b, p) for p in paths]
    assert_bmm_close(poisoned_bmm(a, b), a, b, tol)
    assert_bmm_close(poisoned_on_path(a, b, "hopper"), a, b, tol)


# Few output tiles over a long K: the Hopper float32 kernel splits K (up to 8 slices, each tile's partials
# summed in order, the last slice with a K tail); N = 390 takes the direct stores, 384 the TMA stores.
# On 132 SMs, in TF32, 960 x 1080 takes 256-wide tiles split three ways and 840 x 832 192-wide ones split
# three ways (both 128-wide under 3xTF32), checked by test_hopper_float32_split_k_tile.
SPLIT_K_SHAPES = [(1, 256, 384, 4100), (2, 130, 390, 2050), (1, 960, 1080, 3076), (1, 840, 832, 2052)]
SPLIT_K_TILES = {(1, 960, 1080, 3076): "128x256", (1, 840, 832, 2052): "128x192"}


@requires_cuda
@pytest.mark.parametrize("float32_precision", FLOAT32_KINDS.keys(), indirect=True)
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
@pytest.mark.parametrize("shape", SPLIT_K_SHAPES, ids=["x".join(map(str, s)) for s in SPLIT_K_SHAPES])
def test_hopper_float32_split_k(float32_precision, shape, layouts):
    hopper_float32_expected()
    name, tol = float32_precision
    a, b = tf32_operands(layouts, shape)
    if sm_count() == 132:  # where the split counts were worked out; "highest" sends small products to general
        assert torch.ops.tiles._bmm_path(a, b) == float32_path(a, b, f"hopper-wgmma {name} split-k")
    out = poisoned_on_path(a, b, "hopper")
    assert_bmm_close(out, a, b, tol)
    assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, "hopper"))  # the same bits every run


def float32_tile(a, b, tile):
    """`tile` (the kernel's R rows x Q rows) as _bmm_tile names it for a and b, rows x columns of the
    output: transposed where a K-major a times an N-major b swaps the roles (bmm/hopper_tf32.cu `roles`)."""
    swapped = a.stride(-1) == 1 and b.stride(-1) == 1 and b.stride(-2) != 1
    return "x".join(tile.split("x")[::-1]) if swapped else tile


# TF32's tile width and K split are costed together (bmm/hopper_tf32.cu `plan`), worked out for 132 SMs:
# a weight gradient's 1024 x 4096 over K = 8192 fills one wave with 128 tiles of 256 columns (as 128-wide
# tiles: 256 of them, a second wave), 4096^3 takes 256-wide tiles, 2048 x 3072 over K = 768 192-wide ones
# (256 tiles in two waves, as many as 192 tiles of 256 columns take), and a 256 x 384 output over K = 2100
# 128-wide ones, split eight ways. 3xTF32 has only 128-wide tiles. (shape, tile, whether K is split, the
# tile NT takes: 2048 x 3072 over K = 768 models 24% faster on ping-pong consumers' 128 x 128 tiles, the
# two square products 10-14% slower, and the split one stays split)
TF32_TILES = [((1, 1024, 4096, 8192), "128x256", False, "128x256"),
              ((1, 4096, 4096, 4096), "128x256", False, "128x256"),
              ((1, 2048, 3072, 768), "128x192", False, "128x128 ping-pong"),
              ((1, 256, 384, 2100), "128x128", True, "128x128")]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS[:4], ids=["-".join(l) for l in LAYOUTS[:4]])
def test_hopper_float32_tile_width(layouts):
    hopper_float32_expected()
    for shape, tile, split, nt_tile in TF32_TILES:
        a, b = tf32_operands(layouts, shape)
        if layouts == ("row", "col"):
            tile = nt_tile
        torch.set_float32_matmul_precision("highest")
        if not small_float32(a, b):  # 3xTF32: 128-wide tiles on any GPU
            assert torch.ops.tiles._bmm_path(a, b).startswith("hopper-wgmma 3xtf32")
            assert torch.ops.tiles._bmm_tile(a, b) == "128x128"
        torch.set_float32_matmul_precision("high")
        path = torch.ops.tiles._bmm_path(a, b)
        assert path.startswith("hopper-wgmma tf32"), path
        if sm_count() == 132:
            assert path == "hopper-wgmma tf32" + (" split-k" if split else ""), (shape, path)
            assert torch.ops.tiles._bmm_tile(a, b) == float32_tile(a, b, tile), shape
    if sm_count() != 132:
        pytest.skip("the TF32 widths and splits were worked out for 132 SMs (3xTF32's tiles were checked)")


# The TF32 tile width forced by name ("hopper-<width>" on float32 operands; for timing the widths against
# each other): every width in every layout, over edge tiles both ways (300 x 520), Q of at most 64 rows on
# wider tiles (520 x 40), and few tiles over a long K, which the plan splits at any width. Where the plan
# picks the same width, the same bits. 3xTF32 has 128-wide tiles only.
FORCED_TF32_SHAPES = [(2, 300, 520, 264), (3, 520, 40, 136), (1, 256, 384, 4100)]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
def test_hopper_float32_tile_width_by_name(layouts):
    hopper_float32_expected()
    torch.set_float32_matmul_precision("high")
    for shape in FORCED_TF32_SHAPES:
        a, b = tf32_operands(layouts, shape)
        planned = torch.ops.tiles._bmm_on_path(a, b, "hopper")
        for width in (64, 128, 192, 256):
            path = f"hopper-{width}"
            out = poisoned_on_path(a, b, path)
            assert_bmm_close(out, a, b, FLOAT32_KINDS["high"][1], msg=f"{path} {shape}")
            if torch.ops.tiles._bmm_tile(a, b) == float32_tile(a, b, f"128x{width}"):
                assert torch.equal(out, planned), (path, shape)
    torch.set_float32_matmul_precision("highest")
    a, b = tf32_operands(layouts, FORCED_TF32_SHAPES[0])
    assert_bmm_close(poisoned_on_path(a, b, "hopper-128"), a, b)
    forced, planned = (torch.ops.tiles._bmm_on_path(a, b, p) for p in ("hopper-128", "hopper"))
    assert torch.equal(forced, planned)
    for width in (64, 192, 256):
        with pytest.raises(RuntimeError, match=f"3xTF32 .* has 128-wide tiles only; got {width}"):
            torch.ops.tiles._bmm_on_path(a, b, f"hopper-{width}")


# Ping-pong consumers by name ("hopper-128 ping-pong": each consumer warpgroup a 128 x 128 tile of its own,
# the two in turn; NT only): the same wgmma shapes in the same k order as "hopper-128", so
# the same bits. 8 x 1024 x 1024 is 512 tiles, 3-4 a block on up to 132 SMs (the consumers hand the tensor
# cores over and skip each other's stages), at K of 1, 3, 5, 6, 7 and 13 k-blocks (around the 6-stage ring);
# 8 x 1000 x 1025 the same with an N that TMA's stores cannot take (the direct stores); then edge tiles (300
# x 520), few tiles over a long K (split) and a batch-broadcast a, one tile a block.
PING_PONG_SHAPES = [(8, 1024, 1024, k) for k in (32, 96, 160, 192, 224, 416)] + [
    (8, 1000, 1025, 224), (2, 300, 520, 264), (1, 256, 384, 4100)]


@requires_cuda
def test_hopper_float32_ping_pong_by_name():
    hopper_float32_expected()
    assert 8 * 8 * 8 > 2 * sm_count(), "the multi-tile shapes give each block's consumers a tile or more each"

    torch.set_float32_matmul_precision("high")
    for shape in PING_PONG_SHAPES:
        a, b = tf32_operands(("row", "col"), shape)
        for lhs in (a, a[0]) if shape[0] > 1 else (a,):
            out = poisoned_on_path(lhs, b, "hopper-128 ping-pong")
            assert_bmm_close(out, lhs, b, FLOAT32_KINDS["high"][1], msg=f"ping-pong {shape}")
            assert torch.equal(out, torch.ops.tiles._bmm_on_path(lhs, b, "hopper-128")), shape
    a, b = tf32_operands(("row", "row"), PING_PONG_SHAPES[0])  # b N-major: not NT
    with pytest.raises(RuntimeError, match="'hopper-128 ping-pong' takes float32 at precision 'high' or 'medium'"):
        torch.ops.tiles._bmm_on_path(a, b, "hopper-128 ping-pong")
    torch.set_float32_matmul_precision("highest")
    a, b = tf32_operands(("row", "col"), PING_PONG_SHAPES[0])
    with pytest.raises(RuntimeError, match="'hopper-128 ping-pong' takes float32"):
        torch.ops.tiles._bmm_on_path(a, b, "hopper-128 ping-pong")
    x = make_tensor((2, 64, 64), torch.bfloat16, "cuda")
    with pytest.raises(RuntimeError, match="'hopper-128 ping-pong' is the float32 kernel's"):
        torch.ops.tiles._bmm_on_path(x, x, "hopper-128 ping-pong")


# bmm takes the ping-pong consumers for TF32 NT products over at least 24 k-blocks of 32 (K > 736) where
# they model 5% faster than the best unsplit cooperative tile, or 15% faster than a split one
# (bmm/hopper_tf32.cu `plan`; on 132 SMs): the profiler shows the ping-pong instance launched (its bits
# are those of "hopper-128", so only the kernel's name tells the two apart), over 384 tiles (three a
# block), 216 (one or two a block, one consumer idle in some), a batch-broadcast a too, and 128 tiles
# over K = 4096 and 96 over K = 3072 (2048 x 1024 and 2048 x 768, which the cooperative plan splits:
# ping-pong models 0.76x and 0.83x of it). A K of 23 k-blocks, the other layouts, and 3xTF32 keep the
# cooperative tiles, and so do SPLIT_K_TILES' split products (ping-pong models 0.91x of them;
# test_hopper_float32_split_k_tile): 0.83x and 0.91x pin the 0.85 cut from both sides.
def launched_tf32_ping_pong(kernels):
    """Whether the TF32 Hopper kernel with ping-pong consumers (its last template argument, kPingPong) is
    among the profiler's kernel names, demangled (`<1, 128, true, ...>`) or not (`ILi1ELi128ELb1E...`); a
    cooperative instance must be there otherwise."""
    last = []
    for name in kernels:
        if m := re.search(r"hopper_tf32_kernel<([^>]*)>", name):
            last.append(m.group(1).split(",")[-1].strip() in ("true", "1"))
        elif m := re.search(r"hopper_tf32_kernelI((?:L[a-z]+\d+E)+)", name):
            last.append(re.findall(r"L[a-z]+(\d+)E", m.group(1))[-1] == "1")
    assert last, kernels
    return any(last)


@requires_cuda
def test_bmm_picks_ping_pong_for_long_nt_products():
    hopper_float32_expected()
    if sm_count() != 132:
        pytest.skip("the ping-pong rule's shapes were worked out for 132 SMs")
    torch.set_float32_matmul_precision("high")
    for shape in [(1, 2048, 3072, 768), (3, 1000, 1100, 1000), (1, 2048, 1024, 4096), (1, 2048, 768, 3072)]:
        a, b = tf32_operands(("row", "col"), shape)
        for lhs in (a, a[0]) if shape[0] > 1 else (a,):
            assert torch.ops.tiles._bmm_path(lhs, b) == "hopper-wgmma tf32", shape
            assert torch.ops.tiles._bmm_tile(lhs, b) == "128x128 ping-pong", shape
            assert launched_tf32_ping_pong(cuda_kernel_names(lambda: torch.ops.tiles.bmm(lhs, b))), shape
            out = poisoned_on_path(lhs, b, "hopper")
            assert_bmm_close(out, lhs, b, FLOAT32_KINDS["high"][1], msg=f"ping-pong picked {shape}")
            assert torch.equal(out, torch.ops.tiles._bmm_on_path(lhs, b, "hopper-128 ping-pong")), shape
            assert torch.equal(out, torch.ops.tiles._bmm_on_path(lhs, b, "hopper-128")), shape
    a, b = tf32_operands(("row", "col"), (1, 2048, 3072, 736))  # 23 k-blocks
    assert torch.ops.tiles._bmm_tile(a, b) == "128x192"
    assert not launched_tf32_ping_pong(cuda_kernel_names(lambda: torch.ops.tiles.bmm(a, b)))
    for layouts in [("row", "row"), ("col", "row"), ("col", "col")]:
        a, b = tf32_operands(layouts, (1, 2048, 3072, 768))
        assert "ping-pong" not in torch.ops.tiles._bmm_tile(a, b), layouts
    torch.set_float32_matmul_precision("highest")
    a, b = tf32_operands(("row", "col"), (1, 2048, 3072, 768))
    assert torch.ops.tiles._bmm_tile(a, b) == "128x128"


# 3xTF32 has 128 x 128 tiles only: over outputs of at most 64 x 64 (many small matrices, too much work for
# the general kernel) three quarters of each tile is padding, so bmm takes the mma.sync kernel's 64 x 64
# tiles there (bmm/hopper_tf32.cu `prefers`); TF32, with 64-wide tiles, and a wider output keep the Hopper
# kernel.
@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS[:4], ids=["-".join(l) for l in LAYOUTS[:4]])
def test_3xtf32_small_outputs_take_mma_sync(layouts):
    hopper_float32_expected()
    torch.set_float32_matmul_precision("highest")
    small = tf32_operands(layouts, (512, 64, 64, 64))  # 2^27 multiply-adds, 2^21 outputs
    wider = tf32_operands(layouts, (96, 512, 64, 512))
    edges = (tf32_operands(layouts, (512, 65, 64, 64)), tf32_operands(layouts, (512, 64, 65, 64)))
    assert all(small_float32(*ops) is None for ops in (small, wider) + edges)
    assert torch.ops.tiles._bmm_path(*small) == "mma-sync 3xtf32"
    for ops in (wider,) + edges:
        assert torch.ops.tiles._bmm_path(*ops).startswith("hopper-wgmma 3xtf32")
    for a, b in (small, wider):
        assert_bmm_close(poisoned_bmm(a, b), a, b)
    torch.set_float32_matmul_precision("high")
    assert torch.ops.tiles._bmm_path(*small).startswith("hopper-wgmma tf32")
    assert_bmm_close(poisoned_bmm(*small), *small, FLOAT32_KINDS["high"][1])


# Q of at most 64 rows (attention's N = 64 products with a transposed operand) takes 64-wide TF32 tiles
# (bmm/hopper_tf32.cu plan): Q is b in every layout but a K-major a times an N-major b, whose roles swap
# (Q is a: of 300-520 rows in the first three shapes, 48 in the last, whose tile is then 64 x 128 and
# whose N = 520 keeps wider tiles elsewhere). 20 x 300 x 64 walks 60 tiles of 64; N = 40 leaves the
# tile's last 24 rows of Q past N; K = 8192 over two tiles is costed for a split. 3xTF32 keeps its
# 128-wide tiles.
NARROW_Q_SHAPES = [(20, 300, 64, 200), (3, 520, 40, 136), (1, 256, 64, 8192), (8, 48, 520, 200)]


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
def test_hopper_float32_narrow_q(layouts):
    hopper_float32_expected()
    for shape in NARROW_Q_SHAPES:
        a, b = tf32_operands(layouts, shape)
        torch.set_float32_matmul_precision("highest")
        if not small_float32(a, b):
            assert torch.ops.tiles._bmm_tile(a, b) == "128x128", shape
        torch.set_float32_matmul_precision("high")
        assert torch.ops.tiles._bmm_path(a, b).startswith("hopper-wgmma tf32"), shape
        swapped = float32_tile(a, b, "1x2") == "2x1"
        q_rows = shape[1] if swapped else shape[2]
        tile = torch.ops.tiles._bmm_tile(a, b)
        if q_rows <= 64:
            assert tile == float32_tile(a, b, "128x64"), (shape, tile)
        else:
            assert "64" not in tile, (shape, tile)
        out = poisoned_on_path(a, b, "hopper")
        assert_bmm_close(out, a, b, FLOAT32_KINDS["high"][1])
        assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, "hopper"))  # split-K sums in one order


@requires_cuda
@pytest.mark.parametrize("layouts", LAYOUTS, ids=["-".join(l) for l in LAYOUTS])
def test_hopper_float32_split_k_tile(layouts):
    # SPLIT_K_SHAPES covers 256- and 192-wide tiles with split K in TF32
    hopper_float32_expected()
    if sm_count() != 132:
        pytest.skip("the TF32 widths and splits were worked out for 132 SMs")
    torch.set_float32_matmul_precision("high")
    for shape, tile in SPLIT_K_TILES.items():
        a, b = tf32_operands(layouts, shape)
        assert torch.ops.tiles._bmm_path(a, b) == "hopper-wgmma tf32 split-k", shape
        assert torch.ops.tiles._bmm_tile(a, b) == float32_tile(a, b, tile), shape


def float32_path(a, b, tensor_cores):
    """The path bmm takes for float32 operands: thin, else small, else `tensor_cores` (not for the short-K
    products bmm sends to the mma kernel: its callers' K are over 16)."""
    assert not short_k_on_mma(a, b)
    return thin_path(a, b) or small_float32(a, b) or tensor_cores


@requires_cuda
@pytest.mark.parametrize("float32_precision", FLOAT32_KINDS.keys(), indirect=True)
def test_hopper_float32_path_batch_broadcast(float32_precision):
    hopper_float32_expected()
    name, tol = float32_precision
    a2 = make_tensor((150, 96), torch.float32, "cuda")
    b3 = make_tensor((3, 96, 200), torch.float32, "cuda")
    a1 = make_tensor((1, 150, 96), torch.float32, "cuda")
    b2 = make_tensor((200, 96), torch.float32, "cuda").t()
    a3t = make_tensor((4, 96, 152), torch.float32, "cuda")[:, :, :150].mT
    b2_row = make_tensor((96, 200), torch.float32, "cuda")
    # the last two: no K-major operand, b broadcast
    for a, b in [(a2, b3), (a1, b3), (make_tensor((4, 150, 96), torch.float32, "cuda"), b2), (a2, b2), (a3t, b2),
                 (a3t, b2_row), (a3t, b3[:1])]:
        assert torch.ops.tiles._bmm_path(a, b) == float32_path(a, b, f"hopper-wgmma {name}")
        assert_bmm_close(poisoned_bmm(a, b), a, b, tol)
        assert_bmm_close(poisoned_on_path(a, b, "hopper"), a, b, tol)


# Operands TMA cannot address (a stride or base not 16-byte aligned), which the Hopper float32 kernel's
# producer warps copy 4 bytes at a time: partial tiles with K tails, K past the stage ring, one row or
# column, K of one, and few tiles over a long K ((b, m, n, k) = (1, 256, 384, 2100) splits on 132 SMs).
COPIED_SHAPES = [(2, 129, 257, 72), (1, 1, 40, 65), (2, 200, 1, 137), (3, 37, 130, 1), (1, 300, 523, 1001),
                 (2, 640, 1288, 264), (1, 256, 384, 2100)]
# Which operand is unaligned: "row" / "col" / "col-sliced" unaligned, "aligned-row" / "aligned-col" not.
COPIED_LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"), ("col-sliced", "row"),
                  ("aligned-row", "row"), ("row", "aligned-row"), ("aligned-col", "row"), ("col", "aligned-row"),
                  ("aligned-row", "col"), ("col", "aligned-col"), ("row", "aligned-col")]


def copied_operand(layout, batch, rows, cols):
    if layout.startswith("aligned-"):
        return mma_operand(layout[len("aligned-"):], batch, rows, cols, torch.float32)
    return unaligned_operand(layout, batch, rows, cols, torch.float32)


def check_copied(a, b, name, tol):
    """bmm's path for a and b (thin, small, the Hopper kernel with copies where bmm prefers them, else the
    mma kernel or general's split-K), and the Hopper kernel's result on them against float64, the same
    bits on a second run."""
    path = torch.ops.tiles._bmm_path(a, b)
    expected = float32_path(a, b, None)
    if expected:
        assert path == expected, path
    elif copies_preferred(a, b, torch.get_float32_matmul_precision()):
        assert path.startswith(f"hopper-wgmma {name} copied"), path
    else:
        assert path.startswith(f"mma-sync {name} unaligned") or (path == SPLIT_K and general_split_k(a, b)), path
    out = poisoned_on_path(a, b, "hopper")
    assert_bmm_close(out, a, b, tol)
    assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, "hopper"))


@requires_cuda
@pytest.mark.parametrize("float32_precision", FLOAT32_KINDS.keys(), indirect=True)
@pytest.mark.parametrize("layouts", COPIED_LAYOUTS, ids=["-".join(l) for l in COPIED_LAYOUTS])
@pytest.mark.parametrize("shape", COPIED_SHAPES, ids=["x".join(map(str, s)) for s in COPIED_SHAPES])
def test_hopper_float32_copied_operands(float32_precision, shape, layouts):
    # every role: R or Q copied, or both; an MN-major Q copied (transposed as it is copied) and taken
    # along with a copied R; 3xTF32's small part of copied Q rows; zeros past the edges and past K; a copied
    # K-major R beside a TMA-loaded Q ("row"-"aligned-col": under TF32 wgmma reads the copies from shared
    # memory, after the copiers' proxy fence)
    hopper_float32_expected()
    name, tol = float32_precision
    batch, m, n, k = shape
    check_copied(copied_operand(layouts[0], batch, m, k), copied_operand(layouts[1], batch, k, n), name, tol)


@requires_cuda
@pytest.mark.parametrize("float32_precision", FLOAT32_KINDS.keys(), indirect=True)
def test_hopper_float32_copied_broadcast_and_language_model_head(float32_precision):
    # an operand broadcast over the batch (2-D, or a batch of one) beside a copied one; a language-model
    # head over an odd vocabulary (V = 2003): x @ W (W's rows unaligned: R = W^T copied), g @ W^T (both
    # copied, K = V), x^T @ g (g copied as an MN-major Q, transposed as it is copied), W^T @ x^T (a
    # copied MN-major R beside a K-major Q)
    hopper_float32_expected()
    name, tol = float32_precision
    b3 = unaligned_operand("row", 3, 96, 600, torch.float32)
    a2 = unaligned_operand("col", 1, 450, 96, torch.float32)[0]
    x, w = make_tensor((512, 96), torch.float32, "cuda"), make_tensor((96, 2003), torch.float32, "cuda")
    g = make_tensor((512, 2003), torch.float32, "cuda")
    for a, b in [(a2, b3), (make_tensor((450, 96), torch.float32, "cuda"), b3), (a2, b3[:1]), (x, w), (g, w.t()),
                 (x.t(), g), (w.t(), x.t())]:
        check_copied(a, b, name, tol)
        assert_bmm_close(poisoned_bmm(a, b), a, b, tol)


# bmm's choice for operands TMA cannot address (bmm/hopper_tf32.cu `prefers`): the Hopper kernel's copies
# for 2^30 flops or more over an output of at least 128 rows and columns (3xTF32: an M-major a times an
# N-major b only); under TF32 also one operand copied over a K of LONG_K_TF32_COPIES or more (bmm.cu
# long_k_tf32_on_hopper_copies); else the mma kernel. (layouts, (batch, m, n, k), whether the size alone
# qualifies, or "long-k": under TF32 for its K alone): just over 2^30 flops, just under, an output 120 rows
# tall over K = 1000 and over K = 1100 (one operand copied; both; a copied M-major a taking the aligned
# N-major b with it, copied_roles), and few tiles over K = 8000, which
# the copying kernel splits (on 132 SMs): six (at full precision a small product, SMALL_FLOAT32_OUTPUTS,
# which the general kernel takes first) and 32.
COPIES_DISPATCH = [(("row", "row"), (1, 1024, 1031, 520), True), (("col", "row"), (1, 1024, 1031, 520), True),
                   (("row", "col"), (1, 1024, 1031, 520), True), (("col", "row"), (1, 1024, 1031, 500), False),
                   (("aligned-row", "row"), (2, 120, 4099, 1000), False),
                   (("aligned-row", "row"), (2, 120, 4099, 1100), "long-k"), (("col", "row"), (2, 120, 4099, 1100), False),
                   (("col", "aligned-row"), (2, 120, 4099, 1100), False),
                   (("row", "row"), (1, 256, 384, 8000), True),
                   (("col", "row"), (1, 256, 384, 8000), True), (("col", "row"), (1, 512, 1024, 8000), True)]


@requires_cuda
@pytest.mark.parametrize("float32_precision", FLOAT32_KINDS.keys(), indirect=True)
@pytest.mark.parametrize("case", COPIES_DISPATCH, ids=["-".join(c[0]) + "-" + "x".join(map(str, c[1])) for c in COPIES_DISPATCH])
def test_hopper_float32_copies_dispatch(float32_precision, case):
    hopper_float32_expected()
    name, tol = float32_precision
    layouts, (batch, m, n, k), large = case
    a, b = copied_operand(layouts[0], batch, m, k), copied_operand(layouts[1], batch, k, n)
    transposing = layouts == ("col", "row")
    preferred = (large is True and (name == "tf32" or transposing)) or (large == "long-k" and name == "tf32")
    assert copies_preferred(a, b, torch.get_float32_matmul_precision()) == preferred
    check_copied(a, b, name, tol)  # bmm's path, thin or small first
    if preferred and k >= 8000 and sm_count() == 132 and not float32_path(a, b, None):  # K split, as bmm runs it
        assert torch.ops.tiles._bmm_path(a, b) == f"hopper-wgmma {name} copied split-k"



@requires_cuda
def test_tf32_long_k_copies_read_an_operand_expanded_along_a_matrix_dim():
    # Under TF32 a K of LONG_K_TF32_COPIES or more sends a product with one copied operand to the Hopper
    # kernel's copies (bmm.cu long_k_tf32_on_hopper_copies), an operand with stride 0 along M included:
    # TMA cannot address it, and the copiers must read its one row for every row of the tile.
    hopper_float32_expected()
    batch, m, n, k = 2, 120, 4099, 1100
    a = make_tensor((batch, 1, k), torch.float32, "cuda").expand(batch, m, k)
    b = make_tensor((batch, k, 4104), torch.float32, "cuda")[:, :, :n]  # 16-byte rows: TMA's
    torch.set_float32_matmul_precision("high")
    assert copied_operands(a, b, False) == 1 and copies_preferred(a, b, "high")
    assert torch.ops.tiles._bmm_path(a, b).startswith("hopper-wgmma tf32 copied")
    assert_bmm_close(poisoned_bmm(a, b), a, b, FLOAT32_KINDS["high"][1])

def float32_paths():
    """The kernels that compute float32 on this GPU, as _bmm_on_path names them."""
    mma_expected()
    probe = torch.ones(1024, 1024, device="cuda")  # not small: 2^30 multiply-adds, 2^20 outputs
    return ["mma"] + (["hopper"] if torch.ops.tiles._bmm_path(probe, probe).startswith("hopper") else [])


@requires_cuda
def test_3xtf32_is_as_accurate_as_cublas_sgemm():
    # float32 under "highest" must be float32-accurate: relative error against float64 no worse than
    # cuBLAS SGEMM's on the same inputs (with 10% slack for the different summation order), on every
    # kernel that runs 3xTF32. Row-major b takes the Hopper kernel's swapped roles, b.mT the direct ones,
    # a.mT with a row-major b the transposed b tiles.
    a = torch.randn(4, 512, 2048, device="cuda")
    b = torch.randn(4, 2048, 384, device="cuda")
    ref = torch.bmm(a.double(), b.double())
    cublas = (torch.bmm(a, b).double() - ref).norm() / ref.norm()
    at, bt = a.mT.contiguous().mT, b.mT.contiguous().mT
    for path in float32_paths():
        for a_, b_ in ((a, b), (a, bt), (at, b)):
            ours = (torch.ops.tiles._bmm_on_path(a_, b_, path).double() - ref).norm() / ref.norm()
            assert ours <= 1.1 * cublas, (path, ours.item(), cublas.item())


@requires_cuda
def test_on_path_refuses_what_a_path_cannot_take():
    a = make_tensor((2, 33, 17), torch.float32, "cuda", "sliced")  # no unit-stride dim
    b = make_tensor((2, 17, 40), torch.float32, "cuda")
    with pytest.raises(RuntimeError, match="_bmm_on_path: the mma path cannot take these operands: a has no unit"):
        torch.ops.tiles._bmm_on_path(a, b, "mma")
    with pytest.raises(RuntimeError, match="_bmm_on_path: the hopper path cannot take"):
        torch.ops.tiles._bmm_on_path(a, b, "hopper")
    with pytest.raises(RuntimeError, match="_bmm_on_path: the thin path cannot take these operands: K is over 16"):
        torch.ops.tiles._bmm_on_path(a, b, "thin")
    five_columns = make_tensor((2, 300, 23), torch.float32, "cuda"), make_tensor((2, 23, 5), torch.float32, "cuda")
    with pytest.raises(RuntimeError, match="the thin path cannot take these operands"):  # over 4 columns, K < 64
        torch.ops.tiles._bmm_on_path(*five_columns, "thin")
    for bad in ("fast", "general-16"):
        with pytest.raises(RuntimeError, match=f"path must be one of 'hopper', .*'thin split-k'.*; got '{bad}'"):
            torch.ops.tiles._bmm_on_path(a, b, bad)
    assert_bmm_close(torch.ops.tiles._bmm_on_path(a, b, "general"), a, b)


@requires_cuda
def test_paths_agree():
    # the same product through both kernels: equal up to the order of float32 accumulation
    hopper_expected()
    a = make_tensor((2, 100, 200), torch.bfloat16, "cuda")
    b = make_tensor((2, 200, 96), torch.bfloat16, "cuda")
    a_odd = torch.empty(2, 100, 201, dtype=a.dtype, device="cuda")[:, :, :200]  # row stride 201
    a_odd.copy_(a)
    assert torch.ops.tiles._bmm_path(a, b) == HOPPER
    assert torch.ops.tiles._bmm_path(a_odd, b) == "mma-sync bf16 unaligned"
    fast, other = torch.ops.tiles.bmm(a, b).float(), torch.ops.tiles.bmm(a_odd, b).float()
    torch.testing.assert_close(fast, other, rtol=1e-2, atol=1e-2)


def test_bmm_path_on_cpu_names_cpu():
    a = torch.ones(2, 3, 4)
    assert torch.ops.tiles._bmm_path(a, torch.ones(2, 4, 5)) == "cpu"


# The general kernel splits long K over several blocks when the output has few tiles (split-K): one
# tile, a few, a batch, K not a multiple of the split or of the k-slab, a broadcast operand, transposed
# operands, every dtype; and run to run the same bits (the splits are summed in a fixed order). On an
# H100 (132 SMs) the first five cases have 2 to 8 splits, summed in a thread block cluster, and the
# others 12 to 64, summed by a second kernel.
SPLIT_K_CASES = [(1, 64, 10, 256), (1, 33, 17, 512), (2, 100, 70, 200), (1, 64, 64, 448), (4, 65, 3, 320),
                 (5, 254, 1, 3985), (1, 92, 4, 1858), (3, 70, 33, 1000), (1, 1, 1, 4097), (2, 130, 65, 777)]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", SPLIT_K_CASES, ids=["x".join(map(str, c)) for c in SPLIT_K_CASES])
@pytest.mark.parametrize("path", ["general", "general-32", "general-64"])
def test_general_path_split_k(dtype, case, path):
    # "general" picks the tile width (tile_for in bmm/general.cu); the others force one, with split counts
    # of their own
    batch, m, n, k = case
    a = make_tensor((batch, m, k), dtype, "cuda")
    b = make_tensor((1, k, n), dtype, "cuda")  # broadcast batch
    for x, y in [(a, b), (a.mT.contiguous().mT, b.mT.contiguous().mT)]:
        torch.full((batch * m * n,), float("nan"), dtype=dtype, device="cuda")  # the output's future memory
        out = torch.ops.tiles._bmm_on_path(x, y, path)
        assert_bmm_close(out, x, y)
        assert torch.equal(out, torch.ops.tiles._bmm_on_path(x, y, path))


# Tile edges of the general kernel's two tile widths: sizes around 32 and 64, a batch wider than one
# grid dim allows (65535: blocks loop over it), strided and transposed operands, K below one slab.
GENERAL_TILE_CASES = [(3, 31, 33, 5), (2, 32, 64, 64), (1, 65, 97, 130), (70000, 3, 2, 4), (2, 129, 1, 63)]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", GENERAL_TILE_CASES, ids=["x".join(map(str, c)) for c in GENERAL_TILE_CASES])
def test_general_path_both_tile_widths(dtype, case):
    batch, m, n, k = case
    a = make_tensor((batch, m, k), dtype, "cuda")
    b = make_tensor((batch, k, n), dtype, "cuda", "transposed")
    for x in (a, make_tensor((batch, m, k), dtype, "cuda", "sliced")):
        outs = [torch.ops.tiles._bmm_on_path(x, b, path) for path in ("general-32", "general-64")]
        for out in outs:
            assert_bmm_close(out, x, b)


@requires_cuda
def test_small_float32_products_take_the_general_kernel():
    # At full precision, float32 products of up to SMALL_FLOAT32_MACS multiply-adds, or of fewer than
    # SMALL_FLOAT32_OUTPUTS outputs up to FEW_OUTPUTS_MACS_TMA multiply-adds where the Hopper kernel reads
    # both operands through TMA, run on the general kernel's FMAs (K <= 16 on the thin kernel); the others
    # (an operand the Hopper kernel would copy, or no Hopper kernel), and any under TF32, on the tensor cores.
    mma_expected()
    f32 = lambda *shape: make_tensor(shape, torch.float32, "cuda")  # noqa: E731
    at_limit = (f32(512, 32), f32(32, 1024))  # 2^24 multiply-adds, 2^19 outputs
    over = (f32(1024, 24), f32(24, 1024))
    few_outputs = (f32(64, 1024), f32(1024, 1024))  # 2^16 outputs over a long K: 2^26 multiply-adds
    few_outputs_more = (f32(64, 4096), f32(4096, 1024))  # 2^28
    few_outputs_copied = (f32(384, 160), f32(160, 1025)[:, 1:])  # 2^25.9, 2^18.6 outputs, b's base 4 bytes in
    many_outputs = (f32(512, 4096), f32(4096, 1024))  # 2^19
    short_k = (f32(2048, 4), f32(4, 4096))  # 2^25 multiply-adds, K = 4
    assert 512 * 1024 * 32 == SMALL_FLOAT32_MACS and 512 * 1024 == SMALL_FLOAT32_OUTPUTS
    assert 64 * 1024 * 1024 == FEW_OUTPUTS_MACS_TMA
    assert torch.ops.tiles._bmm_path(*at_limit) == SMALL_FLOAT32
    few = torch.ops.tiles._bmm_path(*few_outputs)  # (through TMA: the Hopper kernel reads both operands)
    assert few == SMALL_FLOAT32 if hopper_float32_runs() else few != SMALL_FLOAT32, few
    assert torch.ops.tiles._bmm_path(*short_k) == "thin short-k"
    tensor_cores = ("hopper-wgmma 3xtf32", "mma-sync 3xtf32")
    for large in (over, many_outputs, few_outputs_copied):
        assert torch.ops.tiles._bmm_path(*large).startswith(tensor_cores), torch.ops.tiles._bmm_path(*large)
    more = torch.ops.tiles._bmm_path(*few_outputs_more)
    assert more.startswith("hopper-wgmma 3xtf32") if hopper_float32_runs() else more != SMALL_FLOAT32, more
    for a, b in (at_limit, over, few_outputs, few_outputs_more, few_outputs_copied, short_k):
        assert small_float32(a, b) == (SMALL_FLOAT32 if torch.ops.tiles._bmm_path(a, b) == SMALL_FLOAT32 else None)
        assert_bmm_close(poisoned_bmm(a, b), a, b)
    torch.set_float32_matmul_precision("high")  # the highest_float32_precision fixture restores it
    # (many_outputs: 32 tiles, too many for the few-tiles split-K on any GPU, unlike few_outputs on an A100)
    assert torch.ops.tiles._bmm_path(*many_outputs).startswith(("hopper-wgmma tf32", "mma-sync tf32"))


@requires_cuda
def test_small_tf32_products_on_unaligned_operands_take_the_tensor_cores():
    # Under TF32 the mma kernel takes small products whose operands it copies narrower than 16 bytes (rows
    # of 13 floats, a base 4 bytes in), as it takes larger and aligned ones: its copies beat the general
    # kernel's FMAs at every size the slow-grid-tf32 preset timed (NOTES.md, N1h).
    mma_expected()
    f32 = lambda *shape: make_tensor(shape, torch.float32, "cuda")  # noqa: E731
    torch.set_float32_matmul_precision("high")
    small = (f32(2, 408, 55), f32(2, 55, 13))  # b's rows 52 bytes apart: 4-byte copies
    base_4_bytes_in = (f32(1, 512, 32), f32(1, 32, 1025)[:, :, 1:])
    larger = (f32(8, 47, 74), f32(8, 74, 1254))  # 2^25 multiply-adds, 8-byte copies
    aligned = (f32(2, 408, 56), f32(2, 56, 16))
    for unaligned in (small, base_4_bytes_in, larger):
        assert mma_copy_width(*unaligned) < 16
        assert torch.ops.tiles._bmm_path(*unaligned).startswith("mma-sync tf32 unaligned")
    assert torch.ops.tiles._bmm_path(*aligned).startswith(("hopper-wgmma tf32", "mma-sync tf32")), \
        torch.ops.tiles._bmm_path(*aligned)
    for a, b in (small, base_4_bytes_in, larger, aligned):
        assert small_float32(a, b) is None
        assert_bmm_close(poisoned_bmm(a, b), a, b, MMA_KINDS[(torch.float32, "high")][1])


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_short_k_over_few_outputs_takes_the_mma_kernel(dtype):
    # A K of 9 to 16 over fewer than SHORT_K_MMA_OUTPUTS outputs runs on the mma kernel where it can take
    # the operands; K <= 8, more outputs, or operands without a unit-stride dim stay on the thin kernel.
    mma_expected()
    t = lambda *shape, kind="contiguous": make_tensor(shape, dtype, "cuda", kind)  # noqa: E731
    # b's rows of 5 elements are never 16-byte aligned, so the Hopper 16-bit kernel cannot take bf16 here
    few = (t(5, 2565, 16), t(5, 16, 5))
    k9 = (t(1, 1023, 9), t(1, 9, 1025))  # 1048575 outputs: one under the limit
    short = (t(5, 2565, 8), t(5, 8, 5))
    many = (t(1, 1024, 9), t(1, 9, 1024))  # 2^20 outputs
    sliced = (t(5, 2565, 16, kind="sliced"), t(5, 16, 5))
    # four blocks of 64 (fewer than any GPU's SMs): at full float32 precision the general kernel's 32-wide tiles
    tiny = (t(1, 128, 12), t(1, 12, 128))
    for mma in (few, k9):
        assert short_k_on_mma(*mma) and torch.ops.tiles._bmm_path(*mma).startswith("mma-sync")
    for thin in (short, many, sliced):
        assert not short_k_on_mma(*thin) and torch.ops.tiles._bmm_path(*thin) == "thin short-k"
    assert general_tile(*tiny) == 32 and short_k_on_tensor_cores(*tiny)
    tiny_path = torch.ops.tiles._bmm_path(*tiny)
    assert (tiny_path == SMALL_FLOAT32) if dtype == torch.float32 else tiny_path.startswith("mma-sync"), tiny_path
    for a, b in (few, k9, short, many, sliced, tiny):
        assert_bmm_close(poisoned_bmm(a, b), a, b)
    if dtype == torch.float32 and sm_count() > 80:
        # 2^22 multiply-adds over 64 blocks of 64 take the general kernel's 32-wide tiles; 2^22.3 over 80
        # stays on the mma kernel (short_k_on_cuda_cores' cap), though the general kernel would run it 32 wide
        at_cap = (t(1, 256, 16), t(1, 16, 1024))
        over_cap = (t(1, 320, 16), t(1, 16, 1024))
        assert general_tile(*at_cap) == 32 and not short_k_on_mma(*at_cap)
        assert general_tile(*over_cap) == 32 and short_k_on_mma(*over_cap)
        assert torch.ops.tiles._bmm_path(*at_cap) == SMALL_FLOAT32
        assert torch.ops.tiles._bmm_path(*over_cap).startswith("mma-sync 3xtf32")
        for a, b in (at_cap, over_cap):
            assert_bmm_close(poisoned_bmm(a, b), a, b)
    if dtype == torch.float32:  # under TF32 the tensor cores keep them
        torch.set_float32_matmul_precision("high")  # the highest_float32_precision fixture restores it
        assert short_k_on_mma(*tiny) and torch.ops.tiles._bmm_path(*tiny).startswith("mma-sync tf32")

# ---- the thin kernels ------------------------------------------------------------------------------
# (batch, M, N, K): short K (1, at the limit, 0, output rows that take whole-vector stores: N a
# multiple of the columns per thread, outputs narrower than a warp's columns: a warp spans rows); few columns
# (N = 1: a matrix-vector product; N at the limit; one output element over a long K; just past the
# short-K limit; rows past a whole number of 16-byte vectors; 5 to 8 columns) and few rows (M <= 8 < N), each over K
# long enough to be split over blocks or not.
THIN_SHAPES = [(3, 37, 130, 1), (2, 300, 523, 16), (1, 65, 33, 0), (2, 9, 300, 7),
               (1, 33, 520, 3), (2, 65, 256, 9), (5, 2565, 5, 16), (2, 1905, 10, 16), (3, 80, 7, 2),
               (5, 254, 1, 3985), (2, 633, 4, 944), (1, 92, 3, 1858), (1, 1, 1, 4097), (2, 130, 3, 17),
               (3, 1001, 2, 2048), (3, 2, 35, 1194), (1, 4, 700, 300), (2, 633, 8, 944), (4, 145, 5, 229),
               (2, 7, 422, 122), (1, 500, 8, 64)]
THIN_LAYOUTS = LAYOUTS + [("unaligned-row", "unaligned-col"), ("unaligned-col", "unaligned-row"),
                          ("sliced", "row"), ("row", "sliced")]


def thin_operand(layout, batch, rows, cols, dtype):
    if layout.startswith("unaligned-"):
        return unaligned_operand(layout[len("unaligned-"):], batch, rows, cols, dtype)
    if layout == "sliced":  # no unit-stride dim
        return make_tensor((batch, rows, cols), dtype, "cuda", "sliced")
    return operand(layout, batch, rows, cols, dtype)


@requires_cuda
@pytest.mark.parametrize("layouts", THIN_LAYOUTS, ids=["-".join(l) for l in THIN_LAYOUTS])
@pytest.mark.parametrize("shape", THIN_SHAPES, ids=["x".join(map(str, s)) for s in THIN_SHAPES])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64], ids=str)
def test_thin_path(dtype, shape, layouts):
    batch, m, n, k = shape
    a = thin_operand(layouts[0], batch, m, k, dtype)
    b = thin_operand(layouts[1], batch, k, n, dtype)
    path = torch.ops.tiles._bmm_path(a, b)
    assert (path == thin_path(a, b) or (dtype in HALF_DTYPES and path.startswith(HOPPER))
            or (short_k_on_mma(a, b) and path.startswith("mma-sync")) or path == small_float32(a, b)), path
    for thin in ("thin", "thin whole-k", "thin split-k"):  # K split as costed, never, to fill the SMs (or 8 clusters)
        assert_bmm_close(poisoned_on_path(a, b, thin), a, b, msg=thin)
    assert_bmm_close(poisoned_bmm(a, b), a, b)


# Few columns, unpadded operands as the grid's random shapes have them: (batch, m, n, k), a's layout, the
# dtype, whether "thin" splits K without thread block clusters and with them (an sm_90a build on an sm_90
# GPU: at most 8 splits, added in the cluster's shared memory, a cheaper sum than the second kernel's).
# Along k (a row-major, rows of 158 floats: element loads), 158 is three chunks, cheaper whole than split
# 2 ways plus either sum. Along rows (a column-major) a block walks one k a warp in float32 (8 a round):
# 158 and 200 split; in 16-bit four k a warp (32 a round), so 158 (5 rounds) and 200 (7) stay whole
# where the split costs the second kernel, and split where it costs the cluster's barriers. 3985 splits
# every way. 2 x 6144 rows of 2401 split 3 ways either way, in 384 blocks a split: more than fit on the
# GPU at once (at most 8 blocks of 256 threads an SM), so the second kernel adds them with clusters too.
# Float32 3 x 217 x 2 x 33 along rows (five one-k rounds) stays whole: the second kernel's sum costs more
# than the walk it saves, and clusters take along rows only walks of 64 k or more.
THIN_SPLITS = [((1, 112, 2, 158), "row", torch.float32, (False, False)),
               ((1, 112, 2, 158), "col", torch.float32, (True, True)),
               ((1, 112, 2, 158), "col", torch.bfloat16, (False, True)),
               ((3, 217, 2, 200), "col", torch.float32, (True, True)),
               ((3, 217, 2, 200), "col", torch.bfloat16, (False, True)),
               ((5, 254, 1, 3985), "row", torch.float32, (True, True)),
               ((5, 254, 1, 3985), "col", torch.float32, (True, True)),
               ((5, 254, 1, 3985), "col", torch.bfloat16, (True, True)),
               ((2, 6144, 1, 2401), "row", torch.float32, (True, True)),
               ((3, 217, 2, 33), "col", torch.float32, (False, False))]


def clusters_run():
    """Whether the few-columns kernels split K in thread block clusters here (bmm/thin.cu): where the
    Hopper kernel runs (an sm_90a build on an sm_90 GPU)."""
    if torch.cuda.get_device_capability() != (9, 0):
        return False
    probe = torch.ones(8, 8, dtype=torch.bfloat16, device="cuda")
    return torch.ops.tiles._bmm_path(probe, probe) == HOPPER


def few_columns_operands(shape, a_layout, dtype):
    """Random a (row-major, or column-major: a.mT of a contiguous tensor) and b for a (batch, m, n, k) product."""
    batch, m, n, k = shape
    a = make_tensor((batch, m, k) if a_layout == "row" else (batch, k, m), dtype, "cuda")
    return a if a_layout == "row" else a.mT, make_tensor((batch, k, n), dtype, "cuda")


def order_sensitive_operands(shape, a_layout, dtype):
    # Integers whose float32 sums are exact below 2^24 and rounded to even multiples above (floats are 2
    # apart from 2^24, 4 from 2^25): 2^25 at a's first k and -2^25 at its last (b's rows there are ones,
    # so they cancel), small integers between. Whole and split walks group the k differently, so their
    # sums round differently, and the results, a few hundred at most, mostly stay apart in bf16.
    batch, m, n, k = shape
    a = torch.randint(-3, 4, (batch, m, k), device="cuda").to(dtype)
    a[..., 0], a[..., -1] = 2.0**25, -(2.0**25)
    a = a if a_layout == "row" else a.mT.contiguous().mT
    b = torch.randint(1, 3, (batch, k, n), device="cuda").to(dtype)
    b[:, 0], b[:, -1] = 1, 1
    return a, b


@requires_cuda
@pytest.mark.parametrize("shape, a_layout, dtype, splits", THIN_SPLITS,
                         ids=[f"{'x'.join(map(str, s))}-{layout}-{str(d)[6:]}" for s, layout, d, _ in THIN_SPLITS])
def test_thin_splits_k_only_where_the_walk_is_long(shape, a_layout, dtype, splits):
    # "thin" writes the bits of "thin split-k" (K split as far as filling the SMs asks, in clusters where
    # "thin" would take them) where it splits,
    # else those of "thin whole-k"; on order-sensitive operands the two differ
    a, b = few_columns_operands(shape, a_layout, dtype)
    assert_bmm_close(poisoned_on_path(a, b, "thin"), a, b)
    a, b = order_sensitive_operands(shape, a_layout, dtype)
    out = poisoned_on_path(a, b, "thin")
    whole, split = (torch.ops.tiles._bmm_on_path(a, b, p) for p in ("thin whole-k", "thin split-k"))
    assert torch.equal(out, split if splits[clusters_run()] else whole)
    assert not torch.equal(whole, split)


# Where "thin" splits K, how the splits add up (bmm/thin.cu's narrow_k_split): in thread block clusters,
# one kernel, where clusters run and the cluster's walk (at most 8 splits) is at most 8 chunks deeper than
# the second kernel's along k, 2 rounds along rows; else in the second kernel (sum_splits_kernel). Float32
# 1 x 112 x 2 x 158 along rows walks 3 rounds in 7 splits against 2 in 10; 3 x 113 x 3 x 4333 along k 9
# chunks in 8 splits against 2 in 34 (float64's chunks are as deep); 2 x 422 x 7 x 122 along rows (8
# columns) 2 rounds in 8 splits either way; float64 1 x 3 x 112 x 158, a few-rows product (A = b^T, along
# rows, the output written transposed), 3 rounds in 7 splits against 2 in 10: clusters. 2 x 88 x 3 x 2025
# along rows walks 32 rounds in 8 splits against 4 in 64: the second kernel. 2 x 6144 x 1 x 2401 splits 3
# ways either way, but its 384 clusters do not fit on the GPU at once: the second kernel.
THIN_SPLIT_SUMS = [((1, 112, 2, 158), "col", torch.float32, True), ((3, 113, 3, 4333), "row", torch.float32, True),
                   ((3, 113, 3, 4333), "row", torch.float64, True), ((2, 422, 7, 122), "col", torch.float32, True),
                   ((1, 3, 112, 158), "row", torch.float64, True), ((2, 88, 3, 2025), "col", torch.float32, False),
                   ((2, 6144, 1, 2401), "row", torch.float32, False)]


@requires_cuda
@pytest.mark.parametrize("shape, a_layout, dtype, in_clusters", THIN_SPLIT_SUMS,
                         ids=[f"{'x'.join(map(str, s))}-{layout}-{str(d)[6:]}" for s, layout, d, _ in THIN_SPLIT_SUMS])
def test_thin_split_sums_in_clusters_only_where_the_walk_stays_short(shape, a_layout, dtype, in_clusters):
    a, b = few_columns_operands(shape, a_layout, dtype)
    kernels = cuda_kernel_names(lambda: torch.ops.tiles._bmm_on_path(a, b, "thin"))
    assert any("narrow_" in name for name in kernels), kernels
    second_kernel = any("sum_splits_kernel" in name for name in kernels)
    assert second_kernel != (in_clusters and clusters_run()), kernels
    assert_bmm_close(torch.ops.tiles._bmm_on_path(a, b, "thin"), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64], ids=str)
def test_thin_path_batch_past_the_grid_rows(dtype):
    # more batches than a grid's 65535 rows: blocks loop over them (short K; few rows)
    for batch, m, n, k in [(70000, 3, 2, 4), (70000, 2, 20, 20)]:
        a, b = make_tensor((batch, m, k), dtype, "cuda"), make_tensor((batch, k, n), dtype, "cuda", "transposed")
        assert torch.ops.tiles._bmm_path(a, b) == thin_path(a, b)
        assert_bmm_close(poisoned_on_path(a, b, "thin"), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_thin_path_batch_broadcast_and_same_bits(dtype):
    # a broadcast operand (batch stride 0) on either side, in both thin kernels; the split-K partials
    # are summed in a fixed order, so every run gives the same bits
    a3, a1 = make_tensor((4, 300, 1000), dtype, "cuda"), make_tensor((1, 300, 1000), dtype, "cuda")
    b3, b1 = make_tensor((4, 1000, 3), dtype, "cuda"), make_tensor((1, 1000, 3), dtype, "cuda")
    short_a, short_b = make_tensor((1, 200, 3), dtype, "cuda"), make_tensor((4, 3, 170), dtype, "cuda")
    for a, b in [(a3, b1), (a1, b3), (a1.mT.contiguous().mT, b3), (b1.mT, a3.mT), (short_a, short_b)]:
        assert torch.ops.tiles._bmm_path(a, b).startswith("thin")
        out = poisoned_on_path(a, b, "thin")
        assert_bmm_close(out, a, b)
        assert torch.equal(out, torch.ops.tiles._bmm_on_path(a, b, "thin"))
