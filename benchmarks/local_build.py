"""Imported first by the benchmark scripts that also run on the CPU: when this checkout holds an in-place
build (torch_tiles/_C*.so, from `python setup.py build_ext --inplace`), it goes first on sys.path, so
`import torch_tiles` times that build rather than an older installed one. Without one, nothing changes."""
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if glob.glob(os.path.join(ROOT, "torch_tiles", "_C*.so")):
    sys.path.insert(0, ROOT)
