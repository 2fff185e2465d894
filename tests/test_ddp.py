"""DistributedDataParallel training (examples/train.py under torchrun): two ranks, each on its share of every
global batch, take the steps one process takes on the whole batch. The loss curves match, the replicas stay
identical, only rank 0 prints. On the CPU over gloo (always runs) and on two GPUs over NCCL (where there are
two and the build has CUDA), where each rank's tensors must also stay on its own GPU."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tiles
from conftest import CUDA_AVAILABLE

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "train.py"


def _load_example():
    """examples/train.py as a module (examples/ is not a package, and the source tree may not be on
    sys.path when the tests run against an installed build)."""
    spec = importlib.util.spec_from_file_location("tiles_train_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


train = _load_example()

# Two epochs of 22 steps of 64 samples (32 per rank) through a small MLP: well under a second of training
# per process; starting the processes (torch, scikit-learn) is most of each launch's time.
ARGS = ["--epochs", "2", "--batch-size", "64", "--hidden", "32", "--lr", "1e-2"]
STEPS = 2 * (1437 // 64)
# float64: the two runs differ only in the order of summing each batch's terms (two halves, then averaged),
# ~1e-16 relative per step. float32: the same reordering costs a few ulp (~1e-7 relative; measured 1.7e-7 over
# these 44 steps on the CPU), and Adam carries it forward slowly; 1e-4 leaves room for that and still sees a wrong batch, which
# changes the very first loss by about a percent.
RTOL = {"float64": 1e-10, "float32": 1e-4}
TORCHRUN_VARIABLES = train.TORCHRUN_VARIABLES

requires_two_gpus = pytest.mark.skipif(not (CUDA_AVAILABLE and torch.cuda.device_count() >= 2),
                                       reason="needs two GPUs and the CUDA build of torch_tiles")


def _single_process_run(device, dtype, tmp_path, monkeypatch) -> dict:
    """The reference: one process on the whole batch, in this process (no launch cost)."""
    for name in TORCHRUN_VARIABLES:  # were pytest itself under torchrun, the script would join that job
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "single.json"
    train.main([*ARGS, "--device", device, "--dtype", dtype, "--quiet", "--json", str(path)])
    return json.loads(path.read_text())


def _torchrun(nproc, device, dtype, tmp_path) -> tuple:
    """Launches the script under torchrun with each rank's output in its own files (progress bars on);
    returns (the json rank 0 wrote, {rank: that rank's stdout + stderr})."""
    path, logs = tmp_path / "ddp.json", tmp_path / "logs"
    here = str(pathlib.Path(torch_tiles.__file__).parents[1])  # so the ranks import this torch_tiles
    # The inherited environment stays (NCCL settings of the machine included); only PYTHONPATH gains a path.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "--log-dir", str(logs), "--redirects", "3",
               str(SCRIPT), *ARGS, "--device", device, "--dtype", dtype, "--json", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    outputs = {rank: "".join(f.read_text() for f in sorted(logs.glob(f"*/attempt_*/{rank}/std*.log")))
               for rank in range(nproc)}
    assert result.returncode == 0, f"{result.stderr[-3000:]}\n" + "\n".join(
        f"--- rank {r}:\n{text[-3000:]}" for r, text in outputs.items())
    return json.loads(path.read_text()), outputs


def _check_two_ranks_match_one_process(ddp: dict, single: dict, outputs: dict, dtype: str) -> None:
    assert (ddp["world_size"], ddp["ddp"], ddp["batch_per_rank"]) == (2, True, 32)
    assert (single["world_size"], single["ddp"]) == (1, False)
    assert len(ddp["losses"]) == len(single["losses"]) == STEPS
    ddp_losses, single_losses = torch.tensor(ddp["losses"]), torch.tensor(single["losses"])
    worst = ((ddp_losses - single_losses).abs() / single_losses.abs()).max().item()
    assert worst < RTOL[dtype], f"loss curves differ by up to {worst:.2e} (relative) over {STEPS} steps"
    assert ddp["param_max_diff_across_ranks"] == 0.0
    if dtype == "float64":  # the final weights too, not only the losses
        assert ddp["param_checksum"] == pytest.approx(single["param_checksum"], rel=1e-10)
    assert [r["rank"] for r in ddp["ranks"]] == [0, 1]
    assert "sample/s" in outputs[0] and "summary:" in outputs[0], "rank 0 shows the progress bar and the report"
    assert outputs[1].strip() == "", f"rank 1 printed:\n{outputs[1][-2000:]}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_two_cpu_ranks_take_the_single_process_steps(dtype, tmp_path, monkeypatch):
    ddp, outputs = _torchrun(2, "cpu", dtype, tmp_path)
    single = _single_process_run("cpu", dtype, tmp_path, monkeypatch)
    _check_two_ranks_match_one_process(ddp, single, outputs, dtype)
    assert [r["tensor_devices"] for r in ddp["ranks"]] == [["cpu"], ["cpu"]]


@requires_two_gpus
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_two_gpu_ranks_take_the_single_gpu_steps(dtype, tmp_path, monkeypatch):
    ddp, outputs = _torchrun(2, "cuda", dtype, tmp_path)
    single = _single_process_run("cuda", dtype, tmp_path, monkeypatch)
    _check_two_ranks_match_one_process(ddp, single, outputs, dtype)
    for rank, record in enumerate(ddp["ranks"]):
        assert record["tensor_devices"] == [f"cuda:{rank}"], record
        held = record["cuda_allocated_bytes"]
        assert held[rank] > 0 and not any(held[:rank] + held[rank + 1:]), \
            f"rank {rank} holds memory on another GPU: bytes per GPU {held}"


@pytest.mark.parametrize("world, batch_size", [(1, 64), (2, 64), (3, 60), (4, 60)])
def test_rank_shares_make_up_the_single_process_batches(world, batch_size):
    """At every step the ranks' shares are disjoint and together are the one-process batch; one rank's
    share is that batch itself, in order."""
    n, seed = 1437, 5
    for epoch in range(2):
        whole = train.epoch_batches(n, batch_size, seed, epoch)
        shares = [train.rank_batches(n, batch_size, seed, epoch, train.Ranks(rank, world, rank, ddp=True))
                  for rank in range(world)]
        assert all(s.shape == (len(whole), batch_size // world) for s in shares)
        together = torch.cat(shares, dim=1)
        assert torch.equal(together.sort(dim=1).values, whole.sort(dim=1).values)
        if world == 1:
            assert torch.equal(shares[0], whole)


@pytest.fixture
def as_rank_0_of_2(monkeypatch):
    """The environment torchrun gives rank 0 of 2, for parse_args (no process group is started)."""
    for name, value in zip(TORCHRUN_VARIABLES, ("0", "2", "0")):
        monkeypatch.setenv(name, value)


def _parse_error(argv, capsys) -> str:
    with pytest.raises(SystemExit):
        train.parse_args(argv)
    return capsys.readouterr().err


def test_global_batch_must_split_evenly(as_rank_0_of_2, capsys):
    assert "must be divisible by the 2 ranks" in _parse_error(["--device", "cpu", "--batch-size", "63"], capsys)
    assert train.parse_args(["--device", "cpu", "--batch-size", "64"]).ddp  # torchrun's environment means DDP


def test_cuda_graphs_refused_under_ddp(as_rank_0_of_2, capsys):
    assert "--cuda-graphs is not supported with DDP" in _parse_error(["--device", "cpu", "--cuda-graphs"], capsys)


def test_ddp_flag_needs_torchrun(monkeypatch, capsys):
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert "started by torchrun" in _parse_error(["--device", "cpu", "--ddp"], capsys)
