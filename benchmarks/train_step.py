"""What a training loop sees: whole training steps and the cost of one call, tiles against PyTorch.

    python benchmarks/train_step.py                 # every case this machine can run
    python benchmarks/train_step.py -k overhead     # cases whose name contains 'overhead'
    python benchmarks/train_step.py --device cpu    # CPU cases only, into benchmarks/results/cpu.json

Cases (speedup = PyTorch time / tiles time, so above 1 is tiles ahead):
- `train mlp <mode>`: the median step time of examples/train.py's default model (MLP 64-256-256-10, GELU,
  cross entropy, Adam) at its default batch (64), against its native twin (torch.nn.Linear, GELU,
  CrossEntropyLoss) from the same weights on the same batches. A step is timed as train.py times it,
  from the batch gather to the loss on the host, so it includes one device sync. Modes: eager,
  compile (torch.compile(fullgraph=True)), cuda-graphs (the whole step replayed from one CUDA graph).
- `overhead <cpu|cuda> grad=<0|1> <op>`: the time of one call on a 16-element input (bmm: 2x4x4 times
  2x4x4) against `torch.ops.aten`'s op through the same dispatcher path (`torch.ops.<ns>.<op>.<overload>`);
  `overhead ... api <op>`: torch_tiles' own wrapper (`torch_tiles.map`, ...: a direct call in eager mode)
  against torch's function (`torch.exp`, `torch.add`, `torch.sum`, `torch.bmm`), what scripts call;
  calls issued back to back and the device synchronised once at the end; grad=1 makes the inputs
  require grad, so each call also records its autograd node.
Each case runs in alternating rounds (tiles first, then PyTorch first, ...) and reports the median,
with the lowest and highest per-round speedup. Each train mode runs in a process of its own, as a
training script would: what ran before in one process moved the graphed step's time (NOTES.md). Results
merge into the machine's results file (benchmarks/results_file.py): the GPU's on a GPU machine, cpu.json
with --device cpu.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # local_build, results_file, run (also under `python -P`)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import local_build  # noqa: E402,F401  (the in-place build of this checkout, when there is one)
import torch_tiles  # noqa: E402,F401  (registers torch.ops.tiles)
import results_file  # noqa: E402
from run import time_pair  # noqa: E402  (alternating rounds)
import train as train_script  # noqa: E402  (examples/train.py)

T, A = torch.ops.tiles, torch.ops.aten


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def measured(measure):
    """time_pair's timer for callables that time themselves (and return seconds)."""
    return measure()


def row(name, tiles_s, torch_s, spread, unit_scale, unit, **extra):
    return {"name": name, "tiles_ms": round(tiles_s * 1e3, 6), "torch_ms": round(torch_s * 1e3, 6),
            "speedup": round(torch_s / tiles_s, 3), "speedup_rounds": [round(x, 3) for x in spread],
            "rate": round(tiles_s * unit_scale, 3), "unit": unit, **extra}


# ---- per-call overhead ------------------------------------------------------------------------------

def overhead_calls(device, grad):
    """(op name, tiles call, aten call) on 16-element inputs."""
    def t(*shape):
        return torch.randn(*shape, device=device).requires_grad_(grad)
    x, a, b = t(16), t(16), t(16)
    ma, mb = t(2, 4, 4), t(2, 4, 4)
    return [
        ("map", lambda: T.map.default(x, "exp"), lambda: A.exp.default(x)),
        ("zip", lambda: T.zip.default(a, b, "add"), lambda: A.add.Tensor(a, b)),
        ("reduce", lambda: T.reduce.default(x, [0], "sum", False), lambda: A.sum.dim_IntList(x, [0])),
        ("bmm", lambda: T.bmm.default(ma, mb), lambda: A.bmm.default(ma, mb)),
        # What scripts call: torch_tiles' wrappers (direct calls in eager mode) against torch's functions.
        ("api map", lambda: torch_tiles.map(x, "exp"), lambda: torch.exp(x)),
        ("api zip", lambda: torch_tiles.zip(a, b, "add"), lambda: torch.add(a, b)),
        ("api reduce", lambda: torch_tiles.reduce(x, 0, "sum"), lambda: torch.sum(x, 0)),
        ("api bmm", lambda: torch_tiles.bmm(ma, mb), lambda: torch.bmm(ma, mb)),
    ]


def seconds_per_call(fn, device, calls):
    fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync(device)
    return (time.perf_counter() - start) / calls


def overhead_cases(device, rounds, calls, k=""):
    rows = []
    for grad in (0, 1):
        for op, tiles_fn, torch_fn in overhead_calls(device, bool(grad)):
            name = f"overhead {device} grad={grad} {op}"
            if k not in name:
                continue
            for fn in (tiles_fn, torch_fn):  # warm up both: first calls allocate and look up kernels
                for _ in range(200):
                    fn()
            tiles_s, torch_s, spread = time_pair(lambda: seconds_per_call(tiles_fn, device, calls),
                                                 lambda: seconds_per_call(torch_fn, device, calls), rounds, measured)
            rows.append(row(name, tiles_s, torch_s, spread, 1e6, "us/call"))
            print_row(rows[-1])
    return rows


# ---- whole training steps -----------------------------------------------------------------------------

def make_trainer(kind, device, mode, batches, data):
    """A training step of examples/train.py's default model of `kind`, warmed up."""
    model = train_script.build_model(kind, train_script.HIDDEN, seed=0, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, capturable=device == "cuda")
    step = train_script.make_step(model, train_script.loss_function(kind), optimizer, compile=mode == "compile")
    x0, y0 = data.x_train[batches[0]], data.y_train[batches[0]]
    if mode == "cuda-graphs":
        step = train_script.make_graphed_step(step, model, optimizer, x0, y0)
    for idx in batches[:10]:  # compiles, captures, allocates
        step(data.x_train[idx], data.y_train[idx]).item()
    return step


def step_seconds(step, data, batches):
    """Median seconds per step over `batches`, each from the batch gather to the loss on the host."""
    times = []
    for idx in batches:
        start = time.perf_counter()
        step(data.x_train[idx], data.y_train[idx]).item()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def train_cases(device, modes, rounds, steps):
    data = train_script.load_data(0, device)
    batches = train_script.epoch_batches(len(data.y_train), 64, seed=0, epoch=0, device=device)
    batches = batches.repeat(steps // len(batches) + 1, 1)[:steps]
    rows = []
    for mode in modes:
        tiles = make_trainer("tiles", device, mode, batches, data)
        native = make_trainer("torch", device, mode, batches, data)
        tiles_s, torch_s, spread = time_pair(lambda: step_seconds(tiles, data, batches),
                                             lambda: step_seconds(native, data, batches), rounds, measured)
        rows.append(row(f"train mlp {mode}", tiles_s, torch_s, spread, 1e3, "ms/step",
                        model="64-256-256-10 GELU, batch 64, Adam"))
        print_row(rows[-1])
    return rows


def interpreter_flags():
    """This interpreter's flags that change what a child process imports (-I, -E, -s, -P)."""
    f = sys.flags
    flags = (("-I", f.isolated), ("-E", f.ignore_environment), ("-s", f.no_user_site),
             ("-P", getattr(f, "safe_path", False)))
    return [flag for flag, on in flags if on]


def train_cases_in_subprocesses(device, modes, rounds, steps):
    """train_cases for each mode in a fresh Python process: this script with --one-train-mode, which
    prints its row as it goes and writes it to a file. A mode that fails is reported and skipped."""
    rows = []
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            row_file = os.path.join(tmp, "row.json")
            command = [sys.executable, *interpreter_flags(), os.path.abspath(__file__), "--device", device,
                       "--one-train-mode", mode, "--row-out", row_file, "--rounds", str(rounds), "--steps", str(steps)]
            if subprocess.run(command).returncode != 0 or not os.path.exists(row_file):
                print(f"train mlp {mode}: its process failed (output above); not recorded", flush=True)
                continue
            with open(row_file) as f:
                rows.append(json.load(f))
    return rows


def print_row(r):
    lo, hi = r["speedup_rounds"]
    print(f"{r['name']:<34} tiles {r['rate']:>9.3f} {r['unit']:<8} torch {r['torch_ms'] * (1e3 if r['unit'] == 'us/call' else 1):>9.3f}"
          f"  speedup {r['speedup']:.2f}x ({lo:.2f}-{hi:.2f})", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None,
                        help="cuda: GPU cases and CPU overhead into the GPU's file; cpu: CPU cases into cpu.json "
                             "(default: cuda when usable)")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200, help="timed steps per round of a train case")
    parser.add_argument("--calls", type=int, default=5000, help="calls per round of an overhead case")
    parser.add_argument("--out", default=results_file.RESULTS_DIR, help="results folder")
    # internal, for train_cases_in_subprocesses: one train case, its row written to --row-out as JSON
    parser.add_argument("--one-train-mode", help=argparse.SUPPRESS)
    parser.add_argument("--row-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() and torch_tiles.built_with_cuda()
    device = args.device or ("cuda" if gpu else "cpu")
    if device == "cuda" and not gpu:
        sys.exit("--device cuda needs a GPU and a CUDA build of torch_tiles")

    if args.one_train_mode:
        (row,) = train_cases(device, [args.one_train_mode], args.rounds, args.steps)
        with open(args.row_out, "w") as f:
            json.dump(row, f)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, tiles from {torch_tiles.__file__}")
    rows = []
    for d in (["cpu", "cuda"] if device == "cuda" else ["cpu"]):
        rows += overhead_cases(d, args.rounds, args.calls, args.k)
    modes = ["eager", "compile", "cuda-graphs"] if device == "cuda" else ["eager"]
    modes = [m for m in modes if args.k in f"train mlp {m}"]
    if modes:
        rows += train_cases_in_subprocesses(device, modes, args.rounds, args.steps)
    machine = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    path = results_file.merge(machine, rows, {"threads": torch.get_num_threads()}, args.out)
    print(f"wrote {len(rows)} cases to {path}")


if __name__ == "__main__":
    main()
