"""The benchmark harness's timing rounds (benchmarks/run.py), with a stand-in clock: runs on the CPU."""
import importlib.util
import os
import sys

import pytest

BENCH_DIR = os.path.join(os.path.dirname(__file__), "..", "benchmarks")


@pytest.fixture
def run_module(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)  # run.py imports its sibling cases.py
    spec = importlib.util.spec_from_file_location("tiles_bench_run", os.path.join(BENCH_DIR, "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("cases", None)


def test_rounds_alternate_and_report_medians(run_module, monkeypatch):
    calls = []
    times = {"tiles": iter([1.0, 4.0, 2.0]), "torch": iter([3.0, 2.0, 9.0])}
    monkeypatch.setattr(run_module, "bench_ms", lambda fn: fn())

    def timed(name):
        def fn():
            calls.append(name)
            return next(times[name])
        return fn

    tiles_ms, torch_ms, (lo, hi) = run_module.time_pair(timed("tiles"), timed("torch"), rounds=3)
    # round 0 tiles first, round 1 torch first, round 2 tiles first
    assert calls == ["tiles", "torch", "torch", "tiles", "tiles", "torch"]
    assert (tiles_ms, torch_ms) == (2.0, 3.0)
    assert (lo, hi) == (0.5, 4.5)  # per-round speedups 3/1, 2/4, 9/2


def test_one_round_is_one_pair(run_module, monkeypatch):
    monkeypatch.setattr(run_module, "bench_ms", lambda fn: fn())
    tiles_ms, torch_ms, spread = run_module.time_pair(lambda: 2.0, lambda: 3.0, rounds=1)
    assert (tiles_ms, torch_ms, spread) == (2.0, 3.0, (1.5, 1.5))


def test_storage_bytes_counts_a_shared_storage_once(run_module):
    import torch
    s, row = torch.randn(8, 8), torch.randn(8)
    counted = run_module.storage_bytes((s, s.t(), row.expand(8, 8)))
    assert sorted(counted.values()) == [8 * 4, 64 * 4]  # s and s.t() read one storage; the row its 8 floats
