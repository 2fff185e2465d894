"""Train a small classifier on scikit-learn's bundled 8x8 digit images, all compute on torch_tiles ops.

    python examples/train.py                          # GPU when there is one (and a CUDA build), else CPU
    python examples/train.py --compare                # also train a native-PyTorch twin: loss agreement,
                                                      #   step-time ratio, PNG of both loss curves
    python examples/train.py --dtype float64 --compare   # the two loss curves agree to ~1e-10
    python examples/train.py --compile                # model and loss under torch.compile(fullgraph=True)
    python examples/train.py --cuda-graphs            # whole training step replayed from one CUDA graph

The model is an MLP of torch_tiles.nn blocks (Linear, GELU, CrossEntropyLoss), trained by torch.optim.Adam.
Everything is seeded: the data split, the initial weights and the batch order, so runs repeat, and the
native twin sees exactly what the tiles model sees. The functions below are also used by the tests.
"""
import argparse
import dataclasses
import statistics
import time
from typing import Callable, List

import torch
from sklearn.datasets import load_digits
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


def make_step(model, loss_fn, optimizer, compile: bool = False) -> Callable:
    """One training step: forward, backward and optimizer update; returns the loss (on the device)."""
    def forward(x, y):
        return loss_fn(model(x), y)

    if compile:
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
          compile: bool = False, cuda_graphs: bool = False, progress: bool = True, desc: str = "tiles") -> History:
    """Trains `model` in place with Adam; returns the per-step losses and times.

    On CUDA, Adam is made capturable (step count on the device) in every mode, not only for CUDA graphs,
    so that eager, compiled and graphed runs do the same arithmetic.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, capturable=data.y_train.is_cuda)
    step = make_step(model, loss_fn, optimizer, compile)
    if cuda_graphs:
        step = make_graphed_step(step, model, optimizer, data.x_train[:batch_size], data.y_train[:batch_size])
    n = len(data.y_train)
    history = History([], [])
    with tqdm(total=epochs * (n - n % batch_size), desc=desc, unit="sample", unit_scale=True,
              disable=not progress, leave=False) as bar:
        for epoch in range(epochs):
            for idx in epoch_batches(n, batch_size, seed, epoch, data.y_train.device):
                t0 = time.perf_counter()
                loss = step(data.x_train[idx], data.y_train[idx]).item()  # .item() waits for the device
                history.step_seconds.append(time.perf_counter() - t0)
                history.losses.append(loss)
                bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
                bar.update(batch_size)
    return history


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
    p.add_argument("--batch-size", type=int, default=64)
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
    args = p.parse_args(argv)
    if torch.device(args.device).type == "cuda" and not (torch.cuda.is_available() and torch_tiles.built_with_cuda()):
        p.error(f"--device {args.device}: needs a visible GPU and a CUDA build of torch_tiles "
                f"(GPU visible: {torch.cuda.is_available()}, CUDA build: {torch_tiles.built_with_cuda()})")
    if args.cuda_graphs and torch.device(args.device).type != "cuda":
        p.error(f"--cuda-graphs captures CUDA work and needs a CUDA device; this run is on {args.device}")
    return args


def run(args, kind: str) -> tuple:
    """Builds, trains and evaluates one model of `kind`; returns (history, held-out accuracy)."""
    dtype = getattr(torch, args.dtype)
    data = load_data(args.seed, args.device, dtype)
    if args.batch_size > len(data.y_train):
        raise SystemExit(f"--batch-size {args.batch_size} is larger than the {len(data.y_train)} training samples")
    model = build_model(kind, args.hidden, args.seed, args.device, dtype)
    history = train(model, loss_function(kind), data, args.epochs, args.batch_size, args.lr, args.seed,
                    args.compile, args.cuda_graphs, progress=not args.quiet, desc=kind)
    acc = accuracy(model, data.x_test, data.y_test)
    print(f"{kind:>5}: {len(history.losses)} steps, final loss {history.losses[-1]:.4f}, "
          f"held-out accuracy {acc:.4f} ({len(data.y_test)} images), step {history.step_ms:.3f} ms")
    return history, acc


def main(argv=None):
    args = parse_args(argv)
    mode = "+".join(m for m in ("compile", "cuda_graphs") if getattr(args, m)) or "eager"
    print(f"torch_tiles digits MLP {args.hidden} on {args.device}, {args.dtype}, {mode}, {args.epochs} epochs of "
          f"batch {args.batch_size}, Adam lr {args.lr}, seed {args.seed}")
    tiles, acc = run(args, "tiles")
    summary = (f"device={args.device} dtype={args.dtype} mode={mode} accuracy={acc:.4f} "
               f"tiles_step_ms={tiles.step_ms:.3f}")
    if args.compare:
        native, native_acc = run(args, "torch")
        diff = max(abs(a - b) for a, b in zip(tiles.losses, native.losses))
        ratio = tiles.step_ms / native.step_ms
        title = f"digits MLP {args.hidden}, {args.device}, {args.dtype}, {mode}"
        save_plot(args.plot, tiles.losses, native.losses, title)
        print(f"max |loss tiles - loss native| over {len(tiles.losses)} steps: {diff:.3e}; "
              f"step time tiles / native = {ratio:.2f}; loss curves saved to {args.plot}")
        summary += (f" native_step_ms={native.step_ms:.3f} ratio={ratio:.2f} native_accuracy={native_acc:.4f}"
                    f" max_loss_diff={diff:.3e}")
    print("summary:", summary)


if __name__ == "__main__":
    main()
