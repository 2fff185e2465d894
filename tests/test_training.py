"""End-to-end training with torch_tiles.nn (examples/train.py): accuracy, agreement with the native
PyTorch twin, torch.compile, CUDA graphs, and the command line."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tiles
from conftest import requires_cuda

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load_example():
    """examples/train.py as a module (examples/ is not a package, and the source tree may not be on
    sys.path when the tests run against an installed build)."""
    spec = importlib.util.spec_from_file_location("tiles_train_example", ROOT / "examples" / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


train = _load_example()

SMALL = dict(hidden=(64,))  # a model that trains in about a second on the CPU


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _train(kind, device, dtype=torch.float32, epochs=1, batch_size=32, lr=1e-2, **modes):
    """Builds a model of `kind` from seed 0 and trains it; returns (model, history, data)."""
    data = train.load_data(0, device, dtype)
    model = train.build_model(kind, SMALL["hidden"], seed=0, device=device, dtype=dtype)
    history = train.train(model, train.loss_function(kind), data, epochs, batch_size, lr, seed=0,
                          progress=False, **modes)
    return model, history, data


def test_short_training_reaches_accuracy(device):
    """Random guessing gets 10%; a few epochs of the small MLP get well above 90% on held-out digits."""
    model, history, data = _train("tiles", device, epochs=4)
    assert history.losses[-1] < 0.5 * history.losses[0]
    assert train.accuracy(model, data.x_test, data.y_test) > 0.9


def test_twins_start_from_the_same_weights(device):
    ours = train.build_model("tiles", (32, 16), seed=3, device=device)
    ref = train.build_model("torch", (32, 16), seed=3, device=device)
    for p, p_ref in zip(ours.parameters(), ref.parameters(), strict=True):
        assert torch.equal(p, p_ref.T if p.dim() == 2 else p_ref)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)], ids=["float64", "float32"])
def test_loss_agrees_with_native_twin(device, dtype, tol):
    """Same data, same batches, same start: the tiles model's loss curve is the native one's, up to rounding."""
    ours, history, _ = _train("tiles", device, dtype, epochs=2)
    ref, history_ref, _ = _train("torch", device, dtype, epochs=2)
    assert len(history.losses) == len(history_ref.losses) == 2 * (1437 // 32)
    diff = max(abs(a - b) for a, b in zip(history.losses, history_ref.losses))
    assert diff < tol, f"max loss difference over {len(history.losses)} steps: {diff:.3e}"
    for p, p_ref in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(p, p_ref.T if p.dim() == 2 else p_ref, rtol=tol, atol=tol)


def test_training_is_reproducible():
    _, first, _ = _train("tiles", "cpu")
    _, second, _ = _train("tiles", "cpu")
    assert first.losses == second.losses


def test_compiled_model_matches_eager(device):
    """torch.compile(fullgraph=True) traces model and loss with no graph break and computes the same."""
    data = train.load_data(0, device)
    model = train.build_model("tiles", SMALL["hidden"], seed=0, device=device)
    loss_fn = train.loss_function("tiles")
    x, y = data.x_train[:64], data.y_train[:64]

    def forward(x, y):
        logits = model(x)
        return logits, loss_fn(logits, y)

    compiled = torch.compile(forward, fullgraph=True)
    (logits_c, loss_c), (logits_e, loss_e) = compiled(x, y), forward(x, y)
    torch.testing.assert_close(logits_c, logits_e, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-6, atol=1e-6)
    grads_c = torch.autograd.grad(loss_c, list(model.parameters()))
    grads_e = torch.autograd.grad(loss_e, list(model.parameters()))
    for g_c, g_e in zip(grads_c, grads_e):
        torch.testing.assert_close(g_c, g_e, rtol=1e-6, atol=1e-6)


def test_compiled_training_matches_eager(device):
    _, compiled, _ = _train("tiles", device, compile=True)
    _, eager, _ = _train("tiles", device)
    torch.testing.assert_close(compiled.losses, eager.losses, rtol=1e-5, atol=1e-6)


@requires_cuda
@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_cuda_graph_training_matches_eager(compile):
    """Each step replayed from one captured CUDA graph (forward, backward, Adam) trains exactly like eager."""
    graphed_model, graphed, _ = _train("tiles", "cuda", cuda_graphs=True, compile=compile)
    eager_model, eager, _ = _train("tiles", "cuda", compile=compile)
    torch.testing.assert_close(graphed.losses, eager.losses, rtol=1e-6, atol=1e-7)
    for p, p_ref in zip(graphed_model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, p_ref, rtol=1e-6, atol=1e-7)


def test_cuda_graphs_refused_on_cpu(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--device", "cpu", "--cuda-graphs"])
    assert "needs a CUDA device" in capsys.readouterr().err


def test_command_line_smoke(tmp_path):
    """The script as a newcomer runs it, with tiny settings: trains both twins, prints, saves the plot."""
    plot = tmp_path / "curves.png"
    here = str(pathlib.Path(torch_tiles.__file__).parents[1])  # so the script imports this torch_tiles
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train.py"), "--device", "cpu", "--epochs", "1", "--batch-size",
         "128", "--hidden", "16", "--compare", "--plot", str(plot), "--quiet"],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("summary: device=cpu dtype=float32 mode=eager accuracy=")
    assert "native_step_ms=" in summary
    assert plot.stat().st_size > 1000
