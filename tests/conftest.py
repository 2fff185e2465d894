"""pytest configuration: the ``device`` parametrization and per-test seeding."""

import os
import random
import tempfile
import zlib

# A fresh Inductor cache for every test session: Inductor's graph cache key does not cover custom
# ops' fake kernels, so code compiled against an older torch_tiles (other output strides) would be
# reused and fail its own stride asserts. Set before torch is imported.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tiles-inductor-"))

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_tiles

# Under pytest-xdist each worker is a process with torch's default of a thread per core: 16 workers on
# the GPU host's 16 cores ran 256 threads for the CPU kernels and the CPU references. Each gets its share,
# at least two, so that the CPU kernels' parallel paths still run (unless OMP_NUM_THREADS says otherwise).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    torch.set_num_threads(max(2, torch.get_num_threads() // _WORKERS))

CUDA_AVAILABLE = torch.cuda.is_available() and torch_tiles.built_with_cuda()

if not torch.cuda.is_available():
    _CUDA_SKIP_REASON = "no CUDA device visible to PyTorch"
elif not torch_tiles.built_with_cuda():
    _CUDA_SKIP_REASON = "torch_tiles was built without its CUDA kernels"
else:
    _CUDA_SKIP_REASON = ""

requires_cuda = pytest.mark.skipif(not CUDA_AVAILABLE, reason=_CUDA_SKIP_REASON)

# "cpu" always runs; "cuda" is always collected but skipped (with the reason) where it cannot run.
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def seed(request):
    """Re-seed the global RNGs for every test from its node id, so each test draws fresh data that is
    still reproducible.  Set TILES_TEST_SEED=<int> to draw a different set of values everywhere."""
    value = (zlib.crc32(request.node.nodeid.encode()) + int(os.environ.get("TILES_TEST_SEED", "0")))
    value %= 2**31
    torch.manual_seed(value)
    random.seed(value)
    return value


@pytest.fixture
def highest_float32_precision():
    """float32 matmuls in PyTorch's references (and ours) at full float32 precision for one test."""
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(old)
