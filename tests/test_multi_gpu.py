"""Device guard: tensors on cuda:1 compute on cuda:1 whatever the current device is, and ops on two
GPUs in turn. Runs where at least two GPUs are visible (and the build has CUDA)."""

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from conftest import CUDA_AVAILABLE
from helpers import assert_bmm_close, assert_close_to_ref, assert_reduce_close, cpu64, make_tensor

pytestmark = [pytest.mark.usefixtures("highest_float32_precision"),
              pytest.mark.skipif(not (CUDA_AVAILABLE and torch.cuda.device_count() >= 2), reason="needs two GPUs and the CUDA build")]

T = torch.ops.tiles
F32, F64 = torch.float32, torch.float64
SLEEP_CYCLES = 100_000_000  # tens of milliseconds of GPU time (torch.cuda._sleep)


@pytest.fixture(autouse=True)
def current_device_0():
    old = torch.cuda.current_device()
    torch.cuda.set_device(0)
    yield
    torch.cuda.set_device(old)


# name: (inputs as (shape, layout, domain), op, check(out, *inputs))
CASES = {
    "map": ([((257, 130), "contiguous", "real")],
            lambda x: T.map(x, "exp"),
            lambda out, x: assert_close_to_ref(out, torch.exp(cpu64(x)), F32)),
    "map_transposed": ([((257, 130), "transposed", "real")],
                       lambda x: T.map(x, "tanh"),
                       lambda out, x: assert_close_to_ref(out, torch.tanh(cpu64(x)), F32)),
    "zip_broadcast": ([((64, 1, 33), "contiguous", "real"), ((5, 33), "sliced", "nonzero")],
                      lambda a, b: T.zip(a, b, "div"),
                      lambda out, a, b: assert_close_to_ref(out, cpu64(a) / cpu64(b), F32)),
    "reduce_rows": ([((300, 257), "contiguous", "real")],
                    lambda x: T.reduce(x, [1], "sum"),
                    lambda out, x: assert_reduce_close(out, x, [1], "sum")),
    "reduce_columns": ([((300, 257), "permuted", "grid")],
                       lambda x: T.reduce(x, [0], "min", keepdim=True),
                       lambda out, x: assert_reduce_close(out, x, [0], "min", True)),
    # dim 0 in thread block clusters of 16 on an H100 / H200 (the opt-in is asked per device)
    "reduce_columns_clusters": ([((2100, 1000), "contiguous", "real")],
                                lambda x: T.reduce(x, [0], "sum"),
                                lambda out, x: assert_reduce_close(out, x, [0], "sum")),
    "reduce_all_large": ([((1 << 21,), "contiguous", "real")],
                         lambda x: T.reduce(x, None, "mean"),
                         lambda out, x: assert_reduce_close(out, x, None, "mean")),
    "bmm": ([((3, 65, 33), "contiguous", "real"), ((3, 33, 47), "transposed", "real")],
            lambda a, b: T.bmm(a, b),
            lambda out, a, b: assert_bmm_close(out, a, b)),
}


def _inputs(specs, device):
    return [make_tensor(shape, F32, device, layout, domain=domain) for shape, layout, domain in specs]


@pytest.mark.parametrize("case", CASES)
def test_tensors_on_cuda1_compute_on_cuda1(case):
    specs, op, check = CASES[case]
    inputs = _inputs(specs, "cuda:1")
    assert torch.cuda.current_device() == 0
    out = op(*inputs)
    assert torch.cuda.current_device() == 0, "the op changed the current device"
    assert out.device == torch.device("cuda:1"), out.device
    torch.cuda.synchronize(1)
    check(out, *inputs)


@pytest.mark.parametrize("case", CASES)
def test_tensors_on_cuda0_while_current_device_is_1(case):
    specs, op, check = CASES[case]
    inputs = _inputs(specs, "cuda:0")
    torch.cuda.set_device(1)
    out = op(*inputs)
    assert torch.cuda.current_device() == 1, "the op changed the current device"
    assert out.device == torch.device("cuda:0"), out.device
    torch.cuda.synchronize(0)
    check(out, *inputs)


def test_ops_on_both_devices_in_turn():
    for round_ in range(3):
        for index in (0, 1, 1, 0):
            device = f"cuda:{index}"
            for name, (specs, op, check) in CASES.items():
                inputs = _inputs(specs, device)
                out = op(*inputs)
                assert out.device == torch.device(device), (name, round_, out.device)
                check(out, *inputs)
            assert torch.cuda.current_device() == 0


def test_backward_on_cuda1():
    x = make_tensor((16, 24), F64, "cuda:1", "transposed", requires_grad=True)
    w = make_tensor((24, 8), F64, "cuda:1", requires_grad=True)
    b = make_tensor((8,), F64, "cuda:1", requires_grad=True)
    loss = T.reduce(T.map(T.zip(T.bmm(x, w), b, "add"), "gelu"), None, "sum")
    grads = torch.autograd.grad(loss, (x, w, b))
    assert torch.cuda.current_device() == 0
    leaves = [cpu64(t).requires_grad_(True) for t in (x, w, b)]
    loss_ref = torch.nn.functional.gelu(leaves[0] @ leaves[1] + leaves[2]).sum()
    refs = torch.autograd.grad(loss_ref, leaves)
    for g, ref, t in zip(grads, refs, (x, w, b)):
        assert g.device == torch.device("cuda:1")
        assert g.shape == t.shape
        torch.testing.assert_close(g.cpu(), ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(loss.cpu(), loss_ref.detach(), rtol=1e-10, atol=1e-10)


def test_cuda1_op_follows_cuda1_stream_order():
    # cuda:1's current stream sleeps, then a torch op writes the input on it; the tiles op, called while
    # cuda:0 is current, must queue behind that write on cuda:1's current stream
    src = torch.randn(512, 300, device="cuda:1")
    x = torch.zeros_like(src)
    T.map(x, "neg")  # warm-up on cuda:1
    torch.cuda.synchronize(1)
    with torch.cuda.device(1):
        torch.cuda._sleep(SLEEP_CYCLES)
    x.copy_(src)
    out = T.map(x, "neg")
    assert torch.cuda.current_device() == 0
    assert torch.equal(out.cpu(), -src.cpu())


def test_mixed_cuda0_and_cuda1_inputs_are_rejected():
    a = make_tensor((3, 4), F32, "cuda:0")
    b = make_tensor((3, 4), F32, "cuda:1")
    with pytest.raises(RuntimeError):
        T.zip(a, b, "add")
    with pytest.raises(RuntimeError):
        T.bmm(a, b.t())
    # both devices still work
    for t in (a, b):
        assert_close_to_ref(T.map(t, "exp"), torch.exp(cpu64(t)), F32)
