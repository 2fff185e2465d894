"""A one-screen tour of torch_tiles: the four operators, forward and backward, checked against PyTorch.

    python examples/demo.py            # on the GPU when there is one (and the build has CUDA), else CPU
    python examples/demo.py --device cpu
"""
import argparse

import torch

import torch_tiles

T = torch.ops.tiles


def show(name, ours, ref):
    err = (ours.double() - ref.double()).abs().max().item() if ours.numel() else 0.0
    print(f"  {name:<44} shape {str(tuple(ours.shape)):<14} max |tiles - torch| = {err:.2e}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cuda = torch.cuda.is_available() and torch_tiles.built_with_cuda()
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if cuda else "cpu",
                   help="default: cuda if usable, else cpu")
    args = p.parse_args(argv)
    if args.device == "cuda" and not cuda:
        p.error("--device cuda needs a visible GPU and a build of torch_tiles with its CUDA kernels")
    return args


def main(argv=None):
    dev = parse_args(argv).device
    print(f"torch_tiles on {dev} (torch {torch.__version__}, CUDA kernels built: {torch_tiles.built_with_cuda()})")
    torch.manual_seed(0)
    x = torch.randn(64, 96, device=dev)

    print("map / zip / reduce / bmm:")
    show("map(x, 'gelu')", T.map(x, "gelu"), torch.nn.functional.gelu(x))
    show("map(x.t(), 'exp')  (strided input)", T.map(x.t(), "exp"), x.t().exp())
    show("zip(x, row, 'add')  (broadcast)", T.zip(x, x[0], "add"), x + x[0])
    show("zip(x[:, :64], x[:64, :64].t(), 'max')", T.zip(x[:, :64], x[:64, :64].t(), "max"),
         torch.maximum(x[:, :64], x[:64, :64].t()))
    show("reduce(x, [1], 'sum')", T.reduce(x, [1], "sum"), x.sum(1))
    show("reduce(x, None, 'max')", T.reduce(x, None, "max"), x.max())
    a, b = torch.randn(8, 64, 32, device=dev), torch.randn(8, 32, 48, device=dev)
    show("bmm(a, b)", T.bmm(a, b), torch.bmm(a, b))
    show("bmm(a, b.mT.contiguous().mT)  (b column-major)", T.bmm(a, b.mT.contiguous().mT), torch.bmm(a, b))

    print("gradients (a small MLP-ish chain, tiles vs torch):")
    w = torch.randn(96, 16, device=dev, requires_grad=True)
    loss = T.reduce(T.map(T.bmm(x, w), "tanh"), None, "mean")
    loss.backward()
    w_ref = w.detach().clone().requires_grad_()
    torch.tanh(x @ w_ref).mean().backward()
    show("d loss / d w", w.grad, w_ref.grad)


if __name__ == "__main__":
    main()
