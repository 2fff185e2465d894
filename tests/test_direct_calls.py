"""torch_tiles.map / zip / reduce / bmm in eager mode call the ops directly (torch_tiles._C, from
binding/direct_calls.cpp) instead of through torch.ops' argument matching. The direct call must be the
same call: the same result, layout, autograd graph and errors, seen by dispatch modes; and it must step
aside (return None, so the wrapper uses torch.ops) wherever torch.ops would do more than dispatch."""
import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tiles
from torch_tiles import _C

T = torch.ops.tiles


def operands(device):
    """One call of each op on awkward layouts: (name, direct call, torch.ops call, inputs)."""
    x = torch.randn(6, 9, dtype=torch.float64, device=device)[:, 1::2].requires_grad_()  # sliced, strided
    a = torch.rand(5, 1, dtype=torch.float64, device=device).add(0.5).requires_grad_()  # broadcast against b
    b = torch.randn(7, dtype=torch.float64, device=device).requires_grad_()
    ma = torch.randn(3, 4, 5, dtype=torch.float64, device=device).mT.requires_grad_()  # transposed
    mb = torch.randn(1, 4, 2, dtype=torch.float64, device=device).requires_grad_()  # batch broadcast
    return [
        ("map", lambda: _C.map(x, "sigmoid"), lambda: T.map.default(x, "sigmoid"), (x,)),
        ("zip", lambda: _C.zip(a, b, "pow"), lambda: T.zip.default(a, b, "pow"), (a, b)),
        ("reduce", lambda: _C.reduce(x, (-1,), "logsumexp", True),
         lambda: T.reduce.default(x, [-1], "logsumexp", True), (x,)),
        ("reduce all", lambda: _C.reduce(x, None, "max", False), lambda: T.reduce.default(x, None, "max"), (x,)),
        ("reduce int dim", lambda: _C.reduce(x, 0, "mean", False), lambda: T.reduce.default(x, [0], "mean"), (x,)),
        ("bmm", lambda: _C.bmm(ma, mb), lambda: T.bmm.default(ma, mb), (ma, mb)),
    ]


@pytest.mark.parametrize("case", range(6), ids=["map", "zip", "reduce", "reduce all", "reduce int dim", "bmm"])
def test_direct_call_is_the_torch_ops_call(device, case):
    name, direct, via_ops, inputs = operands(device)[case]
    out, ref = direct(), via_ops()
    assert out is not None, f"{name}: the direct call declined plain arguments"
    assert (out.dtype, out.shape, out.stride()) == (ref.dtype, ref.shape, ref.stride())
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert type(out.grad_fn) is type(ref.grad_fn)
    g = torch.randn_like(ref)
    grads = torch.autograd.grad(out, inputs, g)
    ref_grads = torch.autograd.grad(ref, inputs, g)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


class _Recorder:
    """Stands in for torch_tiles._C in torch_tiles.ops: records what each direct call returned."""

    def __init__(self, real):
        self.real, self.returned = real, []

    def __getattr__(self, name):
        def call(*args):
            out = getattr(self.real, name)(*args)
            self.returned.append((name, out is not None))
            return out
        return call


def test_wrappers_take_the_direct_call(monkeypatch):
    recorder = _Recorder(_C)
    monkeypatch.setattr(torch_tiles.ops, "_C", recorder)
    x, m = torch.randn(4, 4), torch.nn.Parameter(torch.randn(2, 4, 4))
    torch_tiles.map(x, "exp")
    torch_tiles.zip(x, m[0], "add")  # a Parameter is a plain tensor
    torch_tiles.reduce(x, 1, "sum")
    torch_tiles.bmm(m, m)
    torch_tiles.functional.softmax(x, -1)
    assert recorder.returned[:4] == [("map", True), ("zip", True), ("reduce", True), ("bmm", True)]
    assert recorder.returned[4:] and all(taken for _, taken in recorder.returned[4:])


class _Subclass(torch.Tensor):
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


class _FunctionLog(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def test_direct_call_declines_what_torch_ops_should_take():
    x = torch.randn(3, 4)
    declined = [
        _C.map(x.as_subclass(_Subclass), "exp"),  # may override __torch_function__
        _C.zip(x, 2.0, "add"),  # a number, not a tensor
        _C.zip(x, x, b"add"),  # bytes, not a str
        _C.reduce(x, [np.int64(1)], "sum", False),  # not an exact int
        _C.reduce(x, [1.0], "sum", False),
        _C.reduce(x, 2 ** 70, "sum", False),  # past int64
        _C.reduce(x, list(range(17)), "sum", False),  # more dims than any tensor here
        _C.reduce(x, torch.tensor([1]), "sum", False),
        _C.reduce(x, [1], "sum", 1),  # not a bool
        _C.bmm(x),  # too few arguments
        _C.bmm(x, x, x),
    ]
    assert declined == [None] * len(declined)
    with _FunctionLog():
        assert _C.map(x, "exp") is None


def test_torch_function_overrides_and_modes_see_wrapper_calls():
    x = torch.randn(3, 4)
    xt = x.mT
    _Subclass.seen.clear()
    out = torch_tiles.reduce(x.as_subclass(_Subclass), 1, "sum")
    assert type(out) is _Subclass and T.reduce.default in _Subclass.seen
    with _FunctionLog() as log:
        torch_tiles.map(x, "exp")
        torch_tiles.bmm(x, xt)
    assert log.seen == [T.map.default, T.bmm.default]


def test_wrappers_raise_torch_ops_errors_for_other_arguments():
    x = torch.randn(3, 4)
    for call, via_ops in [(lambda: torch_tiles.zip(x, x, 3), lambda: T.zip.default(x, x, 3)),
                          (lambda: torch_tiles.reduce(x, [1.5], "sum"), lambda: T.reduce.default(x, [1.5], "sum"))]:
        with pytest.raises(RuntimeError) as ours:
            call()
        with pytest.raises(RuntimeError) as theirs:
            via_ops()
        assert str(ours.value) == str(theirs.value)


def test_direct_call_errors_match_torch_ops(device):
    x = torch.randn(3, 4, device=device)
    cases = [(lambda: _C.reduce(x, [2], "sum", False), lambda: T.reduce.default(x, [2], "sum")),
             (lambda: _C.reduce(x, [0, 0], "sum", False), lambda: T.reduce.default(x, [0, 0], "sum")),
             (lambda: _C.map(x, "nope"), lambda: T.map.default(x, "nope")),
             (lambda: _C.zip(x, x.t(), "add"), lambda: T.zip.default(x, x.t(), "add")),
             (lambda: _C.bmm(x, x), lambda: T.bmm.default(x, x)),
             (lambda: _C.map(x.int(), "exp"), lambda: T.map.default(x.int(), "exp"))]
    for direct, via_ops in cases:
        with pytest.raises(Exception) as ours:
            direct()
        with pytest.raises(Exception) as theirs:
            via_ops()
        assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))
    assert torch.equal(_C.map(x, "neg"), -x)  # nothing left behind by the errors


class _DispatchLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def test_dispatch_modes_see_direct_calls():
    # The call leaves the GIL while it runs; a Python dispatch mode takes it back.
    x = torch.randn(3, 4)
    with _DispatchLog() as log:
        _C.reduce(x, [1], "sum", False)
        _C.zip(x, x, "mul")
    assert log.seen == [T.reduce.default, T.zip.default]


def test_fake_tensors_take_torch_ops():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.randn(3, 4))
        assert _C.bmm(fake, fake.mT) is None  # a subclass
        out = torch_tiles.bmm(fake, fake.mT)
    assert isinstance(out, FakeTensor) and out.shape == (3, 3)


def test_compiled_wrappers_trace_torch_ops():
    def f(x, w):
        return torch_tiles.reduce(torch_tiles.map(torch_tiles.bmm(x, w), "gelu"), -1, "sum")
    x, w = torch.randn(2, 5, 3), torch.randn(2, 3, 4)
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="eager")(x, w), f(x, w), rtol=0, atol=0)


def test_warnings_reach_python_as_through_torch_ops(recwarn):
    # A C++ TORCH_WARN inside the op (vmap's fallback for an op without a batching rule) is reported as
    # torch.ops reports it, not as a Python warning that a warnings filter could turn into an error
    # after the result was made (which once leaked the result).
    import warnings
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = torch.func.vmap(lambda t: torch_tiles.map(t, "exp"))(x)
        theirs = torch.func.vmap(lambda t: T.map.default(t, "exp"))(x)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
