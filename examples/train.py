"""Train a small classifier on scikit-learn's bundled 8x8 digit images, all compute on torch_tiles ops.

    python examples/train.py                          # GPU when there is one (and a CUDA build), else CPU
    python examples/train.py --compare                # also train a native-PyTorch twin: loss agreement,
                                                      #   step-time ratio, PNG of both loss curves
    python examples/train.py --dtype float64 --compare   # the two loss curves agree to ~1e-10
    python examples/train.py --compile                # model and loss under torch.compile(fullgraph=True)
    python examples/train.py --cuda-graphs            # whole training step replayed from one CUDA graph
    torchrun --nproc_per_node=2 examples/train.py     # DistributedDataParallel, one GPU per rank (gloo
                                                      #   processes with --device cpu); --batch-size is global

The model is an MLP of torch_tiles.nn blocks (Linear, GELU, CrossEntropyLoss), trained by torch.optim.Adam.
Everything is seeded: the data split, the initial weights and the batch order, so runs repeat, and the
native twin sees exactly what the tiles model sees. The functions below are also used by the tests.

Under torchrun (or with --ddp) each rank trains a DistributedDataParallel replica on its share of every
global batch, so N ranks take the same steps as one process on the whole batch: same loss curve up to
rounding, parameters identical on every rank. Only rank 0 prints and writes files.
"""
import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from typing import Callable, List, Optional

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler
from tqdm import tqdm

import torch_tiles
from torch_tiles import nn as tnn

N_FEATURES, N_CLASSES = 64, 10
HIDDEN = (256, 256)
BLOCKS = {  # kind -> (linear layer, activation, loss); the native twin mirrors the tiles model
    "tiles": (tnn.Linear, tnn.GELU, tnn.CrossEntropyLoss),
    "torch": (torch.nn.Linear, torch.nn.GELU, torch.nn.CrossEntropyLoss),
}


@dataclasses.dataclass
class Data:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


@dataclasses.dataclass
class History:
    losses: List[float]  # one per step
    step_seconds: List[float]  # one per step, from the batch gather to the loss on the host

    @property
    def step_ms(self) -> float:
        """Median step time: leaves out the first steps' one-off costs (compilation, graph capture)."""
        return 1e3 * statistics.median(self.step_seconds)


@dataclasses.dataclass(frozen=True)
class Ranks:
    """This process's place in the job: rank 0 of 1 alone; under torchrun, what its environment says."""
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    ddp: bool = False  # a process group is up and models train wrapped in DistributedDataParallel

    @property
    def is_main(self) -> bool:
        return self.rank == 0


SINGLE = Ranks()
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


def torchrun_ranks() -> Ranks:
    return Ranks(*(int(os.environ[name]) for name in TORCHRUN_VARIABLES), ddp=True)


def init_distributed(device_type: str) -> Ranks:
    """Joins the torchrun job: NCCL between GPUs, each rank on GPU LOCAL_RANK; gloo between CPU processes.

    The current device is set before anything touches CUDA, so that allocations, NCCL's buffers and the
    kernels of rank r all land on cuda:r (tiles ops follow their tensors' device in any case).
    """
    ranks = torchrun_ranks()
    if device_type == "cuda":
        torch.cuda.set_device(ranks.local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", ranks.local_rank))
    else:
        dist.init_process_group("gloo")
    return ranks


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() and torch_tiles.built_with_cuda() else "cpu"


def load_data(seed: int, device="cpu", dtype=torch.float32, test_fraction: float = 0.2) -> Data:
    """The 1797 digits (pixels 0..16 scaled to [0, 1]), split at random by `seed` into train and test.

    The whole set is small enough to live on the device, so batches are gathered there.
    """
    x, y = load_digits(return_X_y=True)
    x, y = torch.as_tensor(x, dtype=dtype) / 16, torch.as_tensor(y)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = round(len(y) * test_fraction)
    test, train = order.split([n_test, len(y) - n_test])
    return Data(*(t.to(device) for t in (x[train], y[train], x[test], y[test])))


def build_model(kind: str = "tiles", hidden=HIDDEN, seed: int = 0, device="cpu", dtype=torch.float32):
    """An MLP 64 -> hidden... -> 10 with GELU between layers, of tiles blocks or (kind="torch") native ones.

    tiles' Linear draws the same initial weights as torch.nn.Linear (stored transposed), so both kinds
    built with one seed start from the same point.
    """
    linear, activation, _ = BLOCKS[kind]
    torch.manual_seed(seed)
    sizes = [N_FEATURES, *hidden, N_CLASSES]
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        if i:
            layers.append(activation())
        layers.append(linear(n_in, n_out, device=device, dtype=dtype))
    return torch.nn.Sequential(*layers)


def loss_function(kind: str = "tiles"):
    return BLOCKS[kind][2]()


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, device="cpu") -> torch.Tensor:
    """Shuffled sample indices of one epoch as [steps, batch_size], seeded by (seed, epoch).

    The last incomplete batch is dropped, so every step has one shape: one compiled graph, one CUDA graph.
    """
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    return order[: n - n % batch_size].view(-1, batch_size).to(device)


def rank_batches(n: int, batch_size: int, seed: int, epoch: int, ranks: Ranks = SINGLE, device="cpu") -> torch.Tensor:
    """This rank's share of every global batch of `epoch_batches`, as [steps, batch_size // world].

    DistributedSampler(shuffle=False) deals the epoch's order (already shuffled by epoch_batches) out
    round-robin: rank r gets positions r, r+W, r+2W, ...  Cut into consecutive batches of batch_size/W,
    rank r's batch at step s is every W-th sample of the one-process batch at step s, so the ranks'
    batches together are exactly that batch, and the N-rank run takes the one-process run's steps.
    DistributedSampler's own shuffle (shuffle=True) draws another permutation than epoch_batches: the
    N-rank run would then only match a one-process run shuffled the same way, not this script's
    existing one-process runs. With one rank this is epoch_batches itself.
    """
    order = epoch_batches(n, batch_size, seed, epoch).flatten()  # whole global batches, so W divides it
    sampler = DistributedSampler(range(len(order)), num_replicas=ranks.world, rank=ranks.rank, shuffle=False)
    mine = order[torch.tensor(list(sampler), dtype=torch.long)]
    return mine.view(-1, batch_size // ranks.world).to(device)


def make_step(model, loss_fn, optimizer, compile: bool = False) -> Callable:
    """One training step: forward, backward and optimizer update; returns the loss (on the device)."""
    if compile and isinstance(model, DistributedDataParallel):
        # Dynamo cannot trace DistributedDataParallel.forward (its bookkeeping calls C++ objects), and
        # that forward must run anyway: it readies the gradient all-reduce for backward. So under DDP the
        # wrapped module and the loss are compiled, each in one graph, and DDP's forward runs eagerly.
        model.module.compile(fullgraph=True)
        loss_fn = torch.compile(loss_fn, fullgraph=True)

    def forward(x, y):
        return loss_fn(model(x), y)

    if compile and not isinstance(model, DistributedDataParallel):
        forward = torch.compile(forward, fullgraph=True)

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = forward(x, y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def make_graphed_step(step: Callable, model, optimizer, x_like, y_like, warmup: int = 3) -> Callable:
    """Captures `step` (forward, backward, Adam update) in one CUDA graph; returns a step that copies the
    batch into the graph's static input buffers and replays it.

    The warm-up steps run before capture on a side stream, as CUDA graphs need: they make the lazily
    created state (Adam's buffers, library workspaces, compiled code) exist outside the capture. They
    also train, so the parameters and Adam's state (all zeros when fresh) are restored afterwards, in
    place, since the graph holds their addresses: the graphed run then matches the eager one step for
    step. Gradients are set to None before capture so that backward allocates them in the graph's pool.
    """
    static_x, static_y = x_like.clone(), y_like.clone()
    start = [p.detach().clone() for p in model.parameters()]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = step(static_x, static_y)

    with torch.no_grad():
        for p, p0 in zip(model.parameters(), start):
            p.copy_(p0)
        for state in optimizer.state.values():
            for t in state.values():
                t.zero_()

    def replay(x, y):
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        return static_loss

    return replay


def train(model, loss_fn, data: Data, epochs: int, batch_size: int, lr: float, seed: int = 0,
          compile: bool = False, cuda_graphs: bool = False, progress: bool = True, desc: str = "tiles",
          ranks: Ranks = SINGLE) -> History:
    """Trains `model` in place with Adam; returns the per-step losses and times.

    On CUDA, Adam is made capturable (step count on the device) in every mode, not only for CUDA graphs,
    so that eager, compiled and graphed runs do the same arithmetic.

    Under DDP (`model` wrapped, `ranks` from the job) `batch_size` is the global batch: this rank trains
    on its share (`rank_batches`) and the returned losses are the global batch's, averaged over the ranks
    after training; only rank 0 shows a progress bar.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, capturable=data.y_train.is_cuda)
    step = make_step(model, loss_fn, optimizer, compile)
    if cuda_graphs:
        step = make_graphed_step(step, model, optimizer, data.x_train[:batch_size], data.y_train[:batch_size])
    n = len(data.y_train)
    history = History([], [])
    loss_label = "loss" if ranks.world == 1 else "rank0_loss"  # the bar shows rank 0's share only
    with tqdm(total=epochs * (n - n % batch_size), desc=desc, unit="sample", unit_scale=True,
              disable=not (progress and ranks.is_main), leave=False) as bar:
        for epoch in range(epochs):
            for idx in rank_batches(n, batch_size, seed, epoch, ranks, data.y_train.device):
                t0 = time.perf_counter()
                loss = step(data.x_train[idx], data.y_train[idx]).item()  # .item() waits for the device
                history.step_seconds.append(time.perf_counter() - t0)
                history.losses.append(loss)
                bar.set_postfix({loss_label: f"{loss:.4f}"}, refresh=False)
                bar.update(batch_size)
    if ranks.ddp:
        history.losses = mean_over_ranks(history.losses, data.y_train.device)
    return history


def mean_over_ranks(values: List[float], device) -> List[float]:
    """Each value averaged over the ranks. For the losses: with equal shards, the mean of the ranks' batch
    means is the global batch's mean, the number one process training on the whole batch reports. One
    all-reduce after training, so logging adds no collective to the timed steps."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return (t / dist.get_world_size()).tolist()


def slowest_rank(value: float, device) -> float:
    """The largest of the ranks' `value`s (the same value without DDP): the job steps at the slowest pace."""
    if not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def flat_parameters(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def max_parameter_diff_across_ranks(model) -> float:
    """max |p_rank - p_rank0| over all parameters and ranks: 0 when DDP kept the replicas in lockstep
    (every rank gets the same all-reduced gradients and applies the same Adam arithmetic)."""
    mine = flat_parameters(model)
    if not dist.is_initialized():
        return 0.0
    rank0 = mine.clone()
    dist.broadcast(rank0, src=0)
    diff = (mine - rank0).abs().max()
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return diff.item()


def where_tensors_live(model, ranks: Ranks) -> dict:
    """This rank's devices of parameters and gradients, and the bytes PyTorch's allocator holds on each
    GPU: under DDP on GPUs, rank r should hold memory on cuda:r only (ranks never touch each other's GPU)."""
    tensors = [t for p in model.parameters() for t in (p, p.grad) if t is not None]
    record = {"rank": ranks.rank, "local_rank": ranks.local_rank,
              "tensor_devices": sorted({str(t.device) for t in tensors})}
    if torch.cuda.is_available() and any(t.is_cuda for t in tensors):
        record["cuda_allocated_bytes"] = [torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count())]
    return record


def gather_to_list(record) -> list:
    """Every rank's `record`, in rank order (on every rank); [record] without DDP."""
    if not dist.is_initialized():
        return [record]
    records = [None] * dist.get_world_size()
    dist.all_gather_object(records, record)
    return records


@torch.no_grad()
def accuracy(model, x, y) -> float:
    return (model(x).argmax(1) == y).double().mean().item()


def save_plot(path: str, tiles_losses, torch_losses, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(torch_losses, label="native PyTorch", linewidth=3, alpha=0.5)
    ax.plot(tiles_losses, label="torch_tiles", linewidth=1)
    ax.set(xlabel="step", ylabel="training loss (cross-entropy)", yscale="log", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=64, help="the global batch (split over the ranks under DDP)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--hidden", type=int, nargs="+", default=list(HIDDEN), help="hidden layer widths")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=default_device(), help="default: cuda if usable, else cpu")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--compare", action="store_true", help="also train a native-PyTorch twin and compare")
    p.add_argument("--plot", default="loss_curves.png", help="where --compare saves the loss curves")
    p.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) the model and loss")
    p.add_argument("--cuda-graphs", action="store_true", help="replay each training step from a CUDA graph")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--ddp", action="store_true",
                   help="DistributedDataParallel over the processes torchrun started (on by default under torchrun)")
    p.add_argument("--json", metavar="PATH", help="write losses, throughput and the cross-rank parameter check here")
    args = p.parse_args(argv)
    if torch.device(args.device).type == "cuda" and not (torch.cuda.is_available() and torch_tiles.built_with_cuda()):
        p.error(f"--device {args.device}: needs a visible GPU and a CUDA build of torch_tiles "
                f"(GPU visible: {torch.cuda.is_available()}, CUDA build: {torch_tiles.built_with_cuda()})")
    args.ddp = args.ddp or launched_by_torchrun()
    if args.ddp:
        check_ddp_args(p, args)
    if args.cuda_graphs and torch.device(args.device).type != "cuda":
        p.error(f"--cuda-graphs captures CUDA work and needs a CUDA device; this run is on {args.device}")
    return args


def check_ddp_args(parser, args) -> None:
    """Refuses, before any process group is set up, what DDP runs of this script cannot do."""
    if not launched_by_torchrun():
        parser.error("--ddp joins a job started by torchrun (it reads RANK, WORLD_SIZE and LOCAL_RANK): "
                     "torchrun --nproc_per_node=N examples/train.py ...")
    ranks = torchrun_ranks()
    device = torch.device(args.device)
    if args.cuda_graphs:
        parser.error("--cuda-graphs is not supported with DDP: DDP all-reduces gradients from autograd hooks "
                     "while backward runs, which the one-graph capture of a step here does not handle; "
                     "run eager or --compile")
    if device.index is not None:
        parser.error(f"--device {args.device}: under DDP give the type only (cuda or cpu); "
                     "each rank runs on cuda:LOCAL_RANK")
    if args.batch_size % ranks.world:
        parser.error(f"--batch-size {args.batch_size} is the global batch and must be divisible by the "
                     f"{ranks.world} ranks, so that every rank's share is equal")
    if device.type == "cuda" and ranks.local_rank >= torch.cuda.device_count():
        parser.error(f"local rank {ranks.local_rank} would run on cuda:{ranks.local_rank} but {torch.cuda.device_count()} "
                     "GPU(s) are visible: start at most one process per GPU")


@dataclasses.dataclass
class RunResult:
    history: History
    accuracy: float
    n_test: int
    samples_per_s: float  # global batch over the slowest rank's median step time
    param_max_diff: float  # across ranks (0 without DDP)
    param_checksum: float  # sum of all parameters in float64: a fingerprint to compare runs by
    placement: list  # where_tensors_live of every rank


def distribute(model, ranks: Ranks, device):
    """`model` as this rank trains it: wrapped in DistributedDataParallel under DDP, else as it is. DDP
    broadcasts rank 0's weights to the others on wrapping (they are the same anyway: same seed)."""
    if not ranks.ddp:
        return model
    device_ids = [torch.device(device).index] if torch.device(device).type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def run(args, kind: str, ranks: Ranks = SINGLE) -> RunResult:
    """Builds, trains and evaluates one model of `kind` (on every rank); returns what main reports."""
    dtype = getattr(torch, args.dtype)
    data = load_data(args.seed, args.device, dtype)
    if args.batch_size > len(data.y_train):
        raise SystemExit(f"--batch-size {args.batch_size} is larger than the {len(data.y_train)} training samples")
    model = build_model(kind, args.hidden, args.seed, args.device, dtype)
    history = train(distribute(model, ranks, args.device), loss_function(kind), data, args.epochs, args.batch_size,
                    args.lr, args.seed, args.compile, args.cuda_graphs, progress=not args.quiet, desc=kind, ranks=ranks)
    step_seconds = slowest_rank(statistics.median(history.step_seconds), data.y_train.device)
    return RunResult(history, accuracy(model, data.x_test, data.y_test), len(data.y_test),
                     samples_per_s=args.batch_size / step_seconds,
                     param_max_diff=max_parameter_diff_across_ranks(model),
                     param_checksum=flat_parameters(model).double().sum().item(),
                     placement=gather_to_list(where_tensors_live(model, ranks)))


def describe(kind: str, result: RunResult) -> str:
    h = result.history
    return (f"{kind:>5}: {len(h.losses)} steps, final loss {h.losses[-1]:.4f}, held-out accuracy "
            f"{result.accuracy:.4f} ({result.n_test} images), step {h.step_ms:.3f} ms, {result.samples_per_s:.0f} samples/s")


def write_json(path: str, args, ranks: Ranks, mode: str, tiles: RunResult, native: Optional[RunResult]) -> None:
    """What a driver or test needs to compare a one-process run with an N-rank one."""
    record = {
        "world_size": ranks.world, "ddp": ranks.ddp, "device": args.device, "dtype": args.dtype, "mode": mode,
        "hidden": args.hidden, "epochs": args.epochs, "batch_size": args.batch_size,
        "batch_per_rank": args.batch_size // ranks.world, "lr": args.lr, "seed": args.seed,
        "losses": tiles.history.losses, "step_seconds_rank0": tiles.history.step_seconds,
        "step_ms": tiles.history.step_ms, "samples_per_s": tiles.samples_per_s, "accuracy": tiles.accuracy,
        "param_max_diff_across_ranks": tiles.param_max_diff, "param_checksum": tiles.param_checksum,
        "ranks": tiles.placement,
    }
    if native is not None:
        record["native"] = {"losses": native.history.losses, "step_ms": native.history.step_ms,
                            "samples_per_s": native.samples_per_s, "accuracy": native.accuracy}
    with open(path, "w") as f:
        json.dump(record, f, indent=1)


def main(argv=None) -> Ranks:
    """Parses `argv`, joins the torchrun job if there is one, trains and reports; returns the ranks it ran as."""
    args = parse_args(argv)
    ranks = SINGLE
    if args.ddp:
        ranks = init_distributed(torch.device(args.device).type)
        if args.device == "cuda":
            args.device = f"cuda:{ranks.local_rank}"
    try:
        train_and_report(args, ranks)
    finally:
        if ranks.ddp:
            dist.destroy_process_group()
    return ranks


def exit_now() -> None:
    """Ends a finished DDP process without the interpreter's shutdown.

    DistributedDataParallel keeps a reference to its process group that outlives the DDP object (in
    torch 2.13 gloo's threads are still running after destroy_process_group), so with gloo they are
    only torn down while the interpreter finalizes, racing the peer ranks closing their connections: in
    3 of about 200 two-rank CPU runs on a 2-core machine a rank aborted there, after all its work was
    done ("terminate called without an active exception", exit -6, so torchrun reported a failure).
    All output is written by now; exiting at once leaves nothing to race.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def train_and_report(args, ranks: Ranks) -> None:
    """Every rank trains; rank 0 alone prints, saves the plot and writes the json."""
    log = print if ranks.is_main else (lambda *_, **__: None)
    mode = "+".join(m for m in ("compile", "cuda_graphs") if getattr(args, m)) or "eager"
    log(f"torch_tiles digits MLP {args.hidden} on {args.device}, {args.dtype}, {mode}, {args.epochs} epochs of "
        f"batch {args.batch_size}, Adam lr {args.lr}, seed {args.seed}")
    if ranks.ddp:
        log(f"DDP: {ranks.world} ranks ({dist.get_backend()}), {args.batch_size // ranks.world} samples per rank "
            f"per step, rank r on {'cuda:r' if args.device.startswith('cuda') else 'the CPU'}")
    tiles = run(args, "tiles", ranks)
    log(describe("tiles", tiles))
    summary = (f"device={args.device} dtype={args.dtype} mode={mode} accuracy={tiles.accuracy:.4f} "
               f"tiles_step_ms={tiles.history.step_ms:.3f} world_size={ranks.world} "
               f"samples_per_s={tiles.samples_per_s:.1f}")
    if ranks.ddp:
        log(f"parameters after training, max |rank r - rank 0| over {ranks.world} ranks: {tiles.param_max_diff:.3e}")
        summary += f" param_max_diff_across_ranks={tiles.param_max_diff:.3e}"
    native = None
    if args.compare:
        native = run(args, "torch", ranks)
        log(describe("torch", native))
        diff = max(abs(a - b) for a, b in zip(tiles.history.losses, native.history.losses))
        ratio = tiles.history.step_ms / native.history.step_ms
        if ranks.is_main:
            title = f"digits MLP {args.hidden}, {args.device}, {args.dtype}, {mode}"
            save_plot(args.plot, tiles.history.losses, native.history.losses, title)
        log(f"max |loss tiles - loss native| over {len(tiles.history.losses)} steps: {diff:.3e}; "
            f"step time tiles / native = {ratio:.2f}; loss curves saved to {args.plot}")
        summary += (f" native_step_ms={native.history.step_ms:.3f} ratio={ratio:.2f} "
                    f"native_accuracy={native.accuracy:.4f} max_loss_diff={diff:.3e}")
    log("summary:", summary)
    if args.json and ranks.is_main:
        write_json(args.json, args, ranks, mode, tiles, native)


if __name__ == "__main__":
    if main().ddp:
        exit_now()
