"""Drives every CUDA kernel path of torch_tiles once, on small inputs, forward and backward: the
program tools/sanitize.sh runs under compute-sanitizer. Sizes are chosen to reach each path and its
edges (vector tails, misaligned starts, transposed tiles, split and column reductions, bmm edge tiles)
while keeping the sanitizer's run short. Exits non-zero if any result disagrees with PyTorch.
Arguments name the sections to run (all by default; `--list` prints them).
"""
import sys
import time

import torch

import torch_tiles  # noqa: F401

T = torch.ops.tiles
dev = "cuda" if torch.cuda.is_available() else "cpu"  # (cpu: a dry run of the driver itself)
bad = []


def check(name, out, ref, tol):
    if not torch.allclose(out.double(), ref.double(), rtol=tol, atol=tol, equal_nan=True):
        bad.append(name)


def on_path(a, w, path):
    """tiles::_bmm_on_path, which is CUDA-only; the CPU dry run takes bmm's own path."""
    return T._bmm_on_path(a, w, path) if dev == "cuda" else T.bmm(a, w)


def rand(*shape, dtype=torch.float32, requires_grad=False):
    return torch.randn(*shape, device=dev, dtype=dtype, requires_grad=requires_grad)


def nan_prefill(outputs, dtype=torch.float32, split_k=False):
    """Before a bmm whose output of `outputs` elements the TMA-store epilogue may write: initcheck does not
    count TMA (bulk tensor) stores as writes, so such an output reads as uninitialized. NaN written to the
    block the output will take (the caching allocator hands a freed block straight back) makes it
    initialized, and the comparison fails if any element kept its NaN. With split_k the kernel also
    TMA-stores float partials (up to 8 output-sized slices): with the cache emptied, the output takes the
    freed block of its size (best fit) and the partials the larger one, both written here first."""
    if split_k and dev == "cuda":
        torch.cuda.empty_cache()
        room = torch.full((8 * outputs,), float("nan"), device=dev)
        torch.full((outputs,), float("nan"), dtype=dtype, device=dev)
        del room
    else:
        torch.full((outputs,), float("nan"), dtype=dtype, device=dev)



def elementwise():
    """map and zip: vector tails, misaligned starts, rows and columns broadcast, transposes, strides,
    mixed dtypes."""
    for dtype, tol in [(torch.float32, 1e-4), (torch.bfloat16, 3e-2), (torch.float64, 1e-10)]:
        x = rand(1037, dtype=dtype)
        check("map contiguous", T.map(x, "exp"), x.double().exp(), tol)
        check("map misaligned", T.map(x[1:], "neg"), -x[1:], tol)
        m = rand(33, 64, dtype=dtype)
        check("zip rows", T.zip(m, m[0], "add"), m + m[0], tol)
        check("zip column", T.zip(m, m[:, :1], "mul"), m * m[:, :1], tol)
        t = rand(70, 33, dtype=dtype).t()
        check("map transpose", T.map(t, "sin"), t.double().sin(), tol)
        check("zip transpose", T.zip(t, t.contiguous(), "max"), torch.maximum(t, t.contiguous()), tol)
        s = rand(7, 9, 11, dtype=dtype).permute(2, 0, 1)[::2]
        check("map strided", T.map(s, "abs"), s.abs(), tol)
        other = rand(64, dtype=torch.float16)  # another float dtype: the converting (mixed) path
        check("zip mixed", T.zip(m, other, "sub"), m.double() - other.double(), max(tol, 1e-3))


def reductions():
    """Row, column, split and cluster reductions; sum, max and logsumexp."""
    for dtype, tol in [(torch.float32, 1e-4), (torch.bfloat16, 3e-2), (torch.float64, 1e-10)]:
        # (1200, 2000) and (2100, 1000) over dim 0: row segments in thread block clusters on the H100 (but
        # bf16 / fp16 (2100, 1000): partials); (20, 1000) float / float64 and bf16 (5, 8192): rows under
        # 32 KiB too few for lanes, on a block each (bf16 (20, 1000) is one pass of a warp's lanes)
        for shape, dim in [((300, 5), [1]), ((20, 1000), [1]), ((5, 8192), [1]), ((1, 70000), [1]), ((300, 256), [0]),
                           ((1200, 2000), [0]), ((2100, 1000), [0]), ((6, 30, 7), [1]), ((5000,), None)]:
            r = rand(*shape, dtype=dtype)
            # References on the CPU: PyTorch's own multi-block CUDA reductions read a buffer before writing
            # it, which initcheck reports (thousands of reports at (1200, 2000) over dim 0).
            rc = r.double().cpu()
            ref = (rc.sum() if dim is None else rc.sum(dim[0])).to(dev)
            check(f"reduce sum {shape} {dim}", T.reduce(r, dim, "sum"), ref, tol * max(1, r.numel() ** 0.5))
            check(f"reduce max {shape} {dim}", T.reduce(r, dim, "max"),
                  (rc.amax() if dim is None else rc.amax(dim[0])).to(dev), tol)
            # logsumexp: (max, sum) pairs through the same shuffles, partials and clusters
            lse = torch.logsumexp(rc, dim=tuple(range(rc.dim())) if dim is None else dim[0]).to(dev)
            check(f"reduce logsumexp {shape} {dim}", T.reduce(r, dim, "logsumexp"), lse, tol * max(1.0, lse.abs().max().item()))


def bmm_small():
    """The mma.sync, general and thin bmm kernels on small and odd shapes."""
    for dtype, tol in [(torch.float32, 1e-4), (torch.bfloat16, 3e-2), (torch.float64, 1e-10)]:
        # K = 17, 99 and 98: rows that are not 16-byte aligned, which the mma kernel copies 8 bytes (float32
        # 98, float64) or 4 bytes (float32 17 and 99, 16-bit 98) at a time, or loads through registers and
        # realigns (16-bit 17 and 99), 98 and 99 over more k-tiles than its stage ring; the last: split-K
        for (b, mm, k, n) in [(2, 65, 17, 33), (2, 130, 99, 70), (2, 130, 98, 70), (1, 1, 1, 1), (3, 8, 0, 5),
                              (1, 64, 300, 10)]:
            a, w = rand(b, mm, k, dtype=dtype), rand(b, k, n, dtype=dtype)
            check(f"bmm {b}x{mm}x{k}x{n}", T.bmm(a, w), a.double() @ w.double(), tol * max(1, k))
            check("bmm transposed", T.bmm(a.mT.contiguous().mT, w[:1].mT.contiguous().mT), a.double() @ w[:1].double(),
                  tol * max(1, k))
        # the mma kernel at each of its tile sizes (bmm picks one; float64's one DMMA tile runs under both)
        for (b, mm, k, n) in [(2, 65, 17, 33), (2, 130, 99, 70), (2, 130, 98, 70), (3, 8, 0, 5)]:
            a, w = rand(b, mm, k, dtype=dtype), rand(b, k, n, dtype=dtype)
            for path in ("mma-64", "mma-128"):
                check(f"bmm {path} {b}x{mm}x{k}x{n}", on_path(a, w, path), a.double() @ w.double(), tol * max(1, k))
        # the mma kernel's split-K (few blocks over a long K; float64 in the DMMA kernel), at each tile size
        # and unsplit ("whole-k"): slices of 8 k-tiles and more, the last one partial (K = 3001)
        for (b, mm, k, n) in [(2, 70, 3001, 40), (1, 92, 1858, 24)]:
            a, w = rand(b, mm, k, dtype=dtype), rand(b, k, n, dtype=dtype)
            for path in ("mma-64", "mma-128", "mma-64 whole-k", "mma-128 whole-k"):
                check(f"bmm {path} {b}x{mm}x{k}x{n}", on_path(a, w, path), a.double() @ w.double(), tol * max(1, k))
        # the general kernel's tile widths, and its split-K: up to 8 splits summed in a thread block cluster
        # (sm_90), 64 by a second kernel
        for (mm, k, n) in [(33, 512, 17), (1, 4097, 1), (70, 100, 65)]:
            a, w = rand(2, mm, k, dtype=dtype), rand(1, k, n, dtype=dtype)
            for path in ("general-32", "general-64"):
                check(f"bmm {path} {mm}x{k}x{n}", on_path(a, w, path), a.double() @ w.double(), tol * max(1, k))
        # the thin kernels (on any GPU): short K with whole-vector and strided stores, b staged (K-contiguous),
        # five output columns (blocks of few threads across);
        # few columns walked along k (16-byte loads, split-K; element loads over an odd K) and along rows
        # (a transposed: 16-byte loads with a row tail), few rows, 5 to 8 columns either way
        for (b, mm, k, n, a_t, w_t) in [(2, 33, 3, 520, False, False), (2, 37, 5, 130, True, False),
                                        (2, 40, 9, 70, False, True), (3, 700, 16, 5, False, True),
                                        (2, 300, 1024, 2, False, False),
                                        (5, 254, 3985, 1, False, False), (2, 1001, 512, 3, True, False),
                                        (3, 2, 1194, 35, False, True), (2, 500, 700, 7, False, False),
                                        (2, 1001, 512, 6, True, False)]:
            a = rand(b, k, mm, dtype=dtype).mT if a_t else rand(b, mm, k, dtype=dtype)
            w = rand(b, n, k, dtype=dtype).mT if w_t else rand(b, k, n, dtype=dtype)
            for path in ("thin", "thin whole-k", "thin split-k"):  # K split as costed, never, to fill the SMs
                check(f"bmm {path} {b}x{mm}x{k}x{n}", on_path(a, w, path), a.double() @ w.double(), tol * max(1, k))


# The Hopper tensor-core bmm (bf16 / fp16 on sm_90a builds; elsewhere these take the general kernel):
# both major orders of each operand, edge tiles, every tile width, both epilogues (N % 8 == 0: TMA
# stores; otherwise direct stores from padded operands, 192-wide at 10 x 300 x 1290, 64-wide at N =
# 33), a broadcast batch; in the last four (on 132 SMs: 400 tiles of 64 columns (N <= 64); 264 tiles of
# 128 columns, as many waves as at 256; 270 of 192 columns,
# as many waves as at 256 and a wave fewer than at 128; 280 of 256 columns, a wave fewer than at 192)
# every block walks at least two tiles and, with more k-blocks than the tile has store groups (4, 2, 4
# and 4 against 1, 1, 3 and 2), stages each tile's stores during the next one's k-blocks (at 256 columns two or
# three k-blocks would store whole tiles instead: hopper_streaming runs those).
def hopper():
    WALK_TILES = {(200, 250, 200, 40): "128x64", (44, 250, 72, 264): "128x128", (45, 130, 200, 520): "128x192",
                  (14, 520, 200, 1000): "128x256"}
    # Tall 192 x 192 tiles by name: edge tiles in M, N and K, the TMA store (N = 264) and the direct one
    # (N = 1290, N = 33); 10 x 300 x 1290 is 140 tiles, so blocks walk two.
    TALL = {(2, 130, 72, 264), (10, 300, 200, 1290), (2, 130, 72, 33)}
    # Small 64 x 64 tiles by name: edge tiles in M, N and K; TMA's store after the last tile's k-blocks
    # (N = 264: 30 tiles, one a block), held under the next tile (200 x 250 x 40 over K = 200: 800 tiles,
    # so blocks walk several) and right after a single k-block (3 x 130 x 40, K = 64); the direct one
    # (N = 100, N = 33).
    SMALL = {(2, 130, 72, 264), (3, 70, 64, 100), (2, 130, 72, 33), (200, 250, 200, 40), (3, 130, 64, 40)}
    BY_NAME = {"hopper-192x192": TALL, "hopper-64x64": SMALL}  # three consumer warpgroups; one
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev == "cuda" else 0
    for dtype in (torch.bfloat16, torch.float16):
        for (b, mm, k, n) in [(2, 130, 72, 264), (1, 200, 136, 96), (3, 70, 64, 100), (10, 300, 200, 1290),
                              (2, 130, 72, 33), (3, 130, 64, 40), *WALK_TILES]:
            kp, np_ = (k + 7) // 8 * 8, (n + 7) // 8 * 8
            a_row = rand(b, mm, kp, dtype=dtype)[:, :, :k]
            a_col = rand(b, k, (mm + 7) // 8 * 8, dtype=dtype)[:, :, :mm].mT
            w_row = rand(b, k, np_, dtype=dtype)[:, :, :n]
            w_col = rand(b, n, kp, dtype=dtype)[:, :, :k].mT
            for name, a, w in [("rr", a_row, w_row), ("rc", a_row, w_col), ("cr", a_col, w_row), ("cc", a_col, w_col),
                               ("broadcast", a_row[0], w_row)]:
                ref = a.double() @ w.double()
                nan_prefill(max(b, 1) * mm * n, dtype)
                tile, path = T._bmm_tile(a, w), T._bmm_path(a, w)
                walk = WALK_TILES.get((b, mm, k, n))
                if sms == 132 and path.startswith("hopper-wgmma") and walk and (walk, "hopper-wgmma") != (tile, path):
                    bad.append(f"{b}x{mm}x{k}x{n} took {tile} tiles, {path}")  # the plan changed: not the coverage named
                check(f"bmm {dtype} {name} {b}x{mm}x{k}x{n} [{path} {tile}]", T.bmm(a, w), ref,
                      2e-2 * k ** 0.5)
                for named, cases in BY_NAME.items():
                    if (b, mm, k, n) in cases and path.startswith("hopper-wgmma"):
                        nan_prefill(max(b, 1) * mm * n, dtype)
                        check(f"bmm {dtype} {name} {b}x{mm}x{k}x{n} [{named}]", on_path(a, w, named), ref,
                              2e-2 * k ** 0.5)


# The Hopper 16-bit kernel's split-K (few tiles over a long K), in every major order: float partials
# stored in pairs (N = 136: four slices of two tiles) and one by one (N = 131, odd: two slices of four
# edge tiles, a K tail in the last), summed in slice order. Rows padded to 16-byte strides, as TMA needs.
def hopper_split_k():
    pad8 = lambda x: (x + 7) // 8 * 8  # noqa: E731
    probe = rand(8, 8, dtype=torch.bfloat16)
    on_hopper = dev == "cuda" and T._bmm_path(probe, probe) == "hopper-wgmma"  # an sm_90a build on an sm_90 GPU
    for (b, mm, k, n) in ([(1, 128, 4096, 136), (1, 130, 2100, 131)] if dev == "cuda" else ()):
        a_row = rand(b, mm, pad8(k), dtype=torch.bfloat16)[:, :, :k]
        a_col = rand(b, k, pad8(mm), dtype=torch.bfloat16)[:, :, :mm].mT
        w_row = rand(b, k, pad8(n), dtype=torch.bfloat16)[:, :, :n]
        w_col = rand(b, n, pad8(k), dtype=torch.bfloat16)[:, :, :k].mT
        for name, a, w in [("rr", a_row, w_row), ("rc", a_row, w_col), ("cr", a_col, w_row), ("cc", a_col, w_col)]:
            path = T._bmm_path(a, w)
            if on_hopper and path != "hopper-wgmma split-k":
                bad.append(f"split-k case {name} {b}x{mm}x{k}x{n} took {path}")  # no longer covers split-K
            check(f"bmm bf16 {name} {b}x{mm}x{k}x{n} [{path}]", T.bmm(a, w), a.double() @ w.double(), 2e-2 * k ** 0.5)


# The Hopper kernel's streaming-store epilogue: short K and an output larger than L2 (edge tiles in M,
# and in N at 256- and 192-wide tiles, two tile columns at 192; N <= 128 takes 128-wide ones, N <= 64
# 64-wide ones). bmm picks it only where DRAM is slower than 4 TB/s (the H100; the H200 keeps TMA's
# stores), so the driver runs it
# by name at the width bmm's plan gives each N, and bmm's own pick beside it (prefilled: TMA's stores,
# of whole 256-wide tiles at N = 2056 where DRAM is faster; the whole-tile store also by name there).
def hopper_streaming():
    for n, width in ((2056, 256), (376, 192), (120, 128), (48, 64)) if dev == "cuda" else ():
        mm, k = 1000, 72
        b = torch.cuda.get_device_properties(dev).L2_cache_size * 11 // 10 // (mm * n * 2) + 1
        a, w = rand(b, mm, k, dtype=torch.bfloat16), rand(b, k, n, dtype=torch.bfloat16)
        path, ref = T._bmm_path(a, w), a.double() @ w.double()
        if path.startswith("hopper-wgmma"):
            if path not in ("hopper-wgmma whole-tile-store" if width == 256 else "hopper-wgmma",
                            "hopper-wgmma streaming-store"):
                bad.append(f"short-K case took {path}")  # the plan changed: this case no longer covers the stores
            check(f"bmm bf16 {b}x{mm}x{k}x{n} [hopper-{width} streaming-store]",
                  on_path(a, w, f"hopper-{width} streaming-store"), ref, 2e-2 * k ** 0.5)
            if width == 256:
                nan_prefill(b * mm * n, torch.bfloat16)
                check(f"bmm bf16 {b}x{mm}x{k}x{n} [hopper-256 whole-tile-store]",
                      on_path(a, w, "hopper-256 whole-tile-store"), ref, 2e-2 * k ** 0.5)
        nan_prefill(b * mm * n, torch.bfloat16)
        check(f"bmm bf16 {b}x{mm}x{k}x{n} [{path}]", T.bmm(a, w), ref, 2e-2 * k ** 0.5)
        del a, w, ref


# The Hopper float32 kernel (sm_90a builds; elsewhere mma.sync): TF32 ("high") and 3xTF32 ("highest") in
# every major order with edge tiles; an M-major a with a row-major b (no K-major operand) has its b tiles
# transposed in shared memory, with K and N tails; on 132 SMs under "high", (12, 1400, 40, 520) takes
# 256-wide tiles with the roles swapped (rr) and 192-wide ones otherwise, (1, 256, 2100, 384) splits K four
# ways (six tiles, a K tail in the last split), (1, 960, 3076, 1080) takes 256-wide tiles split three
# ways and (1, 840, 2052, 832) 192-wide ones split three ways; N = 64 and N = 40 (past N in the tile's
# last 24 rows of Q) take TF32's 64-wide tiles wherever Q is b; N = 100 takes 128-wide ones, which in cr
# (an MN-major Q) the consumer warps transpose under "high" (the producer's warps under "highest"), with
# the tile's last 28 rows of Q past N.
def hopper_float32():
    SPLIT_WIDTHS = {(1, 960, 3076, 1080): "256", (1, 840, 2052, 832): "192"}  # TF32 split-K coverage on 132 SMs
    NARROW_Q = {(20, 300, 200, 64), (3, 520, 136, 40)}  # TF32 128 x 64 tiles wherever Q is b (all but rr)
    CONSUMERS_TRANSPOSE = (2, 200, 136, 100)  # cr: 128 x 128 tiles, transposed by the consumer warps
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev == "cuda" else 0
    probe = rand(8, 8, dtype=torch.bfloat16)
    on_hopper = dev == "cuda" and T._bmm_path(probe, probe) == "hopper-wgmma"  # an sm_90a build on an sm_90 GPU
    for precision in (("high", "highest") if dev == "cuda" else ()):
        old_precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        for (b, mm, k, n) in [(2, 132, 72, 264), (1, 200, 44, 600), (12, 1400, 40, 520), (1, 256, 2100, 384),
                              (1, 960, 3076, 1080), (1, 840, 2052, 832), (20, 300, 200, 64), (3, 520, 136, 40),
                              CONSUMERS_TRANSPOSE]:
            width = SPLIT_WIDTHS.get((b, mm, k, n))
            if width and precision == "highest":
                continue  # 3xTF32 tiles are 128-wide only, split by (1, 256, 2100, 384); racecheck is slow on these
            a_row, a_col = rand(b, mm, k), rand(b, k, mm).mT
            w_row, w_col = rand(b, k, n), rand(b, n, k).mT
            for name, a, w in [("rr", a_row, w_row), ("rc", a_row, w_col), ("cr", a_col, w_row), ("cc", a_col, w_col),
                               ("cr broadcast", a_col, w_row[0])]:
                path, tile = T._bmm_path(a, w), T._bmm_tile(a, w)
                nan_prefill(b * mm * n, split_k="split-k" in path)
                covered = width is not None and path == "hopper-wgmma tf32 split-k" and width in (tile or "")
                if sms == 132 and precision == "high" and width and not covered:
                    bad.append(f"{b}x{mm}x{k}x{n} {name} took {path} {tile}")  # no longer the coverage named
                tile_checked = on_hopper and precision == "high"  # the widths exist on sm_90a builds only
                if tile_checked and (b, mm, k, n) in NARROW_Q and name != "rr" and tile != "128x64":
                    bad.append(f"{b}x{mm}x{k}x{n} {name} took {path} {tile}, not 128x64 tiles")
                tma_fed = path.startswith("hopper-wgmma tf32") and "copied" not in path
                consumers_transpose = tma_fed and tile == "128x128"
                if tile_checked and (b, mm, k, n) == CONSUMERS_TRANSPOSE and name.startswith("cr") \
                        and not consumers_transpose:
                    bad.append(f"{b}x{mm}x{k}x{n} {name} took {path} {tile}, not TMA-loaded 128 x 128 TF32 tiles")
                check(f"bmm float32 {precision} {name} {b}x{mm}x{k}x{n} [{path} {tile}]", T.bmm(a, w),
                      a.double() @ w.double(), (1e-2 if precision == "high" else 1e-4) * k ** 0.5)
        torch.set_float32_matmul_precision(old_precision)


# The Hopper float32 kernel's ping-pong consumers by name (TF32, NT only: "hopper-128 ping-pong"): 320 and
# 360 tiles, two or three a block on 132 SMs, so that the consumers hand the tensor cores over and skip each
# other's stages; K of 7 and 3 k-blocks around the 6-stage ring; N = 1025 takes the direct stores.
def hopper_ping_pong():
    probe = rand(8, 8, dtype=torch.bfloat16)
    if dev != "cuda" or T._bmm_path(probe, probe) != "hopper-wgmma":  # an sm_90a build on an sm_90 GPU
        return
    old_precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    for (b, mm, k, n) in [(16, 512, 224, 640), (8, 520, 96, 1025)]:
        a, w = rand(b, mm, k), rand(b, n, k).mT
        nan_prefill(b * mm * n)
        check(f"bmm float32 ping-pong {b}x{mm}x{k}x{n}", on_path(a, w, "hopper-128 ping-pong"),
              a.double() @ w.double(), 1e-2 * k ** 0.5)
    torch.set_float32_matmul_precision(old_precision)


# The Hopper float32 kernel with operands TMA cannot address (odd leading dims, an odd base), which its
# producer warps copy with 4-byte cp.async: R copied, Q copied (K-major, and MN-major transposed as it is
# copied), both; edge tiles and K tails, 64-wide TF32 tiles at N = 40, and a split K ((b, m, k, n) =
# (1, 256, 2100, 385) on 132 SMs:
# an odd N, so that the threads store its partials, which initcheck sees, and TMA's stores, which it
# does not, only the other cases' outputs, pre-filled below).
# On the Hopper kernel by name (bmm sends products this small to the mma or general kernels).
def hopper_float32_copied():
    def odd(batch, rows, cols, col_major):
        if col_major:
            return rand(batch, cols, rows + 1)[:, :, 1:].mT  # base 4 bytes past the allocation, ld rows + 1
        return rand(batch, rows, cols + 1)[:, :, 1:]
    for precision in (("high", "highest") if dev == "cuda" else ()):
        old_precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        for (b, mm, k, n) in [(2, 132, 72, 264), (1, 200, 44, 600), (3, 200, 72, 40), (1, 256, 2100, 385)]:
            # (rr swaps the roles: R = w^T copied; a copied R takes an MN-major Q, or 3xTF32's Q, with it)
            for name, a, w in [("rr", odd(b, mm, k, False), odd(b, k, n, False)),
                               ("rc", odd(b, mm, k, False), odd(b, k, n, True)),
                               ("cr", odd(b, mm, k, True), odd(b, k, n, False)),
                               ("cc", odd(b, mm, k, True), odd(b, k, n, True)),
                               ("rc Q only", rand(b, mm, k), odd(b, k, n, True)),
                               ("cr Q only, MN-major", rand(b, k, mm).mT, odd(b, k, n, False)),
                               ("cc R only", odd(b, mm, k, True), rand(b, n, k).mT)]:
                path = T._bmm_path(a, w)  # bmm's own choice, for the label: these products are too small
                # for bmm to prefer the copies (bmm/hopper_tf32.cu `prefers`), and odd() is never TMA-aligned
                # N = 264 and 600 rows are 16-byte multiples, which TMA stores; the Hopper kernel runs here by
                # name whatever bmm's own path, and bmm's path does not tell whether that kernel splits K.
                nan_prefill(b * mm * n, split_k=True)
                check(f"bmm float32 copied {precision} {name} {b}x{mm}x{k}x{n} [{path}]", on_path(a, w, "hopper"),
                      a.double() @ w.double(), (1e-2 if precision == "high" else 1e-4) * k ** 0.5)
        torch.set_float32_matmul_precision(old_precision)


# The mma.sync kernel's copy widths on products too large for the general kernel: rows of 8-byte (K =
# 98 float32, 100 bf16; M = 302 float32 for an M-major a) and 4-byte (K = 99 float32, 98 bf16) multiples,
# and 2-byte ones (K = 99 bf16: realigning register loads); 3xTF32 ("highest") copies 8 bytes only with
# an M-major a.
def mma_copy_widths():
    for dtype, precision, ks, tol in [(torch.float32, "high", (98, 99), 1e-2), (torch.float32, "highest", (98,), 1e-4),
                                      (torch.bfloat16, "high", (100, 98, 99), 3e-2)]:
        old_precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        for k in (ks if dev == "cuda" else ()):
            a, w = rand(2, 302, k, dtype=dtype), rand(2, k, 1002, dtype=dtype)
            for name, x, y in [("row b", a, w), ("col b", a, w.mT.contiguous().mT), ("col a", a.mT.contiguous().mT, w)]:
                # on the mma kernel by name, at each tile size (bmm's path for them in the label; float32
                # products this small stay on it, larger ones may take the Hopper kernel's copies:
                # hopper_float32_copied)
                for path in ("mma-64", "mma-128"):
                    check(f"bmm {dtype} {precision} 2x302x{k}x1002 {name} [{path}; bmm: {T._bmm_path(x, y)}]",
                          on_path(x, y, path), x.double() @ y.double(), tol * k ** 0.5)
        torch.set_float32_matmul_precision(old_precision)


# The backward kernels (tiles::_map_backward, tiles::_zip_backward) on each elementwise path: contiguous
# with a vector tail, an expanded (stride-0) upstream gradient, a transposed input, a broadcast operand,
# and mixed dtypes (the converting path).
def backward_kernels():
    for dtype, tol in [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)]:
        for x in (rand(1037, dtype=dtype), rand(70, 33, dtype=dtype).t(), rand(7, 9, 11, dtype=dtype).permute(2, 0, 1)[::2]):
            g = rand(*x.shape, dtype=dtype)
            check(f"map_backward gelu {tuple(x.shape)}", T._map_backward(g, x, "gelu"),
                  torch.ops.aten.gelu_backward(g.double(), x.double()), tol)
            g0 = rand(1, dtype=dtype).expand(x.shape)
            check(f"map_backward tanh expanded {tuple(x.shape)}", T._map_backward(g0, x, "tanh"),
                  g0.double() * (1 - x.double() ** 2), tol)
        a, b = rand(33, 64, dtype=dtype), rand(64, dtype=dtype).abs() + 0.5
        g = rand(33, 64, dtype=dtype)
        check("zip_backward div b", T._zip_backward(g, a, b, "div", 1), -g.double() * a.double() / b.double() ** 2, 10 * tol)
        c = rand(64, 33, dtype=dtype).t()
        weight = (a > c).double() + 0.5 * (a == c).double()
        check("zip_backward max transposed", T._zip_backward(g, a, c, "max", 0), g.double() * weight, tol)
        bd = b.double()
        check("zip_backward pow mixed", T._zip_backward(g.float(), b, a.double(), "pow", 0),
              g.double() * a.double() * bd ** (a.double() - 1), 10 * tol)


# Backward of every op: the autograd formulas launch the kernels above in other layouts.
def autograd():
    x = rand(16, 24, requires_grad=True)
    w = rand(24, 8, requires_grad=True)
    nan_prefill(16 * 8)  # the bmm's output
    y = T.reduce(T.map(T.zip(T.bmm(x, w), rand(8), "add"), "gelu"), [0], "prod")
    T.reduce(y, None, "mean").backward()
    check("grad finite", torch.isfinite(x.grad).all().float().cpu(), torch.ones(()), 0)


SECTIONS = [elementwise, reductions, bmm_small, hopper, hopper_split_k, hopper_streaming, hopper_float32,
            hopper_float32_copied, hopper_ping_pong, mma_copy_widths, backward_kernels, autograd]

if __name__ == "__main__":
    # Sections by name (`python tools/sanitizer_driver.py hopper reductions`), all by default: racecheck
    # over the whole driver outlasts one device call, and a run per section prints what finished.
    names = {f.__name__: f for f in SECTIONS}
    if sys.argv[1:] == ["--list"]:
        print(" ".join(names))
        raise SystemExit(0)
    unknown = [n for n in sys.argv[1:] if n not in names]
    if unknown:
        raise SystemExit(f"sanitizer driver: unknown section(s) {unknown}; sections: {' '.join(names)}")
    for name in sys.argv[1:] or names:
        start = time.perf_counter()
        names[name]()
        if dev == "cuda":
            torch.cuda.synchronize()
        print(f"section {name}: {time.perf_counter() - start:.1f} s", flush=True)
    print("sanitizer driver:", "all results match" if not bad else f"MISMATCH in {bad}")
    raise SystemExit(1 if bad else 0)
