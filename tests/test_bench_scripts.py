"""The CPU dry runs of benchmarks/bmm_grid.py, benchmarks/gpt_block.py (tiny shapes, perf_counter
clock) and benchmarks/train_step.py, so that the GPU runs do not find a broken script; plus their case
lists and failure rows."""
import importlib.util
import json
import math
import os
import re
import subprocess
import tarfile
import sys

import pytest
import torch

BENCH_DIR = os.path.join(os.path.dirname(__file__), "..", "benchmarks")
NAME = re.compile(r"^grid bmm (bf16|fp16|tf32|fp32|fp64) (NN|TN|NT|TT) B=(-|\d+) M=\d+ N=\d+ K=\d+$")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny shapes: intra-op threads only cost time (a lot of it on a loaded machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _load(name):
    spec = importlib.util.spec_from_file_location(f"tiles_bench_{name}", os.path.join(BENCH_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def grid(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)  # the scripts import their sibling results_file.py
    yield _load("bmm_grid")
    sys.modules.pop("results_file", None)


@pytest.fixture
def gpt(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)
    yield _load("gpt_block")
    sys.modules.pop("results_file", None)


def _file_rows(out_dir):
    (path,) = [p for p in os.listdir(out_dir) if p.endswith(".json")]
    with open(os.path.join(out_dir, path)) as f:
        return {row["name"]: row for row in json.load(f)["cases"]}


def test_grid_cases_are_unique_and_named_by_the_convention(grid):
    cases = grid.grid_cases()
    names = [c.name for c in cases]
    assert len(names) == len(set(names))
    assert all(NAME.match(n) for n in names)
    for prec in grid.PRECISIONS:
        layouts = {c.layout for c in cases if c.prec == prec}
        assert layouts == set(grid.LAYOUTS)
    assert all(c.shape.flops() <= grid.FP64_MAX_GFLOP * 1e9 for c in cases if c.prec == "fp64")
    assert any(c.shape.b is None for c in cases) and any(c.shape.b == 1 for c in cases)
    assert "B=- M=8192 N=3072 K=768" in " ".join(names)  # a d=768 forward, 2-D
    assert grid.random_shapes() == grid.random_shapes()  # seeded
    quick = grid.grid_cases(quick=True)
    assert 0 < len(quick) < len(cases) and {c.prec for c in quick} == set(grid.PRECISIONS)


def test_grid_dry_run(grid, tmp_path, capsys):
    rows = grid.main(["--device", "cpu", "--out", str(tmp_path)])  # the whole grid, every dim / 128
    assert rows and all("failed" not in r for r in rows)
    assert {r["name"].split()[2] for r in rows} == set(grid.PRECISIONS)
    assert {r["name"].split()[3] for r in rows} == set(grid.LAYOUTS)
    for r in rows:
        assert NAME.match(r["name"]) and r["speedup"] > 0 and r["path"] == "cpu"
        assert r["fro_err"] < 1e-2 and r["max_err"] < 5e-2
    assert any("floor_ms" in r for r in rows)
    stored = _file_rows(tmp_path)
    assert set(stored) == {r["name"] for r in rows}
    assert all(row["device"] == "cpu" for row in stored.values())
    out = capsys.readouterr().out
    assert "estimated" in out and "geomean" in out and "fp64" in out


def test_grid_records_a_failing_case_and_goes_on(grid, tmp_path, monkeypatch):
    real = torch.ops.tiles

    class Failing:
        def bmm(self, a, b):
            if a.dtype == torch.float64:
                raise RuntimeError("out of memory (stand-in)")
            return real.bmm(a, b)

        def _bmm_path(self, a, b):
            return real._bmm_path(a, b)

        def _bmm_tile(self, a, b):
            return real._bmm_tile(a, b)
    monkeypatch.setattr(grid, "T", Failing())
    rows = grid.main(["--device", "cpu", "--prec", "fp32,fp64", "-k", "small batched", "--out", str(tmp_path)])
    failed = [r for r in rows if "failed" in r]
    assert failed and all(" fp64 " in r["name"] and "out of memory" in r["failed"] for r in failed)
    assert any("speedup" in r for r in rows)
    assert set(_file_rows(tmp_path)) == {r["name"] for r in rows}


def test_grid_list_only(grid, capsys):
    assert grid.main(["--list", "--prec", "bf16"]) == []
    assert re.search(r"^\d+ cases \(bf16 \d+\); estimated \d+ s", capsys.readouterr().out)


def test_grid_names_file_selects_those_cases(grid, capsys, tmp_path):
    names = [c.name for c in grid.grid_cases(["bf16", "fp64"], False, "")][3:5]
    (tmp_path / "names.txt").write_text("\n".join(names + ["grid bmm bf16 NN B=1 M=1 N=1 K=1 (no such case)"]))
    assert grid.main(["--list", "--prec", "bf16,fp64", "--names", str(tmp_path / "names.txt")]) == []
    assert re.search(r"^2 cases \(bf16 2, fp64 0\)", capsys.readouterr().out)


def test_grid_routes_lists_the_cases_whose_path_or_tile_changed(grid, tmp_path, capsys, monkeypatch):
    # a stand-in build whose routes depend on the case's precision, as the plans' do: float32 under "high"
    # takes a "tf32" path on 128 x 128 tiles, the rest "cpu" with no tile
    class Routes:
        def _bmm_path(self, a, b):
            high = a.dtype == torch.float32 and torch.get_float32_matmul_precision() == "high"
            return "stand-in tf32" if high else "cpu"

        def _bmm_tile(self, a, b):
            return "128x128" if a.dtype == torch.float32 else ""
    monkeypatch.setattr(grid, "T", Routes())
    cases = [c.name for c in grid.grid_cases(["bf16", "tf32"], False, "small batched") if c.layout == "NN"]
    bf16_a, bf16_b, tf32_a, tf32_b = cases
    rows = [{"name": bf16_a, "path": "cpu"},                      # unchanged: no tile either way
            {"name": bf16_b, "path": "cpu", "tile": "64x64"},     # the tile changed
            {"name": tf32_a, "path": "old tf32", "tile": "128x128"},  # the path changed
            {"name": "grid bmm fp32 NN B=1 M=1 N=1 K=1", "path": "x"}]  # not selected; tf32_b has no row
    (tmp_path / "results.json").write_text(json.dumps({"cases": rows}))
    before = torch.get_float32_matmul_precision()
    changed = grid.main(["--routes", str(tmp_path / "results.json"), "--changed-names", str(tmp_path / "moved.txt"),
                         "--prec", "bf16,tf32", "--layouts", "NN", "-k", "small batched", "--device", "cpu"])
    assert [name for name, _, _ in changed] == [bf16_b, tf32_a]
    assert changed[1][1:] == (("old tf32", "128x128"), ("stand-in tf32", "128x128"))
    assert (tmp_path / "moved.txt").read_text().split("\n") == [bf16_b, tf32_a, ""]
    assert torch.get_float32_matmul_precision() == before
    assert "2 of 4 cases change path or tile" in capsys.readouterr().out


def test_grid_report_against_grades_the_retimed_rows(grid, tmp_path, capsys):
    def row(name, tiles_ms, speedup, commit, path="thin few-columns"):
        return {"name": name, "tiles_ms": tiles_ms, "torch_ms": tiles_ms * speedup, "speedup": speedup,
                "commit": commit, "path": path}
    slow, fast, same = ("grid bmm fp32 TN B=2 M=88 N=3 K=2025", "grid bmm fp32 NN B=2 M=88 N=3 K=2025",
                        "grid bmm bf16 NN B=- M=64 N=64 K=64")
    old = [row(slow, 0.0122, 6.0, "aaa"), row(fast, 0.0100, 2.0, "aaa"), row(same, 0.0050, 1.0, "bbb", "hopper"),
           row("grid bmm fp64 NN B=1 M=8 N=8 K=8", 0.004, 1.0, "aaa")]
    new = [row(slow, 0.0207, 3.6, "ccc1"), row(fast, 0.0080, 2.4, "ccc1"), row(same, 0.0051, 1.0, "bbb", "hopper"),
           {"name": "grid bmm fp64 NN B=1 M=8 N=8 K=8", "failed": "RuntimeError: stand-in", "commit": "ccc1"},
           row("grid bmm fp32 TT B=2 M=88 N=3 K=2025", 0.02, 1.0, "ccc1")]  # no row before: not graded
    (tmp_path / "old.json").write_text(json.dumps({"cases": old}))
    (tmp_path / "new.json").write_text(json.dumps({"cases": new}))
    pairs = grid.main(["--report", str(tmp_path / "new.json"), "--against", str(tmp_path / "old.json")])
    assert sorted(name for name, _, _ in pairs) == sorted([slow, fast])  # commit changed, timed both times
    out = capsys.readouterr().out
    assert re.search(r"^fp32 +NN +1 +0\.800x +1 +0 +2\.000x -> 2\.400x", out, re.M)
    assert re.search(r"^fp32 +TN +1 +1\.697x +0 +1 +6\.000x -> 3\.600x", out, re.M)
    slowed = out.split("slowed most")[1].split("sped up most")[0]
    assert slowed.index("TN B=2 M=88") < slowed.index("NN B=2 M=88")
    assert re.search(r"1\.697 +fp32 TN B=2 M=88 N=3 K=2025 +12\.2 -> +20\.7", out)
    # --commit picks the rows of one run, whatever their commit was before
    pairs = grid.main(["--report", str(tmp_path / "new.json"), "--against", str(tmp_path / "old.json"),
                       "--commit", "bbb"])
    assert [name for name, _, _ in pairs] == [same]


def test_grid_report_groups_rows_and_names_the_one_round_slow_ones(grid, tmp_path, capsys):
    def row(name, speedup, path, source, rounds=None, spread=None):
        r = {"name": name, "speedup": speedup, "path": path, "source": source,
             "speedup_rounds": spread or [speedup, speedup], "tiles_ms": 1.0, "torch_ms": speedup}
        return r if rounds is None else {**r, "rounds": rounds}
    rows = [row("grid bmm bf16 NN B=- M=64 N=64 K=64", 0.5, "mma-sync bf16 unaligned 4-byte", "random #1"),
            row("grid bmm bf16 TN B=- M=64 N=64 K=64", 0.8, "mma-sync bf16 unaligned 8-byte", "random #1",
                spread=[0.7, 0.9]),  # timed in several rounds before rows recorded how many
            {**row("grid bmm bf16 NT B=- M=64 N=64 K=64", 0.9, "hopper-wgmma", "linear d=768", rounds=3),
             "tile": "128x96"},
            {**row("grid bmm bf16 TT B=- M=64 N=64 K=64", 2.0, "hopper-wgmma", "linear d=768", rounds=1),
             "tile": "128x160"},
            row("grid bmm fp64 NN B=- M=64 N=64 K=64", 0.6, "general: few output tiles", "small batched", rounds=1),
            {"name": "grid bmm fp64 TN B=- M=64 N=64 K=64", "failed": "RuntimeError: stand-in", "source": "small"},
            {"name": "cpu map exp fp32 2048x4096", "speedup": 0.1}]
    results = tmp_path / "gpu.json"
    results.write_text(json.dumps({"device": "stand-in", "cases": rows}))
    names = tmp_path / "slow.txt"
    assert grid.main(["--report", str(results), "--below-names", str(names)]) == []
    out = capsys.readouterr().out
    # bf16: the mma-sync rows as one kernel (0.5x and 0.8x: geomean 0.632x, both below 0.95x), its share
    # of the log geomean over the 4 bf16 rows ln(0.4) / 4 = -0.2291
    assert re.search(r"mma-sync bf16 unaligned +2 rows +0\.632x +2 below 0\.95x +share -0\.2291", out)
    assert re.search(r"hopper-wgmma +2 rows +1\.342x +1 below 0\.95x", out)
    assert re.search(r"general +1 rows +0\.600x", out) and "by shape source" in out
    assert re.search(r"^fp64 +2 +0\.600x", out, re.M)  # the failed row counted, not averaged
    assert names.read_text().split("\n")[:-1] == ["grid bmm bf16 NN B=- M=64 N=64 K=64",
                                                  "grid bmm fp64 NN B=- M=64 N=64 K=64"]
    # the rows on chosen tiles, whatever their speed, for re-timing after a kernel change
    on = tmp_path / "on.txt"
    grid.main(["--report", str(results), "--tiles", "128x160,64x64", "--tile-names", str(on)])
    assert on.read_text().split("\n")[:-1] == ["grid bmm bf16 TT B=- M=64 N=64 K=64"]
    grid.main(["--report", str(results), "--tiles", "128x96", "--tile-names", str(on), "--prec", "fp64"])
    assert on.read_text() == ""
    with pytest.raises(SystemExit):
        grid.main(["--report", str(results), "--tile-names", str(on)])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_scripts_exit_without_a_gpu(grid, gpt):
    with pytest.raises(SystemExit, match="needs a GPU"):
        grid.main(["--prec", "bf16", "--limit", "1"])
    with pytest.raises(SystemExit, match="needs a GPU"):
        gpt.main(["--prec", "bf16"])
    with pytest.raises(SystemExit, match="needs a GPU"):
        _load("profile_gpt_block").main([])


TINY = ["--device", "cpu", "--d", "32", "--heads", "2", "--batch", "2", "--seq", "16", "--steps", "1",
        "--windows", "2", "--warmup", "0"]


def test_gpt_block_dry_run(gpt, tmp_path):
    rows = gpt.main(TINY + ["--out", str(tmp_path)])
    assert [r["name"] for r in rows] == ["train gpt-block bf16", "train gpt-block tf32", "train gpt-block fp32"]
    for r in rows:
        assert r["agree"] and r["speedup"] > 0 and r["tiles_ms"] > 0
    assert set(_file_rows(tmp_path)) == {r["name"] for r in rows}


def test_gpt_block_variants_differ_only_in_the_matmul(gpt, monkeypatch):
    calls = []

    def counting(a, b):
        calls.append((a.dim(), b.dim()))
        return torch.matmul(a, b)
    monkeypatch.setitem(gpt.MATMULS, "tiles", counting)
    setup = gpt.Setup("fp32", 32, 2, 2, 16, "cpu")
    setup.step("tiles")
    assert calls == [(3, 2), (4, 4), (4, 4), (3, 2), (3, 2), (3, 2)]  # qkv, q@k^T, p@v, out, mlp in, mlp out


def test_profile_gpt_block_dry_run(gpt, capsys):
    # the profiler's op table of each variant on the CPU: the tiles step's products are tiles::bmm calls
    profiler = _load("profile_gpt_block")
    totals = profiler.main(["--device", "cpu", "--prec", "fp32", "--steps", "1", "--rows", "40"])
    assert totals["tiles"] > 0 and totals["native"] > 0
    out = capsys.readouterr().out
    tiles_part, native_part = out.split("\nnative:")
    assert "tiles::bmm" in tiles_part and "tiles::bmm" not in native_part
    assert "SUMMARY fp32: tiles" in out


def test_gpt_block_records_a_failing_precision(gpt, tmp_path, monkeypatch):
    def broken(a, b):
        if a.dtype == torch.bfloat16:
            raise RuntimeError("kernel failed (stand-in)")
        return torch.matmul(a, b)
    monkeypatch.setitem(gpt.MATMULS, "tiles", broken)
    rows = gpt.main(TINY + ["--prec", "bf16,fp32", "--out", str(tmp_path)])
    assert "kernel failed" in rows[0]["failed"] and rows[1]["agree"]
    assert set(_file_rows(tmp_path)) == {"train gpt-block bf16", "train gpt-block fp32"}


def test_grid_budget_stops_starting_cases(grid, tmp_path, capsys):
    rows = grid.main(["--device", "cpu", "--prec", "bf16", "--budget-s", "1e-9", "--out", str(tmp_path)])
    assert len(rows) < len(grid.grid_cases(["bf16"]))
    assert "not run (budget)" in capsys.readouterr().out


def test_train_step_dry_run(tmp_path):
    # The train case on the CPU, end to end: the mode runs in a child process that hands its row back.
    script = os.path.join(BENCH_DIR, "train_step.py")
    subprocess.run([sys.executable, script, "--device", "cpu", "-k", "train mlp", "--rounds", "1", "--steps", "2",
                    "--out", str(tmp_path)], check=True, capture_output=True, text=True)
    rows = _file_rows(tmp_path)
    assert list(rows) == ["train mlp eager"]
    row = rows["train mlp eager"]
    assert row["unit"] == "ms/step" and row["tiles_ms"] > 0 and row["torch_ms"] > 0
    assert row["speedup"] == pytest.approx(row["torch_ms"] / row["tiles_ms"], rel=1e-2)


@pytest.fixture
def bmm_paths(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)  # the script imports its sibling local_build.py
    precision = torch.get_float32_matmul_precision()
    yield _load("bmm_paths")
    torch.set_float32_matmul_precision(precision)


def test_bmm_paths_presets(bmm_paths):
    small = bmm_paths.small_float32_cases()
    assert len({c.name() for c in small}) == len(small)
    macs = [max(c.batch, 1) * c.m * c.n * c.k for c in small]
    assert min(macs) <= 2**24 < max(macs)  # both sides of the limit in bmm/bmm.cu
    assert {c.dtype for c in bmm_paths.general_cases()} == {torch.bfloat16, torch.float16, torch.float64}
    skinny = bmm_paths.skinny_float32_cases()
    assert len({c.name() for c in skinny}) == len(skinny) and {c.dtype for c in skinny} == {torch.float32}
    assert {c.k for c in skinny} >= {512, 1000, 1100, 4096}  # both sides of bmm.cu's K limit of 1024


def test_bmm_paths_slow_grid_cases(bmm_paths, tmp_path):
    # a precision's grid rows below the bar, slowest first, in its dtype; other precisions, fast rows and
    # products over the multiply-add cap left out
    rows = [{"name": "grid bmm tf32 TN B=- M=8 N=9 K=10", "speedup": 0.9},
            {"name": "grid bmm tf32 NT B=3 M=5 N=6 K=7", "speedup": 0.5},
            {"name": "grid bmm tf32 NN B=1 M=4 N=4 K=4", "speedup": 1.2},
            {"name": "grid bmm tf32 NN B=2 M=4096 N=4096 K=4096", "speedup": 0.7},
            {"name": "grid bmm bf16 NN B=- M=8 N=8 K=8", "speedup": 0.4},
            {"name": "bmm bf16 4096^3", "speedup": 0.4}]
    results = tmp_path / "gpu.json"
    results.write_text(json.dumps({"cases": rows}))
    cases = bmm_paths.slow_grid_cases("tf32", max_multiply_adds=2**20, results=str(results))
    assert [(c.name(), c.dtype) for c in cases] == [("float32 NT 3x5x6x7", torch.float32),
                                                     ("float32 TN 8x9x10", torch.float32)]
    assert [c.dtype for c in bmm_paths.slow_grid_cases("bf16", results=str(results))] == [torch.bfloat16]
    assert bmm_paths.GRID_PRECISIONS["tf32"][1] == "high" and "slow-grid-fp64" in bmm_paths.PRESETS


def test_bmm_paths_dry_run(bmm_paths, capsys, tmp_path):
    out_file = tmp_path / "rows.jsonl"
    bmm_paths.main(["--device", "cpu", "--shape", "0,5,7,3,TN", "--shape", "2,4,6,8", "--dtype", "float64",
                    "--out", str(out_file)])
    out = capsys.readouterr().out.splitlines()
    lines, summary = out[1:3], out[3:]
    assert [line.split()[:3] for line in lines] == [["float64", "TN", "5x7x3"], ["float64", "NN", "2x4x6x8"]]
    assert summary[1].startswith("0 of 2 cases have a path")  # the CPU times bmm alone
    assert all(" bmm " in line and "e" in line.split(" bmm ")[1] for line in lines)
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [(r["case"], r["route"], r["tile"]) for r in rows] == [("float64 TN 5x7x3", "cpu", ""),
                                                                 ("float64 NN 2x4x6x8", "cpu", "")]


def test_bmm_paths_misroutes(bmm_paths):
    # a path counts only where it beats bmm's pick by more than the margin under both timings; each case
    # names its fastest such path; cases without a timed pick are left out
    def row(case, paths):
        return {"case": case, "route": "mma-sync", "torch": (1.0, 1.0), "paths": paths}
    rows = [row("a", {"bmm": (20.0, 10.0, 0), "general-32": (10.0, 5.0, 0), "thin": (8.0, 9.5, 0)}),
            row("b", {"bmm": (20.0, 10.0, 0), "mma-64": (15.0, 8.0, 0), "hopper": (12.0, 7.0, 0)}),
            row("c", {"bmm": (20.0, 10.0, 0), "mma-64": (19.0, 5.0, 0)}),
            row("d", {"mma-64": (1.0, 1.0, 0)})]
    found = bmm_paths.misroutes(rows)
    assert [(case, path, round(gain, 3)) for gain, case, _, path, _, _ in found] == [
        ("a", "general-32", 2.0), ("b", "hopper", 1.667)]


def test_fit_plan_costs_recovers_the_model_from_rows(tmp_path, capsys):
    # rows made by the model itself (us = waves x (k-blocks x c + o)) give back its constants; rows that
    # split, stream or recorded no tile are left out
    fit_costs = _load("fit_plan_costs")
    # (precision, width, layout) -> (c, o, tile name); TF32 NN swaps the roles, so its tiles are named
    # 256 x 128 and 64 x 128 (TF32 tiles are 128 rows of R by the width, of Q: 64-wide ones are not 128)
    truth = {("bf16", 256, "NT"): (0.69, 2.7, "128x256"), ("bf16", 192, "NN"): (0.5, 4.7, "128x192"),
             ("tf32", 256, "NN"): (0.68, 6.4, "256x128"), ("tf32", 256, "TN"): (1.22, 5.3, "128x256"),
             ("tf32", 64, "NN"): (0.3, 4.0, "64x128"), ("tf32", 64, "TN"): (0.45, 3.1, "128x64")}
    rows = []
    for (prec, width, layout), (c, o, tile) in truth.items():
        tile_rows, tile_cols = (int(x) for x in tile.split("x"))
        for m, n, k in [(4096, 4096, 4096), (2048, 3072, 768), (768, 3072, 8192), (8192, 768, 2304), (1024, 4096, 2048)]:
            tiles = -(-m // tile_rows) * -(-n // tile_cols)
            waves, k_blocks = -(-tiles // 132), -(-k // fit_costs.K_BLOCK[prec])
            rows.append({"name": f"grid bmm {prec} {layout} B=- M={m} N={n} K={k}", "path": fit_costs.PATHS[prec],
                         "tile": tile, "tiles_ms": waves * (k_blocks * c + o) / 1e3})
    # left out, each of which would spoil the exact fit: a split product, and a row without its tile
    rows.append({"name": "grid bmm bf16 NT B=- M=768 N=768 K=8192", "path": "hopper-wgmma split-k", "tile": "128x256",
                 "tiles_ms": 9.0})
    rows.append({"name": "grid bmm bf16 NT B=- M=4096 N=4096 K=64", "path": "hopper-wgmma", "tiles_ms": 9.0})
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"cases": rows}))
    fits = fit_costs.main([str(path)])
    assert set(fits) == {("bf16", 256, False), ("bf16", 192, False), ("tf32", 256, False), ("tf32", 256, True),
                         ("tf32", 64, False), ("tf32", 64, True)}
    for (prec, width, transposing), (c, o, median, _) in fits.items():
        want = truth[(prec, width, "TN" if transposing else "NT" if (prec, width) == ("bf16", 256) else "NN")]
        assert c == pytest.approx(want[0], rel=1e-6)
        assert o == pytest.approx(want[1], rel=1e-6)
        assert median < 1e-9
    assert "transposing" in capsys.readouterr().out
    old = tmp_path / "old.json"  # rows from before bmm_grid recorded tiles
    old.write_text(json.dumps({"cases": [{k: v for k, v in r.items() if k != "tile"} for r in rows]}))
    assert fit_costs.main([str(old)]) == {}
    assert "no grid rows with a recorded tile" in capsys.readouterr().out


@pytest.fixture
def cpu_bench(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)  # results_file.py and local_build.py beside it
    yield _load("cpu_bench")
    for name in ("results_file", "local_build"):
        sys.modules.pop(name, None)


def test_cpu_bench_cases_and_rows(cpu_bench):
    # every case runs once on its own inputs (the real sizes: a few seconds in all at --min-ms 1), and a
    # map / zip row carries its write floor, a reduction's does not
    cases = {name: case for name, *case in cpu_bench._cases()}
    assert len(cases) == len(cpu_bench._cases())  # unique names
    for name in ("map tanh forward+backward fp32 64x256", "zip mul fp32 2048x4096 same layout",
                 "reduce sum fp32 131072x64 dim1"):
        row = cpu_bench.run_case(name, *cases[name], rounds=1, min_ms=1.0)
        assert row["name"] == f"cpu {name}" and row["tiles_ms"] > 0 and row["torch_ms"] > 0
        assert row["max_rel_error"] < 1e-6, row
        assert ("floor_ms" in row) == (not name.startswith("reduce")), row
        if "floor_ms" in row:
            # pct_of_floor comes from the unrounded floor; floor_ms is recorded to 4 decimals (5e-5 ms off at
            # most, a few percent of a 64 x 256 floor) and pct_of_floor to 1
            rounding = 100 * 5e-5 / row["tiles_ms"] + 0.05
            assert row["pct_of_floor"] == pytest.approx(100 * row["floor_ms"] / row["tiles_ms"], rel=1e-2, abs=rounding)


def test_results_rows_name_the_commit_and_a_tree_that_differs_from_it(tmp_path, monkeypatch):
    # results_file.git_commit: the short hash of a clean tree, "+dirty" once a tracked file differs from
    # it (an A/B's patch applied, or a tree copied over an older .git), and $TILES_COMMIT over both
    results_file = _load("results_file")
    monkeypatch.delenv("TILES_COMMIT", raising=False)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q", str(tmp_path)], check=True)
    (tmp_path / "kernel.cu").write_text("one\n")
    subprocess.run(git + ["add", "kernel.cu"], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout.strip()
    (tmp_path / "notes.txt").write_text("untracked files do not count\n")
    assert results_file.git_commit(str(tmp_path)) == head
    (tmp_path / "kernel.cu").write_text("two\n")
    assert results_file.git_commit(str(tmp_path)) == head + "+dirty"
    monkeypatch.setenv("TILES_COMMIT", "abc1234")
    assert results_file.git_commit(str(tmp_path)) == "abc1234"
    # ...unless it names the commit the dirty tree sits on (set from the copy's own git)
    monkeypatch.setenv("TILES_COMMIT", head)
    assert results_file.git_commit(str(tmp_path)) == head + "+dirty"
    (tmp_path / "kernel.cu").write_text("one\n")
    assert results_file.git_commit(str(tmp_path)) == head


def _results_file(folder, rows):
    folder.mkdir()
    (folder / "nvidia-h200.json").write_text(json.dumps({"device": "NVIDIA H200", "cases": rows}))
    return str(folder)


def test_compare_runs_of_results_files(tmp_path, capsys):
    # two bmm_grid.py --out folders: the moved rows (path or tile changed) and the rest summarized apart,
    # back-to-back ratios where both runs recorded them, failed rows and one-run rows left out
    compare_runs = _load("compare_runs")
    row = lambda name, tiles, torch_ms, tile, **extra: {  # noqa: E731
        "name": name, "tiles_ms": tiles, "torch_ms": torch_ms, "path": "hopper-wgmma tf32", "tile": tile, **extra}
    head = _results_file(tmp_path / "head", [
        row("grid a", 0.100, 0.110, "128x256"), row("grid b", 0.200, 0.200, "128x256", tiles_ms_b2b=0.1,
                                                    torch_ms_b2b=0.1),
        row("grid c", 0.050, 0.050, "128x192"), row("grid gone", 0.1, 0.1, "128x128"),
        {"name": "grid failed", "error": "boom"}])
    variant = _results_file(tmp_path / "variant", [
        row("grid a", 0.110, 0.108, "128x192"), row("grid b", 0.180, 0.200, "128x192", tiles_ms_b2b=0.08,
                                                    torch_ms_b2b=0.1),
        row("grid c", 0.050, 0.051, "128x192"), {"name": "grid failed", "error": "boom"}])
    summary = compare_runs.compare(compare_runs.load(head), compare_runs.load(variant))
    out = capsys.readouterr().out
    assert summary[(True, 0)] == pytest.approx(math.sqrt(1.1 * 0.9))
    assert summary[(True, 1)] == pytest.approx(0.8)
    assert summary[(False, 0)] == pytest.approx(1.0)
    assert (False, 1) not in summary
    assert "hopper-wgmma tf32 128x256 -> hopper-wgmma tf32 128x192" in out
    assert "moved: 2 cases" in out and "unmoved: 1 cases" in out and "1 cases are in one run only" in out
    assert "grid failed" not in out


def test_compare_runs_of_bmm_paths_files(tmp_path, capsys):
    # bmm_paths.py --out: a row a case and path; only bmm's own pick can move
    compare_runs = _load("compare_runs")

    def write(name, bmm_us, named_us, route):
        case = {"case": "bfloat16 NN 1x2048x768x3072", "route": route, "tile": "128x128", "torch": [19.0, 15.0],
                "paths": {"bmm": [bmm_us, bmm_us - 4, 1e-3], "hopper-96": [named_us, named_us - 3, 1e-3]}}
        path = tmp_path / name
        path.write_text(json.dumps(case) + "\n" + json.dumps({**case, "case": "other"}) + "\n")
        return str(path)
    head, variant = write("head.jsonl", 20.0, 24.0, "hopper-wgmma"), write("variant.jsonl", 20.0, 21.6, "hopper-wgmma")
    summary = compare_runs.compare(compare_runs.load(head), compare_runs.load(variant))
    assert summary[(False, 0)] == pytest.approx(0.9 ** 0.5)  # two cases: bmm 1.0 and hopper-96 0.9 each
    assert "bfloat16 NN 1x2048x768x3072 [hopper-96]" in capsys.readouterr().out
    moved = write("moved.jsonl", 22.0, 24.0, "hopper-wgmma split-k")
    assert (True, 0) in compare_runs.compare(compare_runs.load(head), compare_runs.load(moved))
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(SystemExit, match="neither a results file"):
        compare_runs.load(str(tmp_path / "list.json"))


def test_ab_report_pairs_each_variant_with_the_heads_part_and_packs_the_files(tmp_path, capsys):
    # tools/ab_report.py after a device A/B: labels with underscores, parts that end in one another, a
    # variant of a part the head lacks (left out); then the files packed into one archive
    spec = importlib.util.spec_from_file_location(
        "tiles_tools_ab_report", os.path.join(os.path.dirname(__file__), "..", "tools", "ab_report.py"))
    ab_report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab_report)
    case = {"case": "float32 NN 1x64x64x64", "route": "general", "tile": "", "torch": [10.0, 5.0],
            "paths": {"bmm": [12.0, 6.0, 1e-6]}}
    for name, us in [("head_high", 12.0), ("head_highest", 20.0), ("thin_chunk_4_high", 9.0),
                     ("thin_chunk_4_highest", 20.0), ("variant_high", 15.0), ("stray_low", 1.0)]:
        row = {**case, "paths": {"bmm": [us, us / 2, 1e-6]}}
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "build_head.log").write_text("built\n")
    assert [(part, label) for part, label, _, _ in ab_report.pairs(str(tmp_path))] == [
        ("high", "thin_chunk_4"), ("high", "variant"), ("highest", "thin_chunk_4")]
    ab_report.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "== thin_chunk_4 against head (high)" in out and "flushed 12.0 -> 9.0 (0.750)" in out
    assert "== thin_chunk_4 against head (highest)" in out and "== variant against head (high)" in out
    assert sorted(os.listdir(tmp_path)) == ["ab.tgz"]
    with tarfile.open(tmp_path / "ab.tgz") as archive:
        assert len(archive.getnames()) == 7
