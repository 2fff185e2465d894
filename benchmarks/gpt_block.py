"""The training step of a GPT block with every matmul on tiles, against the same block on torch.matmul.

    python benchmarks/gpt_block.py                  # bf16, tf32, fp32 (~1 min on an H100)
    python benchmarks/gpt_block.py --prec bf16
    python benchmarks/gpt_block.py --device cpu     # dry run: the same code, a tiny block, on the CPU

Run it as a script from the repository root, so `import torch_tiles` finds the installed build.

The block is pre-LN: h = x + attn(ln1(x)), y = h + mlp(ln2(h)), with causal multi-head attention
written with explicit matmuls (q @ k^T, scale, causal mask, softmax, p @ v; no
scaled_dot_product_attention) and an MLP of d -> 4d -> GELU -> d; weights are stored [in, out] and every
linear is x @ W + b. The two variants run the same code on the same weights and inputs and differ only
in the matmul: torch_tiles.matmul (tiles::bmm, with its autograd formulas for the backward) or
torch.matmul; layer norms, softmax, GELU, masking, bias adds, residuals and the copies that split and
merge the heads are native torch in both. q, k, v are made contiguous [B, H, S, hd] after the qkv
projection, so k^T is a transposed view.

A step is forward + backward (out.backward(grad) with a fixed random upstream gradient, input and
parameter gradients, grads set to None before each step); no optimizer. Precisions: bf16 (weights and
activations bfloat16 in both variants, no autocast), tf32 (float32 under
torch.set_float32_matmul_precision("high")), fp32 (float32 under "highest"). Default size: d=768, 12
heads, batch 8 x 1024 tokens (GPT-2 small's block).

Timing: CUDA events around --steps steps (the time per step), --windows windows per variant after
--warmup steps each, alternating which variant goes first; the median window is reported with the
lowest and highest per-window-pair speedup. speedup = native ms / tiles ms. Before timing, the outputs and
gradients of the two variants are compared: the largest max |tiles - native| / max |native| over the
output and every gradient is printed and recorded (max_diff), with `agree` against a tolerance per
precision. Rows `train gpt-block <prec>` are merged into the results file (results_file.merge); a
precision that raises is recorded with `failed` and the run goes on.
"""
import argparse
import math
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import torch_tiles

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402

PRECISIONS = {  # name -> (dtype, float32 matmul precision, tolerance of max_diff)
    "bf16": (torch.bfloat16, "highest", 5e-2),
    "tf32": (torch.float32, "high", 1e-2),
    "fp32": (torch.float32, "highest", 1e-4),
}
MATMULS = {"tiles": torch_tiles.matmul, "native": torch.matmul}


def make_params(d, dtype, device, seed=0):
    """GPT-2-style initialisation (normal std 0.02, zero biases, unit LayerNorm weights), [in, out] weights."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def normal(*shape, std=0.02):
        return (torch.randn(*shape, generator=g) * std).to(device=device, dtype=dtype)

    def const(value, *shape):
        return torch.full(shape, value, dtype=dtype, device=device)
    params = {
        "ln1_w": const(1.0, d), "ln1_b": const(0.0, d),
        "w_qkv": normal(d, 3 * d), "b_qkv": const(0.0, 3 * d),
        "w_o": normal(d, d), "b_o": const(0.0, d),
        "ln2_w": const(1.0, d), "ln2_b": const(0.0, d),
        "w_1": normal(d, 4 * d), "b_1": const(0.0, 4 * d),
        "w_2": normal(4 * d, d), "b_2": const(0.0, d),
    }
    for p in params.values():
        p.requires_grad_(True)
    return params


def block(x, p, heads, mask, mm):
    """Pre-LN GPT block on x [B, S, d]; `mm` is the matmul (torch_tiles.matmul or torch.matmul)."""
    bsz, seq, d = x.shape
    hd = d // heads
    a = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
    qkv = mm(a, p["w_qkv"]) + p["b_qkv"]                                      # [B, S, 3d]
    qkv = qkv.view(bsz, seq, 3, heads, hd).permute(2, 0, 3, 1, 4).contiguous()  # [3, B, H, S, hd]
    q, k, v = qkv[0], qkv[1], qkv[2]
    att = mm(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))                  # [B, H, S, S]
    att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
    y = mm(att, v)                                                            # [B, H, S, hd]
    y = y.transpose(1, 2).reshape(bsz, seq, d)
    h = x + (mm(y, p["w_o"]) + p["b_o"])
    m = F.layer_norm(h, (d,), p["ln2_w"], p["ln2_b"])
    m = F.gelu(mm(m, p["w_1"]) + p["b_1"])
    return h + (mm(m, p["w_2"]) + p["b_2"])


class Setup:
    """One precision's inputs, weights, mask and upstream gradient, shared by both variants."""

    def __init__(self, prec, d, heads, batch, seq, device, seed=0):
        dtype = PRECISIONS[prec][0]
        self.heads = heads
        self.params = make_params(d, dtype, device, seed)
        g = torch.Generator(device="cpu").manual_seed(seed + 1)
        self.x = torch.randn(batch, seq, d, generator=g).to(device=device, dtype=dtype).requires_grad_(True)
        self.grad = torch.randn(batch, seq, d, generator=g).to(device=device, dtype=dtype)
        self.mask = torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1)  # True above the diagonal

    def leaves(self):
        return [self.x, *self.params.values()]

    def step(self, variant):
        for t in self.leaves():
            t.grad = None
        out = block(self.x, self.params, self.heads, self.mask, MATMULS[variant])
        out.backward(self.grad)
        return out

    def outputs(self, variant):
        """The output and every gradient (input, then parameters) of one step, detached copies."""
        out = self.step(variant).detach().clone()
        grads = [t.grad.detach().clone() for t in self.leaves()]
        return [("out", out), ("x.grad", grads[0])] + [(f"{n}.grad", g) for n, g in zip(self.params, grads[1:])]


def rel_diff(a, b):
    a, b = a.double(), b.double()
    scale = b.abs().max().item() or 1.0
    return (a - b).abs().max().item() / scale


class Clock:
    """ms per call of fn over a window of calls: CUDA events on the GPU, perf_counter on the CPU."""

    def __init__(self, device):
        self.device = device

    def window(self, fn, steps):
        if self.device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / steps
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - start) * 1e3 / steps


def run_precision(prec, args, clock):
    dtype, precision, tol = PRECISIONS[prec]
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)  # both variants run under the case's precision
    try:
        setup = Setup(prec, args.d, args.heads, args.batch, args.seq, args.device)
        tiles_out = setup.outputs("tiles")
        native_out = setup.outputs("native")
        diffs = {name: rel_diff(t, n) for (name, t), (_, n) in zip(tiles_out, native_out)}
        del tiles_out, native_out
        worst = max(diffs, key=diffs.get)
        for variant in ("tiles", "native"):
            for _ in range(args.warmup):
                setup.step(variant)
        times = {"tiles": [], "native": []}
        for w in range(args.windows):
            order = ("tiles", "native") if w % 2 == 0 else ("native", "tiles")
            for variant in order:
                times[variant].append(clock.window(lambda: setup.step(variant), args.steps))
    finally:
        torch.set_float32_matmul_precision(previous)
    tiles_ms, native_ms = statistics.median(times["tiles"]), statistics.median(times["native"])
    pairs = [n / t for t, n in zip(times["tiles"], times["native"])]
    row = {"name": f"train gpt-block {prec}", "tiles_ms": round(tiles_ms, 4), "torch_ms": round(native_ms, 4),
           "speedup": round(native_ms / tiles_ms, 3), "speedup_rounds": [round(min(pairs), 3), round(max(pairs), 3)],
           "unit": "ms/step", "max_diff": float(f"{diffs[worst]:.3g}"), "max_diff_at": worst,
           "tolerance": tol, "agree": diffs[worst] <= tol,
           "config": {"d": args.d, "heads": args.heads, "batch": args.batch, "seq": args.seq,
                      "dtype": str(dtype).replace("torch.", ""), "float32_matmul_precision": precision,
                      "step": "forward + backward, no optimizer", "steps_per_window": args.steps,
                      "windows": args.windows}}
    print(f"{row['name']:<22} tiles {tiles_ms:9.3f} ms  native {native_ms:9.3f} ms  speedup {row['speedup']:.3f}x "
          f"({row['speedup_rounds'][0]:.3f}-{row['speedup_rounds'][1]:.3f})  max diff {diffs[worst]:.2e} "
          f"at {worst} ({'within' if row['agree'] else 'ABOVE'} {tol:g})", flush=True)
    if args.verbose or not row["agree"]:
        for name, value in diffs.items():
            print(f"    {name:<12} {value:.2e}")
    return row


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prec", default=",".join(PRECISIONS), help="comma-separated precisions (%(default)s)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: a dry run on a tiny block with a perf_counter clock")
    parser.add_argument("--d", type=int, default=None, help="model width (default 768; cpu 64)")
    parser.add_argument("--heads", type=int, default=None, help="attention heads (default 12; cpu 4)")
    parser.add_argument("--batch", type=int, default=None, help="sequences (default 8; cpu 2)")
    parser.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 1024; cpu 32)")
    parser.add_argument("--steps", type=int, default=None, help="steps per timed window (default 20; cpu 2)")
    parser.add_argument("--windows", type=int, default=None, help="timed windows per variant (default 7; cpu 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per variant (default 5; cpu 1)")
    parser.add_argument("--out", default=None,
                        help="results folder (default benchmarks/results; a temporary folder for --device cpu)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every tensor's difference")
    args = parser.parse_args(argv)
    defaults = (dict(d=768, heads=12, batch=8, seq=1024, steps=20, windows=7, warmup=5) if args.device == "cuda"
                else dict(d=64, heads=4, batch=2, seq=32, steps=2, windows=2, warmup=1))
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.precs = [p.strip() for p in args.prec.split(",") if p.strip()]
    if any(p not in PRECISIONS for p in args.precs):
        parser.error(f"precisions are {list(PRECISIONS)}")
    if args.d % args.heads:
        parser.error("--d must be a multiple of --heads")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.device == "cuda":
        if not torch.cuda.is_available() or not torch_tiles.built_with_cuda():
            sys.exit("gpt_block.py needs a GPU and a CUDA build of torch_tiles (or --device cpu for a dry run)")
        device_name = torch.cuda.get_device_name()
        out_dir = args.out or results_file.RESULTS_DIR
    else:
        device_name = "cpu"
        torch.set_num_threads(1)  # tiny shapes: more threads only wait on each other
        out_dir = args.out or tempfile.mkdtemp(prefix="gpt-block-")
    print(f"{device_name} | torch {torch.__version__} | d={args.d} heads={args.heads} batch={args.batch} "
          f"seq={args.seq} | {args.windows} windows x {args.steps} steps per variant, forward + backward, "
          f"no optimizer", flush=True)
    clock = Clock(args.device)
    rows = []
    for prec in args.precs:
        try:
            row = run_precision(prec, args, clock)
        except Exception as e:  # noqa: BLE001  (an OOM or a kernel error is a result too)
            row = {"name": f"train gpt-block {prec}", "failed": f"{type(e).__name__}: {str(e)[:300]}"}
            print(f"FAILED {row['name']}: {row['failed']}", flush=True)
        rows.append(row)
        if args.device == "cuda":
            torch.cuda.empty_cache()
        path = results_file.merge(device_name, [row], out_dir=out_dir)
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
