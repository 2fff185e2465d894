"""tools/sanitizer_driver.py, the program tools/sanitize.sh runs under compute-sanitizer on the GPU, so
that a device call does not find it broken: the whole driver, its section names, one section alone, and
a misspelt section. On a machine without a GPU it is a dry run (the CUDA-only sections run nothing); on
a GPU machine the driver runs on the GPU."""
import os
import pathlib
import subprocess
import sys

import torch_tiles

ROOT = pathlib.Path(__file__).resolve().parents[1]
DRIVER = str(ROOT / "tools" / "sanitizer_driver.py")


def _driver(*args):
    here = str(pathlib.Path(torch_tiles.__file__).parents[1])  # so the driver imports this torch_tiles
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, DRIVER, *args], capture_output=True, text=True, timeout=300, env=env)


def test_sections_are_listed():
    result = _driver("--list")
    assert result.returncode == 0, result.stderr
    names = result.stdout.split()
    assert {"elementwise", "reductions", "hopper", "hopper_float32", "autograd"} <= set(names)
    assert len(names) == len(set(names))


def test_whole_driver_runs_every_section_and_matches():
    names = _driver("--list").stdout.split()
    result = _driver()
    assert result.returncode == 0, result.stdout + result.stderr
    ran = [line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("section ")]
    assert ran == names
    assert result.stdout.strip().endswith("sanitizer driver: all results match")


def test_named_sections_run_alone():
    result = _driver("autograd", "elementwise")
    assert result.returncode == 0, result.stdout + result.stderr
    ran = [line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("section ")]
    assert ran == ["autograd", "elementwise"]


def test_unknown_section_is_refused_by_name():
    result = _driver("hoper")
    assert result.returncode != 0
    assert "unknown section(s) ['hoper']" in result.stderr
