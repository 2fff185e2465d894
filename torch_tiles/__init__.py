"""torch_tiles: map / zip / reduce / bmm as PyTorch operators with hand-written CPU and CUDA kernels.

Importing the package loads the native library, which registers ``torch.ops.tiles.{map,zip,reduce,bmm}``
with their CPU (and, in a CUDA build, CUDA) kernels and their autograd (in C++), and registers their
fake kernels (for torch.compile).
"""
import torch  # noqa: F401  (the native library needs torch's symbols loaded first)

try:
    from . import _C
except ImportError as e:  # typically: importing the source tree, which has no compiled library
    raise ImportError(
        "torch_tiles: the native library torch_tiles._C could not be loaded. Install the package with "
        "`pip install --no-build-isolation .` and import it from outside the source tree, or build it in "
        f"place with `python setup.py build_ext --inplace`. ({e})"
    ) from e
from . import _fake  # noqa: F401  (registrations)
from .ops import MAP_FNS, REDUCE_FNS, ZIP_FNS, bmm, map, reduce, zip
from . import functional, nn  # torch.nn-style blocks built on the ops
from .functional import matmul

__all__ = ["map", "zip", "reduce", "bmm", "matmul", "MAP_FNS", "ZIP_FNS", "REDUCE_FNS", "built_with_cuda"]
__version__ = "0.1.0"


def built_with_cuda() -> bool:
    """Whether this build of the extension contains the CUDA kernels."""
    return _C.built_with_cuda()
