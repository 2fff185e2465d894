"""tiles.bmm against torch.matmul over the shapes and operand layouts that training uses (issue 25).

    python benchmarks/bmm_grid.py                   # the whole grid (~6 min on an H100)
    python benchmarks/bmm_grid.py --quick           # a subset (~2 min)
    python benchmarks/bmm_grid.py --prec bf16,fp16 -k linear --list   # filters; --list: count and stop
    python benchmarks/bmm_grid.py --device cpu      # dry run: the same code, tiny shapes, on the CPU
    python benchmarks/bmm_grid.py --report benchmarks/results/<gpu>.json --below-names slow.txt
                                                    # where each precision's gap lies; then re-time
    python benchmarks/bmm_grid.py --names slow.txt --rounds 3   # the one-round rows below 0.95x
    python benchmarks/bmm_grid.py --report benchmarks/results/<gpu>.json --tiles 128x96,128x160 --tile-names on.txt
                                                    # the rows on those tiles (after a change to their
                                                    # kernel's speed, not to the routes), for --names
    python benchmarks/bmm_grid.py --routes benchmarks/results/<gpu>.json --prec tf32 --changed-names moved.txt
                                                    # times nothing: the rows whose path or tile this build
                                                    # changes (after a plan's change), to re-time with --names

Run it as a script from the repository root, so `import torch_tiles` finds the installed build.

Precisions: bf16, fp16, tf32 (float32 under torch.set_float32_matmul_precision("high")), fp32
(float32 under "highest") and fp64, each timed with its precision set around both libraries' calls.
Layouts: NN, TN, NT, TT; a T operand is a transposed view of a contiguous tensor (a = randn(B, K, M)
.transpose(1, 2), b = randn(B, N, K).transpose(1, 2); for 2-D calls .t()).
Shapes (each as [B,] M x K @ K x N; the `source` field of a row says where a shape comes from):
- linear: width d in {768, 1024, 4096}, tokens T in {2048, 8192, 16384}, W of d x 4d and d x 3d: the
  forward x @ W (T x d @ d x h), the input gradient g @ W^T (T x h @ h x d) and the weight gradient
  x^T @ g (d x T @ T x h), each as a 2-D call and as a batch of one;
- attention: batch x heads BH in {96, 384}, sequence S in {512, 1024, 2048}, head size 64 and 128:
  q @ k^T and dp = do @ v^T (S x hd @ hd x S), p @ v and the gradients p^T @ do, ds @ k, ds^T @ q
  (S x S @ S x hd); the layouts cover which operands are transposed;
- small batched products: B=256 128x128x64, B=512 64x64x64;
- language-model heads: x @ W (T x d @ d x V), its input gradient g @ W^T and weight gradient x^T @ g,
  for (T, d, V) = (8192, 768, 50257) and (8192, 4096, 32000), 2-D calls;
- 32 shapes drawn by a seeded generator: B in [1, 8] (uniform; B=1 as a 3-D call), M, N, K
  log-uniform in [1, 6000];
- fp64: the shapes above of at most FP64_MAX_GFLOP GFLOP.
Identical (precision, layout, shape) cases are run once.

Each case is recorded in the results file (results_file.merge) as
    grid bmm <prec> <layout> B=<b> M=<m> N=<n> K=<k>
where B=- marks a 2-D call ([M, K] @ [K, N] -> [M, N]) and B=1 a 3-D call with a batch of one. A row has
tiles_ms, torch_ms, speedup (torch ms / tiles ms; speedup_rounds: the lowest and highest round's, rounds:
how many), path (torch.ops.tiles._bmm_path), tile (the output
tile of a Hopper or mma.sync kernel, torch.ops.tiles._bmm_tile; benchmarks/fit_plan_costs.py reads the
Hopper ones), max_err
(max |tiles - torch| / max |torch|) and fro_err (||tiles - torch|| / ||torch||), both against
torch.matmul's own output at the same precision, tflops (of tiles), source; memory-bound cases (flops
per byte below the precision's ridge point) also floor_ms: a device copy moving the case's bytes (operands
read + output written) timed the same way, and floor_speedup = torch ms / floor ms, the most a kernel
could gain. A case that raises (e.g. out of memory) is recorded with `failed` and the run goes on.

Times are triton.testing.do_bench medians (L2 flushed before each run) with a short warmup and
repetition (--warmup / --rep ms), tiles and torch in --rounds rounds that alternate which goes first
(run.py's time_pair). Results are merged every few cases, so a run cut short keeps what it measured;
--budget-s stops starting new cases after that many seconds.
"""
import argparse
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402
from run import time_pair  # noqa: E402  (alternating rounds)

T = torch.ops.tiles
HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (dtype, float32 matmul precision)
PRECISIONS = {
    "bf16": (torch.bfloat16, "highest"),
    "fp16": (torch.float16, "highest"),
    "tf32": (torch.float32, "high"),
    "fp32": (torch.float32, "highest"),
    "fp64": (torch.float64, "highest"),
}
LAYOUTS = ("NN", "TN", "NT", "TT")
FP64_MAX_GFLOP = 40.0          # fp64 runs the shapes of at most this many GFLOP (~1 ms in DMMA)
RANDOM_SEED, RANDOM_COUNT = 25, 32
WIDTHS, TOKENS = (768, 1024, 4096), (2048, 8192, 16384)


@dataclass(frozen=True)
class Shape:
    b: Optional[int]  # None: a 2-D call
    m: int
    n: int
    k: int
    source: str
    quick: bool = False

    @property
    def batch(self):
        return 1 if self.b is None else self.b

    def flops(self):
        return 2 * self.batch * self.m * self.n * self.k

    def key(self):
        return (self.b, self.m, self.n, self.k)


def linear_shapes():
    out = []
    for d in WIDTHS:
        for tokens in TOKENS:
            for mult in (4, 3):
                h = mult * d
                quick = tokens == 8192 and d in (768, 4096)
                tag = f"linear d={d} T={tokens} W={d}x{h}"
                for b in (None, 1):
                    q = quick and b is None
                    out.append(Shape(b, tokens, h, d, f"{tag} fwd x@W", q))
                    out.append(Shape(b, tokens, d, h, f"{tag} dgrad g@W^T", q))
                    out.append(Shape(b, d, h, tokens, f"{tag} wgrad x^T@g", q))
    return out


def attention_shapes():
    out = []
    for bh in (96, 384):
        for s in (512, 1024, 2048):
            for hd in (64, 128):
                tag = f"attention BH={bh} S={s} hd={hd}"
                quick = bh == 96
                out.append(Shape(bh, s, s, hd, f"{tag} q@k^T, do@v^T", quick))
                out.append(Shape(bh, s, hd, s, f"{tag} p@v, p^T@do, ds@k, ds^T@q", quick))
    return out


def small_batched_shapes():
    return [Shape(256, 128, 128, 64, "small batched", True), Shape(512, 64, 64, 64, "small batched", True)]


def lm_head_shapes():
    out = []
    for tokens, d, vocab in ((8192, 768, 50257), (8192, 4096, 32000)):
        tag = f"lm-head T={tokens} d={d} V={vocab}"
        quick = vocab == 50257
        out.append(Shape(None, tokens, vocab, d, f"{tag} fwd x@W", quick))
        out.append(Shape(None, tokens, d, vocab, f"{tag} dgrad g@W^T", quick))
        out.append(Shape(None, d, vocab, tokens, f"{tag} wgrad x^T@g", quick))
    return out


def random_shapes(seed=RANDOM_SEED, count=RANDOM_COUNT):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        b = rng.randint(1, 8)
        m, n, k = (int(round(math.exp(rng.uniform(0.0, math.log(6000))))) for _ in range(3))
        out.append(Shape(b, m, n, k, f"random #{i} (seed {seed})", i < 16))
    return out


def all_shapes():
    return linear_shapes() + attention_shapes() + small_batched_shapes() + lm_head_shapes() + random_shapes()


@dataclass
class Case:
    prec: str
    layout: str
    shape: Shape

    @property
    def name(self):
        s = self.shape
        return f"grid bmm {self.prec} {self.layout} B={'-' if s.b is None else s.b} M={s.m} N={s.n} K={s.k}"


def grid_cases(precs=tuple(PRECISIONS), quick=False, k=""):
    """The deduplicated cases, precision by precision, in the order of all_shapes() and LAYOUTS."""
    cases, seen = [], set()
    for prec in precs:
        for shape in all_shapes():
            if quick and not shape.quick:
                continue
            if prec == "fp64" and shape.flops() > FP64_MAX_GFLOP * 1e9:
                continue
            for layout in LAYOUTS:
                case = Case(prec, layout, shape)
                if (prec, layout, shape.key()) in seen or (k and k not in case.name and k not in shape.source):
                    continue
                seen.add((prec, layout, shape.key()))
                cases.append(case)
    return cases


# ---- time estimate (H100, for the up-front print and --budget-s; not a measurement) ----------------

# TFLOP/s guesses for (tiles, torch); tiles' "general" kernel (sizes or strides off the tensor-core
# paths) and tf32/fp32 with `a` transposed are the slow spots issue 25 lists
_RATE = {"bf16": (550, 600), "fp16": (550, 600), "tf32": (280, 300), "fp32": (85, 50), "fp64": (45, 50)}
_GENERAL_RATE = {"bf16": 60, "fp16": 60, "tf32": 25, "fp32": 20, "fp64": 15}
_ITEMSIZE = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4, "fp64": 8}
_RIDGE = {"bf16": 250, "fp16": 250, "tf32": 120, "fp32": 20, "fp64": 20}  # flops per byte


def case_bytes(case):
    s = case.shape
    return _ITEMSIZE[case.prec] * s.batch * (s.m * s.k + s.k * s.n + s.m * s.n)


def memory_bound(case):
    return case.shape.flops() / case_bytes(case) < _RIDGE[case.prec]


def _aligned(case):
    s, item = case.shape, _ITEMSIZE[case.prec]
    a_lead = s.m if case.layout[0] == "T" else s.k
    b_lead = s.k if case.layout[1] == "T" else s.n
    return (a_lead * item) % 16 == 0 and (b_lead * item) % 16 == 0


def estimate_s(case, warmup, rep, rounds):
    s = case.shape
    flops, moved = s.flops(), case_bytes(case)
    tiles_rate, torch_rate = _RATE[case.prec]
    if not _aligned(case):
        tiles_rate = _GENERAL_RATE[case.prec]
    elif case.layout[0] == "T" and case.prec in ("tf32", "fp32"):
        tiles_rate *= 0.35 if case.prec == "tf32" else 0.45
    floor = moved / 2.5e9 + 0.008  # ms
    t_tiles, t_torch = max(flops / tiles_rate / 1e9, floor), max(flops / torch_rate / 1e9, floor)

    def bench(t):  # do_bench: 1 call, 5 to estimate, warmup, rep (each rep after a ~0.1 ms L2 flush)
        return 6 * t + max(warmup, t) + max(rep, t + 0.1)
    total = rounds * (bench(t_tiles) + bench(t_torch)) + 2 * (t_tiles + t_torch)
    if memory_bound(case):
        total += bench(moved / 2.5e9)
    return (total + 6 + moved / 1e9) / 1e3  # + launch / allocation / error-check overhead


# ---- running a case -----------------------------------------------------------------------------

class Timer:
    def __init__(self, device, warmup, rep):
        self.device, self.warmup, self.rep = device, warmup, rep

    def __call__(self, fn):
        if self.device == "cuda":
            from triton.testing import do_bench
            return do_bench(fn, warmup=self.warmup, rep=self.rep, return_mode="median")
        fn()  # CPU dry run: a perf_counter median of a few calls
        times = []
        for _ in range(3):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)


def operand(batch, rows, cols, transposed, dtype, device, fill=torch.randn):
    """[batch, rows, cols] (batch None: [rows, cols]); transposed: the transpose of a contiguous tensor.
    `fill` makes the tensor (torch.empty where only sizes and strides matter)."""
    lead = () if batch is None else (batch,)
    if transposed:
        return fill(*lead, cols, rows, device=device, dtype=dtype).transpose(-1, -2)
    return fill(*lead, rows, cols, device=device, dtype=dtype)


def errors(out, ref):
    """(max |out - ref| / max |ref|, ||out - ref|| / ||ref||), in float32 (float64 for float64)."""
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    out, ref = out.to(work), ref.to(work)
    if ref.numel() == 0:
        return 0.0, 0.0
    diff = (out - ref).abs_()
    scale_max = ref.abs().max().item() or 1.0
    scale_fro = torch.linalg.vector_norm(ref).item() or 1.0
    return diff.max().item() / scale_max, torch.linalg.vector_norm(diff).item() / scale_fro


class Floors:
    """floor_ms per (dtype, bytes moved): a device copy of half the bytes into the other half."""

    def __init__(self, bench, device):
        self.bench, self.device, self.cache = bench, device, {}

    def __call__(self, moved):
        if moved not in self.cache:
            n = (moved + 1) // 2
            src = torch.empty(n, device=self.device, dtype=torch.uint8).random_(0, 255)
            dst = torch.empty_like(src)
            self.cache[moved] = self.bench(lambda: dst.copy_(src))
            del src, dst
        return self.cache[moved]


def run_case(case, bench, floors, device, rounds):
    dtype, precision = PRECISIONS[case.prec]
    s = case.shape
    a = operand(s.b, s.m, s.k, case.layout[0] == "T", dtype, device)
    b = operand(s.b, s.k, s.n, case.layout[1] == "T", dtype, device)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)  # both libraries time under the case's precision
    try:
        out, ref = T.bmm(a, b), torch.matmul(a, b)
        if out.shape != ref.shape:
            raise RuntimeError(f"tiles.bmm gave {list(out.shape)}, torch.matmul {list(ref.shape)}")
        max_err, fro_err = errors(out, ref)
        del out, ref
        tiles_ms, torch_ms, (low, high) = time_pair(lambda: T.bmm(a, b), lambda: torch.matmul(a, b), rounds, bench)
        path, tile = T._bmm_path(a, b), T._bmm_tile(a, b)
    finally:
        torch.set_float32_matmul_precision(previous)
    row = {"name": case.name, "tiles_ms": round(tiles_ms, 5), "torch_ms": round(torch_ms, 5),
           "speedup": round(torch_ms / tiles_ms, 3), "speedup_rounds": [round(low, 3), round(high, 3)],
           "rounds": rounds, "path": path, "max_err": float(f"{max_err:.3g}"), "fro_err": float(f"{fro_err:.3g}"),
           "tflops": round(s.flops() / tiles_ms / 1e9, 1), "source": s.source}
    if tile:
        row["tile"] = tile
    del a, b
    if memory_bound(case) and floors is not None:
        floor_ms = floors(case_bytes(case))
        row.update(floor_ms=round(floor_ms, 5), floor_speedup=round(torch_ms / floor_ms, 3))
    return row


def cpu_shape(shape):
    """A dry run's stand-in: every dim divided by 128 (rounded up), the batch at most 3."""
    def small(x):
        return -(-x // 128)
    return Shape(None if shape.b is None else min(shape.b, 3), small(shape.m), small(shape.n), small(shape.k),
                 shape.source, shape.quick)


# ---- summary ------------------------------------------------------------------------------------

def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(rows, precs):
    """Per precision: cases, geomean, minimum (and which), count below 0.95x (and 0.9x), failures; then
    the geomean per precision and layout."""
    lines = [f"{'prec':<5} {'cases':>5} {'geomean':>8} {'min':>7} {'<0.95x':>7} {'<0.9x':>6} {'failed':>6}  worst case"]
    by_prec = {}
    for row in rows:
        by_prec.setdefault(row["name"].split()[2], []).append(row)
    for prec in precs:
        group = by_prec.get(prec, [])
        ok = [r for r in group if "speedup" in r]
        if not group:
            continue
        failed = len(group) - len(ok)
        if not ok:
            lines.append(f"{prec:<5} {len(group):>5} {'-':>8} {'-':>7} {'-':>7} {'-':>6} {failed:>6}")
            continue
        worst = min(ok, key=lambda r: r["speedup"])
        below = sum(r["speedup"] < 0.95 for r in ok)
        below90 = sum(r["speedup"] < 0.9 for r in ok)
        lines.append(f"{prec:<5} {len(group):>5} {geomean([r['speedup'] for r in ok]):>7.3f}x "
                     f"{worst['speedup']:>6.3f}x {below:>7} {below90:>6} {failed:>6}  "
                     f"{worst['name'][len('grid bmm '):]} [{worst['path']}] ({worst['source']})")
    lines.append("")
    lines.append(f"{'geomean':<8}" + "".join(f"{layout:>8}" for layout in LAYOUTS))
    for prec in precs:
        ok = [r for r in by_prec.get(prec, []) if "speedup" in r]
        if ok:
            lines.append(f"{prec:<8}" + "".join(
                f"{geomean([r['speedup'] for r in ok if r['name'].split()[3] == layout]):>7.3f}x"
                for layout in LAYOUTS))
    return "\n".join(lines)


def path_family(path):
    """A path name without what only says how its operands are copied (`unaligned 4-byte` -> `unaligned`)
    or, for the general kernel, why it was taken: the kernels a breakdown groups rows by."""
    return re.sub(r" \d+-byte", "", path.split(":")[0])


def breakdown(rows, precs, key):
    """Per precision, the rows grouped by `key(row)`: count, geomean, count below 0.95x, and the group's
    share of the precision's log geomean (how far the whole geomean would move were the group at 1.0x),
    largest loss first: where a precision's gap lies."""
    lines = []
    for prec in precs:
        ok = [r for r in rows if r["name"].split()[2] == prec and "speedup" in r]
        if not ok:
            continue
        lines.append(f"{prec} ({len(ok)} rows, geomean {geomean([r['speedup'] for r in ok]):.3f}x)")
        groups = {}
        for r in ok:
            groups.setdefault(key(r), []).append(math.log(r["speedup"]))
        for name, logs in sorted(groups.items(), key=lambda kv: sum(kv[1])):
            below = sum(v < math.log(0.95) for v in logs)
            lines.append(f"  {name:<42} {len(logs):>4} rows {math.exp(sum(logs) / len(logs)):>7.3f}x "
                         f"{below:>4} below 0.95x  share {sum(logs) / len(ok):+.4f}")
    return "\n".join(lines)


def timing_rounds(row):
    """How many rounds timed a row: recorded since the twelfth session; before, a row whose lowest and
    highest round agree to the digit was timed once."""
    if "rounds" in row:
        return row["rounds"]
    low, high = row.get("speedup_rounds", (None, None))
    return 1 if low == high else 2


def read_grid_rows(path):
    """A results file's header (device, torch, ...) and its grid rows by name."""
    import json
    with open(path) as f:
        data = json.load(f)
    return data, {r["name"]: r for r in data["cases"] if r["name"].startswith("grid bmm ")}


def report(path, precs, names_out=None, tiles=(), tile_names_out=None):
    """Prints the summary of a results file's grid rows and where each precision's gap lies (by kernel
    path and by shape source); with `names_out`, writes the names of the rows below 0.95x that were timed
    in a single round (the ones a re-timing with --rounds 3 --names would settle); with `tile_names_out`,
    the names of the rows of `precs` whose tile is one of `tiles`. Returns the one-round names."""
    data, by_name = read_grid_rows(path)
    rows = list(by_name.values())
    print(f"{path}: {len(rows)} grid rows ({data.get('device', '?')}, torch {data.get('torch', '?')})")
    print(summarize(rows, precs))
    print("\nby path")
    print(breakdown(rows, precs, lambda r: path_family(r.get("path", "?"))))
    print("\nby shape source")
    print(breakdown(rows, precs, lambda r: r.get("source", "?").split()[0]))
    one_round = [r["name"] for r in rows if r["name"].split()[2] in precs and "speedup" in r
                 and r["speedup"] < 0.95 and timing_rounds(r) < 2]
    print(f"\n{len(one_round)} rows below 0.95x were timed in one round")
    if names_out:
        with open(names_out, "w") as f:
            f.write("".join(name + "\n" for name in one_round))
        print(f"their names: {names_out}")
    if tile_names_out:
        on_tiles = [r["name"] for r in rows if r["name"].split()[2] in precs and r.get("tile") in tiles]
        with open(tile_names_out, "w") as f:
            f.write("".join(name + "\n" for name in on_tiles))
        print(f"{len(on_tiles)} rows on tiles {', '.join(tiles)}: {tile_names_out}")
    return one_round


def compare(new_path, old_path, precs, commit=None, movers=12):
    """A re-timing graded against earlier records: the grid rows of the results file `new_path` that were
    timed again (their commit differs from their row in `old_path`, or, with `commit`, starts with it)
    against their rows there. Per precision and layout: the rows, the geomean of tiles' time new / old,
    how many moved by more than 10% each way, and the speedups' geomean old -> new; then the `movers` rows
    that slowed most and sped up most. Torch's own times drift a few percent between runs, so the time
    ratio says more about a kernel change than the speedup. Returns [(name, old row, new row)]."""
    (_, new), (_, old) = read_grid_rows(new_path), read_grid_rows(old_path)
    pairs = []
    for name, row in new.items():
        before = old.get(name)
        if before is None or "tiles_ms" not in row or "tiles_ms" not in before or name.split()[2] not in precs:
            continue
        retimed = (str(row.get("commit", "")).startswith(commit) if commit
                   else row.get("commit") != before.get("commit"))
        if retimed:
            pairs.append((name, before, row))
    which = f"at {commit}" if commit else "whose commit changed"
    print(f"{new_path} against {old_path}: {len(pairs)} grid rows {which}")
    print(f"{'prec':<5} {'layout':<6} {'rows':>5} {'time new/old':>13} {'<0.9x':>6} {'>1.1x':>6}  speedup old -> new")
    ratio = {name: r["tiles_ms"] / b["tiles_ms"] for name, b, r in pairs}
    for prec in precs:
        for layout in LAYOUTS:
            group = [(n, b, r) for n, b, r in pairs if n.split()[2] == prec and n.split()[3] == layout]
            if not group:
                continue
            times = [ratio[n] for n, _, _ in group]
            print(f"{prec:<5} {layout:<6} {len(group):>5} {geomean(times):>12.3f}x {sum(t < 0.9 for t in times):>6} "
                  f"{sum(t > 1.1 for t in times):>6}  {geomean([b['speedup'] for _, b, _ in group]):.3f}x -> "
                  f"{geomean([r['speedup'] for _, _, r in group]):.3f}x")
    ranked = sorted(pairs, key=lambda p: ratio[p[0]])
    for title, rows in (("slowed most", ranked[::-1][:movers]), ("sped up most", ranked[:movers])):
        print(f"\n{title} (time new / old, tiles us old -> new, speedup old -> new, path)")
        for name, b, r in rows:
            print(f"  {ratio[name]:.3f}  {name[len('grid bmm '):]:<42} {b['tiles_ms'] * 1e3:8.1f} -> "
                  f"{r['tiles_ms'] * 1e3:8.1f}  {b['speedup']:.3f}x -> {r['speedup']:.3f}x  {r.get('path', '?')}")
    return pairs


def operands_for_route(case, device):
    """Uninitialized operands of the case's shape and layout: only their sizes and strides matter to the
    route, and allocating them unfilled keeps the largest (a language-model head) quick."""
    dtype, s = PRECISIONS[case.prec][0], case.shape
    return (operand(s.b, s.m, s.k, case.layout[0] == "T", dtype, device, fill=torch.empty),
            operand(s.b, s.k, s.n, case.layout[1] == "T", dtype, device, fill=torch.empty))


def changed_routes(results_path, cases, device, names_out=None):
    """The cases whose path or tile on this build (torch.ops.tiles._bmm_path / _bmm_tile under the case's
    precision) differ from their rows in a results file; cases without a row there are left out. Prints
    each, old -> new; with `names_out`, writes their names. Returns [(name, (old path, tile), (new path,
    tile))]. A missing tile is read as none in both (rows of paths without tiles have no `tile`)."""
    _, rows = read_grid_rows(results_path)
    changed = []
    previous = torch.get_float32_matmul_precision()
    try:
        for case in cases:
            row = rows.get(case.name)
            if row is None or "path" not in row:
                continue
            a, b = operands_for_route(case, device)
            torch.set_float32_matmul_precision(PRECISIONS[case.prec][1])
            new = (T._bmm_path(a, b), T._bmm_tile(a, b) or None)
            old = (row["path"], row.get("tile") or None)
            if new != old:
                changed.append((case.name, old, new))
            del a, b
    finally:
        torch.set_float32_matmul_precision(previous)
    for name, old, new in changed:
        speedup = rows[name].get("speedup")
        print(f"{name[len('grid bmm '):]:<48} {old[0]} {old[1] or ''} -> {new[0]} {new[1] or ''}"
              + (f"  (was {speedup:.3f}x)" if speedup is not None else ""))
    print(f"{len(changed)} of {len(cases)} cases change path or tile against {results_path}")
    if names_out:
        with open(names_out, "w") as f:
            f.write("".join(name + "\n" for name, _, _ in changed))
        print(f"their names: {names_out}")
    return changed


def slowest(rows, count):
    ok = sorted((r for r in rows if "speedup" in r), key=lambda r: r["speedup"])[:count]
    lines = [f"{'slowest cases':<58} {'tiles ms':>9} {'torch ms':>9} {'speedup':>8} {'floor ms':>9}  path / source"]
    for r in ok:
        floor = f"{r['floor_ms']:>9.4f}" if "floor_ms" in r else f"{'':>9}"
        lines.append(f"{r['name'][len('grid bmm '):]:<58} {r['tiles_ms']:>9.4f} {r['torch_ms']:>9.4f} "
                     f"{r['speedup']:>7.3f}x {floor}  {r['path']} / {r['source']}")
    return "\n".join(lines)


# ---- main ---------------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a subset of the shapes (~2 min on an H100)")
    parser.add_argument("--prec", default=",".join(PRECISIONS),
                        help="comma-separated precisions (default: all of %(default)s)")
    parser.add_argument("-k", default="", help="only cases whose name or source contains this")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated layouts")
    parser.add_argument("--names", default=None,
                        help="a file of case names, one per line: only those (e.g. the rows a change moves)")
    parser.add_argument("--warmup", type=float, default=3, help="do_bench warmup, ms")
    parser.add_argument("--rep", type=float, default=15, help="do_bench repetition, ms")
    parser.add_argument("--rounds", type=int, default=1, help="alternating timing rounds per case")
    parser.add_argument("--no-floor", action="store_true", help="skip the copy floors of memory-bound cases")
    parser.add_argument("--budget-s", type=float, default=0, help="start no case after this many seconds (0: none)")
    parser.add_argument("--limit", type=int, default=0, help="run only the first N cases (0: all)")
    parser.add_argument("--list", action="store_true", help="print the case count and time estimate, then stop")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: a dry run of the same code on tiny shapes with a perf_counter timer")
    parser.add_argument("--out", default=None,
                        help="results folder (default benchmarks/results; a temporary folder for --device cpu)")
    parser.add_argument("--slowest", type=int, default=15, help="list this many slowest cases at the end")
    parser.add_argument("--report", metavar="RESULTS", default=None,
                        help="run nothing: summarize a results file's grid rows, by kernel path and by shape source")
    parser.add_argument("--below-names", metavar="FILE", default=None,
                        help="with --report: write the names of the rows below 0.95x timed in one round")
    parser.add_argument("--tiles", default="", help="with --report and --tile-names: comma-separated tiles, "
                        "as _bmm_tile names them (128x96)")
    parser.add_argument("--tile-names", metavar="FILE", default=None,
                        help="with --report: write the names of the rows on --tiles")
    parser.add_argument("--against", metavar="OLD_RESULTS", default=None,
                        help="with --report: grade its re-timed rows (commit changed, or --commit) against "
                             "their rows in OLD_RESULTS, by precision and layout, and list the largest movers")
    parser.add_argument("--commit", default=None, help="with --against: only the rows whose commit starts with this")
    parser.add_argument("--routes", metavar="RESULTS", default=None,
                        help="time nothing: list the selected cases whose path or tile on this build differ "
                             "from their rows in RESULTS")
    parser.add_argument("--changed-names", metavar="FILE", default=None,
                        help="with --routes: write those cases' names (for --names)")
    args = parser.parse_args(argv)
    args.precs = [p.strip() for p in args.prec.split(",") if p.strip()]
    unknown = [p for p in args.precs if p not in PRECISIONS]
    if unknown:
        parser.error(f"unknown precision(s) {unknown}; choose from {list(PRECISIONS)}")
    args.layout_list = [x.strip().upper() for x in args.layouts.split(",") if x.strip()]
    if any(x not in LAYOUTS for x in args.layout_list):
        parser.error(f"layouts are {LAYOUTS}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        tiles = tuple(t.strip() for t in args.tiles.split(",") if t.strip())
        if args.tile_names and not tiles:
            sys.exit("bmm_grid.py: --tile-names needs --tiles")
        if args.against:
            return compare(args.report, args.against, args.precs, args.commit)
        report(args.report, args.precs, args.below_names, tiles, args.tile_names)
        return []
    cases = [c for c in grid_cases(args.precs, args.quick, args.k) if c.layout in args.layout_list]
    if args.names:
        with open(args.names) as f:
            wanted = {line.strip() for line in f if line.strip()}
        cases = [c for c in cases if c.name in wanted]
    if args.limit:
        cases = cases[:args.limit]
    est = [estimate_s(c, args.warmup, args.rep, args.rounds) for c in cases]
    per_prec = {p: sum(c.prec == p for c in cases) for p in args.precs}
    print(f"{len(cases)} cases (" + ", ".join(f"{p} {n}" for p, n in per_prec.items()) + "); estimated "
          f"{sum(est):.0f} s on an H100 (" + ", ".join(
              f"{p} {sum(e for c, e in zip(cases, est) if c.prec == p):.0f} s" for p in args.precs) + ")",
          flush=True)
    if args.list:
        return []
    if args.routes:  # the names are the full-size cases' own, so on the CPU too (unfilled operands)
        return changed_routes(args.routes, cases, args.device, args.changed_names)

    if args.device == "cuda":
        if not torch.cuda.is_available() or not torch_tiles.built_with_cuda():
            sys.exit("bmm_grid.py needs a GPU and a CUDA build of torch_tiles (or --device cpu for a dry run)")
        device_name = torch.cuda.get_device_name()
        out_dir = args.out or results_file.RESULTS_DIR
    else:
        cases = [Case(c.prec, c.layout, cpu_shape(c.shape)) for c in cases]
        device_name = "cpu"
        torch.set_num_threads(1)  # tiny shapes: more threads only wait on each other
        out_dir = args.out or tempfile.mkdtemp(prefix="bmm-grid-")
    print(f"{device_name} | torch {torch.__version__} | warmup {args.warmup} ms, rep {args.rep} ms, "
          f"{args.rounds} round(s)", flush=True)

    bench = Timer(args.device, args.warmup, args.rep)
    floors = None if args.no_floor else Floors(bench, args.device)
    rows, pending, start, last_merge = [], [], time.perf_counter(), time.perf_counter()
    path = results_file.path_for(device_name, out_dir)
    skipped = failures = 0
    last_print = start
    for i, case in enumerate(cases):
        elapsed = time.perf_counter() - start
        if args.budget_s and elapsed > args.budget_s:
            skipped = len(cases) - i
            print(f"budget of {args.budget_s:g} s spent: {skipped} cases not run", flush=True)
            break
        try:
            row = run_case(case, bench, floors, args.device, args.rounds)
        except Exception as e:  # noqa: BLE001  (an OOM or a kernel error is a result too)
            row = {"name": case.name, "failed": f"{type(e).__name__}: {str(e)[:300]}", "source": case.shape.source}
            failures += 1
            if failures <= 10:
                print(f"FAILED {case.name}: {row['failed']}" + (" (further failures are not printed)"
                                                                 if failures == 10 else ""), flush=True)
            if args.device == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
        pending.append(row)
        if args.device == "cuda" and case.shape.flops() > 1e11:
            torch.cuda.empty_cache()
        if time.perf_counter() - last_merge > 20 or i == len(cases) - 1:
            path = results_file.merge(device_name, pending, out_dir=out_dir)
            pending, last_merge = [], time.perf_counter()
        if time.perf_counter() - last_print > 30:
            last_print = time.perf_counter()
            print(f"  {i + 1}/{len(cases)} cases ({case.prec}), {last_print - start:.0f} s "
                  f"(estimated {sum(est[:i + 1]):.0f} s of {sum(est):.0f})", flush=True)
    if pending:
        path = results_file.merge(device_name, pending, out_dir=out_dir)
    total = time.perf_counter() - start
    print(f"\n{len(rows)} cases in {total:.0f} s (estimated {sum(est[:len(rows)]):.0f} s)"
          + (f"; {failures} failed" if failures else "") + (f"; {skipped} not run (budget)" if skipped else ""))
    print(summarize(rows, args.precs))
    if args.slowest:
        print()
        print(slowest(rows, args.slowest))
    print(f"\nwrote {path}" if rows else "\nno case run: nothing written")
    return rows


if __name__ == "__main__":
    main()
