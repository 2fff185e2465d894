"""CUDA state: ops on a side stream (results and stream order), CUDA-graph capture and replay of every
op (and of a backward pass), and bad-input errors that leave the CUDA context usable. CUDA only."""

import pytest
import torch

import torch_tiles  # noqa: F401  (registers torch.ops.tiles)
from conftest import requires_cuda
from helpers import assert_bmm_close, assert_close_to_ref, assert_reduce_close, cpu64, make_tensor

pytestmark = [requires_cuda, pytest.mark.usefixtures("highest_float32_precision")]

T = torch.ops.tiles
F32, F64 = torch.float32, torch.float64
# torch.cuda._sleep spins this many GPU clock cycles (tens of milliseconds at ~1.5-2 GHz): long
# enough that a kernel launched on a stream other than the side stream would run before the side
# stream has written the op's input
SLEEP_CYCLES = 100_000_000


# ------------------------------------------------------------------------------------ side stream

# name: (input shapes, op, check(out, *inputs)); check gets the op's device inputs and compares with
# PyTorch in float64 on the CPU
STREAM_CASES = {
    "map": ([(512, 257)],
            lambda x: T.map(x, "exp"),
            lambda out, x: assert_close_to_ref(out, torch.exp(cpu64(x)), F32)),
    "map_transposed": ([(257, 512)],
                       lambda x: T.map(x.t(), "sin"),
                       lambda out, x: assert_close_to_ref(out, torch.sin(cpu64(x).t()), F32)),
    "zip": ([(512, 257), (257,)],
            lambda a, b: T.zip(a, b, "mul"),
            lambda out, a, b: assert_close_to_ref(out, cpu64(a) * cpu64(b), F32)),
    "reduce_rows": ([(512, 257)],
                    lambda x: T.reduce(x, [1], "sum"),
                    lambda out, x: assert_reduce_close(out, x, [1], "sum")),
    "reduce_all": ([(1 << 20,)],
                   lambda x: T.reduce(x, None, "max"),
                   lambda out, x: assert_reduce_close(out, x, None, "max")),
    "bmm": ([(4, 65, 33), (4, 33, 47)],
            lambda a, b: T.bmm(a, b),
            lambda out, a, b: assert_bmm_close(out, a, b)),
}


@pytest.mark.parametrize("case", STREAM_CASES)
def test_side_stream_results_and_order(case):
    shapes, op, check = STREAM_CASES[case]
    sources = [torch.randn(s, device="cuda") for s in shapes]
    inputs = [torch.zeros_like(s) for s in sources]  # zeros until the side stream writes them
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        # warm-up on the side stream (module loading, the allocator's blocks for this stream), so
        # that nothing below has a reason to wait for the device
        op(*inputs)
        _ = [src * 2 for src in sources]
        torch.cuda.synchronize()
        torch.cuda._sleep(SLEEP_CYCLES)
        for dst, src in zip(inputs, sources):
            dst.copy_(src * 2)  # written by a torch op on the side stream, after the sleep
        out = op(*inputs)  # must be queued on the side stream, after those writes
        # ... and queued, not waited for: the side stream is still asleep when the call returns
        assert not side.query(), "the op blocked the host until the stream's work was done"
    torch.cuda.current_stream().wait_stream(side)
    result = out.clone()  # on the default stream, ordered after the side stream's work
    torch.cuda.synchronize()
    check(result, *inputs)


def test_side_stream_backward():
    src_x = torch.randn(64, 96, device="cuda", dtype=F64)
    src_w = torch.randn(96, 48, device="cuda", dtype=F64)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        x = (src_x * 2).requires_grad_(True)
        w = (src_w * 2).requires_grad_(True)
        loss = T.reduce(T.map(T.bmm(x, w), "tanh"), None, "sum")
        gx, gw = torch.autograd.grad(loss, (x, w))
    torch.cuda.current_stream().wait_stream(side)
    results = [loss.detach().clone(), gx.clone(), gw.clone()]
    torch.cuda.synchronize()

    x64 = (cpu64(src_x) * 2).requires_grad_(True)
    w64 = (cpu64(src_w) * 2).requires_grad_(True)
    loss_ref = torch.tanh(x64 @ w64).sum()
    refs = [loss_ref.detach(), *torch.autograd.grad(loss_ref, (x64, w64))]
    for got, ref in zip(results, refs):
        torch.testing.assert_close(got.cpu(), ref, rtol=1e-10, atol=1e-10)


def test_two_side_streams_in_turn():
    # op on stream 1, then on stream 2 reading stream 1's result after wait_stream
    x = torch.randn(300, 200, device="cuda")
    T.reduce(T.map(x, "exp"), [0], "sum")  # warm-up
    torch.cuda.synchronize()
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(SLEEP_CYCLES)
        y = T.map(x, "exp")
    s2.wait_stream(s1)
    with torch.cuda.stream(s2):
        z = T.reduce(y, [0], "sum")
    torch.cuda.current_stream().wait_stream(s2)
    result = z.clone()
    torch.cuda.synchronize()
    assert_close_to_ref(y, torch.exp(cpu64(x)), F32)
    assert_reduce_close(result, y, [0], "sum")


# ------------------------------------------------------------------------------------- CUDA graphs

def _capture(run, statics):
    """Warm up on a side stream (as the CUDA-graph docs ask), then capture ``run(*statics)``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run(*statics)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run(*statics)
    return graph, out


# name: (inputs as (shape, layout, domain), op, check(out, *inputs)); float32 throughout
GRAPH_CASES = {
    "map_exp_contiguous": ([((1000, 37), "contiguous", "real")],
                           lambda x: T.map(x, "exp"),
                           lambda out, x: assert_close_to_ref(out, torch.exp(cpu64(x)), F32)),
    "map_log_transposed": ([((257, 130), "transposed", "positive")],
                           lambda x: T.map(x, "log"),
                           lambda out, x: assert_close_to_ref(out, torch.log(cpu64(x)), F32)),
    "map_gelu_sliced": ([((3, 65, 33), "sliced", "real")],
                        lambda x: T.map(x, "gelu"),
                        lambda out, x: assert_close_to_ref(
                            out, torch.nn.functional.gelu(cpu64(x)), F32)),
    "zip_add_row": ([((300, 257), "contiguous", "real"), ((257,), "contiguous", "real")],
                    lambda a, b: T.zip(a, b, "add"),
                    lambda out, a, b: assert_close_to_ref(out, cpu64(a) + cpu64(b), F32)),
    "zip_div_column_permuted": ([((4, 50, 60), "permuted", "real"), ((4, 50, 1), "contiguous", "nonzero")],
                                lambda a, b: T.zip(a, b, "div"),
                                lambda out, a, b: assert_close_to_ref(out, cpu64(a) / cpu64(b), F32)),
    "zip_ge_transposed": ([((128, 96), "transposed", "coarse"), ((128, 96), "contiguous", "coarse")],
                          lambda a, b: T.zip(a, b, "ge"),
                          lambda out, a, b: assert_close_to_ref(
                              out, (cpu64(a) >= cpu64(b)).double(), exact=True)),
    "reduce_sum_rows": ([((777, 301), "contiguous", "real")],
                        lambda x: T.reduce(x, [1], "sum"),
                        lambda out, x: assert_reduce_close(out, x, [1], "sum")),
    "reduce_max_columns": ([((301, 777), "contiguous", "grid")],
                           lambda x: T.reduce(x, [0], "max"),
                           lambda out, x: assert_reduce_close(out, x, [0], "max")),
    "reduce_mean_all_large": ([((1 << 21,), "contiguous", "real")],
                              lambda x: T.reduce(x, None, "mean"),
                              lambda out, x: assert_reduce_close(out, x, None, "mean")),
    "reduce_prod_dims_permuted": ([((6, 7, 8), "permuted", "near_one")],
                                  lambda x: T.reduce(x, [0, -1], "prod", keepdim=True),
                                  lambda out, x: assert_reduce_close(out, x, [0, -1], "prod", True)),
    "bmm_batched": ([((3, 65, 33), "contiguous", "real"), ((3, 33, 129), "contiguous", "real")],
                    lambda a, b: T.bmm(a, b),
                    lambda out, a, b: assert_bmm_close(out, a, b)),
    "bmm_transposed_broadcast": ([((33, 65), "transposed", "real"), ((1, 65, 17), "transposed", "real")],
                                 lambda a, b: T.bmm(a, b.expand(4, 65, 17)),
                                 lambda out, a, b: assert_bmm_close(out, a, b.expand(4, 65, 17))),
}


def _fill(static, domain):
    """New values into a static input (a view, possibly strided: its storage is what the graph reads)."""
    new = make_tensor(tuple(static.shape), static.dtype, "cpu", domain=domain)
    with torch.no_grad():
        static.copy_(new)


@pytest.mark.parametrize("case", GRAPH_CASES)
def test_cuda_graph_capture_and_replay(case):
    specs, op, check = GRAPH_CASES[case]
    statics = [make_tensor(shape, F32, "cuda", layout, domain=domain) for shape, layout, domain in specs]
    graph, out = _capture(op, statics)
    for _ in range(3):  # each replay with fresh values in the static inputs
        for static, (_, _, domain) in zip(statics, specs):
            _fill(static, domain)
        graph.replay()
        torch.cuda.synchronize()
        check(out, *statics)
    # and eager calls still work after capturing
    check(op(*statics), *statics)


def test_cuda_graph_capture_of_backward():
    # float64: forward and backward of every op in one graph, checked against PyTorch's gradients
    x = make_tensor((64, 96), F64, "cuda", "transposed").requires_grad_(True)
    w = make_tensor((96, 48), F64, "cuda").requires_grad_(True)
    b = make_tensor((48,), F64, "cuda").requires_grad_(True)

    def step(x, w, b):
        h = T.map(T.zip(T.bmm(x, w), b, "add"), "gelu")
        loss = T.reduce(T.reduce(h, [1], "max"), None, "sum")
        return (loss, *torch.autograd.grad(loss, (x, w, b)))

    graph, outs = _capture(step, [x, w, b])
    for _ in range(3):
        for static in (x, w, b):
            _fill(static, "real")
        graph.replay()
        torch.cuda.synchronize()
        leaves = [cpu64(t).requires_grad_(True) for t in (x, w, b)]
        h = torch.nn.functional.gelu(leaves[0] @ leaves[1] + leaves[2])
        loss_ref = h.amax(dim=1).sum()
        refs = [loss_ref.detach(), *torch.autograd.grad(loss_ref, leaves)]
        for i, (got, ref) in enumerate(zip(outs, refs)):
            torch.testing.assert_close(got.detach().cpu(), ref, rtol=1e-10, atol=1e-10,
                                       msg=lambda m, i=i: f"output {i} of the replayed graph:\n{m}")


# ------------------------------------------------------------------- errors do not poison the context

def f32(*shape):
    return make_tensor(shape, F32, "cuda")


def _unmergeable_26d():
    """[2] * 26, stride-0 every other dim so no two adjacent dims merge (see test_errors)."""
    base = make_tensor((2 ** 13,), F32, "cuda")
    strides, real = [], 2 ** 12
    for i in range(26):
        strides.append(real if i % 2 == 0 else 0)
        if i % 2 == 0:
            real //= 2
    return base.as_strided([2] * 26, strides)


BAD_CALLS = {
    "map_unknown_fn": lambda: T.map(f32(3, 4), "bogus_fn"),
    "zip_unknown_fn": lambda: T.zip(f32(3, 4), f32(4), "bogus_fn"),
    "reduce_unknown_fn": lambda: T.reduce(f32(3, 4), None, "bogus_fn"),
    "zip_shapes_do_not_broadcast": lambda: T.zip(f32(2, 3), f32(4, 5), "add"),
    "zip_empty_vs_2": lambda: T.zip(f32(0, 3), f32(2, 3), "mul"),
    "bmm_inner_mismatch": lambda: T.bmm(f32(2, 3, 4), f32(2, 5, 6)),
    "bmm_batch_mismatch": lambda: T.bmm(f32(2, 3, 4), f32(3, 4, 5)),
    "bmm_rank": lambda: T.bmm(f32(2, 2, 3, 4), f32(2, 2, 4, 5)),
    "bmm_dtype_mismatch": lambda: T.bmm(f32(2, 3, 4), f32(2, 4, 5).double()),
    "reduce_dim_out_of_range": lambda: T.reduce(f32(3, 4), [2], "sum"),
    "reduce_dim_negative_out_of_range": lambda: T.reduce(f32(3, 4), [-3], "mean"),
    "reduce_dim_repeated": lambda: T.reduce(f32(3, 4), [1, -1], "sum"),
    "reduce_max_of_empty": lambda: T.reduce(f32(0, 3), [0], "max"),
    "non_float_dtype": lambda: T.map(torch.arange(6, device="cuda"), "exp"),
    "inputs_on_cpu_and_cuda": lambda: T.zip(f32(3), torch.ones(3), "add"),
    "more_than_25_dims": lambda: T.map(_unmergeable_26d(), "neg"),
}


def _every_op_works():
    x = make_tensor((33, 65), F32, "cuda", "transposed")
    assert_close_to_ref(T.map(x, "exp"), torch.exp(cpu64(x)))
    row = make_tensor((65,), F32, "cuda")
    assert_close_to_ref(T.zip(x, row, "sub"), cpu64(x) - cpu64(row))
    y = make_tensor((5, 6, 7), F32, "cuda", "permuted")
    assert_reduce_close(T.reduce(y, [0, 2], "sum"), y, [0, 2], "sum")
    assert_reduce_close(T.reduce(y, None, "max"), y, None, "max")
    a = make_tensor((3, 17, 9), F32, "cuda")
    b = make_tensor((3, 9, 11), F32, "cuda", "transposed")
    assert_bmm_close(T.bmm(a, b), a, b)
    # and a backward pass
    leaf = make_tensor((4, 5), F64, "cuda").requires_grad_(True)
    (g,) = torch.autograd.grad(T.reduce(T.map(leaf, "sin"), None, "sum"), leaf)
    torch.testing.assert_close(g.cpu(), torch.cos(cpu64(leaf)), rtol=1e-12, atol=1e-12)
    torch.cuda.synchronize()


@pytest.mark.parametrize("bad", BAD_CALLS)
def test_error_does_not_poison_context(bad):
    _every_op_works()
    with pytest.raises(RuntimeError):
        BAD_CALLS[bad]()
    torch.cuda.synchronize()  # no sticky CUDA error left behind
    _every_op_works()
    # the same error again, then valid calls again (nothing cached from the failed call)
    with pytest.raises(RuntimeError):
        BAD_CALLS[bad]()
    _every_op_works()


def test_errors_on_a_side_stream_do_not_poison_it():
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for bad in BAD_CALLS.values():
            with pytest.raises(RuntimeError):
                bad()
        _every_op_works()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    _every_op_works()

