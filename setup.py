"""Builds torch_tiles._C: the CPU kernels always, the CUDA kernels when PyTorch has CUDA and nvcc is found.

Environment: TILES_FORCE_CUDA=1 / TILES_FORCE_CPU=1 override the choice; TORCH_CUDA_ARCH_LIST picks GPU
architectures (default below when unset and no GPU is visible); MAX_JOBS bounds parallel compiles.
`pip install .` runs this through build_backend/torch_tiles_backend.py, which picks the torch it imports.
"""
import glob
import os
import sys

from setuptools import setup

try:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
except ImportError:
    sys.exit(
        "torch_tiles: PyTorch is not importable in this build environment.\n"
        "`pip install .` provides it (the build backend uses the environment's torch, or installs one);\n"
        "`pip install --no-build-isolation .` needs torch installed first.\n"
    )

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCHS = "8.0;9.0a"  # A100-class (mma.sync paths) and H100 (wgmma/TMA paths)


def want_cuda():
    if os.environ.get("TILES_FORCE_CPU") == "1":
        return False, "TILES_FORCE_CPU=1"
    if os.environ.get("TILES_FORCE_CUDA") == "1":
        return True, "TILES_FORCE_CUDA=1"
    if torch.version.cuda is None:
        return False, "this PyTorch has no CUDA"
    if CUDA_HOME is None:
        return False, "nvcc not found (set CUDA_HOME)"
    return True, f"PyTorch CUDA {torch.version.cuda}, nvcc in {CUDA_HOME}"


def sources(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern), recursive=True))


def sm90a_macros():
    """TILES_HAS_SM90A when the build includes sm_90a code: the host then offers the Hopper-only
    (wgmma / TMA) kernels to compute-capability-9.0 devices. A plain "9.0" is built as 9.0a, since
    the Hopper kernels need the arch-specific target."""
    archs = [a.strip() for a in os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(",", ";").split(";")]
    if "9.0" in archs or "9.0+PTX" in archs:
        archs = ["9.0a" if a.startswith("9.0") else a for a in archs]
        os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(archs)
    return [("TILES_HAS_SM90A", None)] if "9.0a" in archs else []


def sm80_macros():
    """TILES_HAS_SM80 when the build includes code for compute capability 8.0 or newer: the host then
    offers the mma.sync / cp.async kernels to such devices."""
    archs = [a.strip() for a in os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(",", ";").split(";") if a.strip()]
    versions = []
    for a in archs:
        try:
            versions.append(float(a.split("+")[0].rstrip("af")))
        except ValueError:
            pass
    return [("TILES_HAS_SM80", None)] if any(v >= 8.0 for v in versions) else []


with_cuda, why = want_cuda()
# No debug info in the C++ objects unless asked for: Python's CFLAGS carry -g, which made the CPU kernels'
# objects 9x larger (simd_avx512.o 32 MB against 3.6) and their compile 1.5x slower (90 s against 61 on
# one core), for a 78 MB extension. The CUDA sources keep -lineinfo for the profilers.
cxx_flags = ["-O3"] + ([] if os.environ.get("TILES_DEBUG_INFO") == "1" else ["-g0"])
if with_cuda:
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_ARCHS if not torch.cuda.is_available() else ";".join(
            sorted({"%d.%d" % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}))
    ext = CUDAExtension(
        "torch_tiles._C",
        sources("csrc/binding/*.cpp") + sources("csrc/autograd/*.cpp") + sources("csrc/cpu/*.cpp") + sources("csrc/cuda/**/*.cu"),
        include_dirs=[os.path.join(HERE, "csrc"), os.path.join(HERE, "csrc/include")],
        define_macros=[("TILES_WITH_CUDA", None)] + sm90a_macros() + sm80_macros(),
        extra_compile_args={"cxx": cxx_flags, "nvcc": ["-O3", "--expt-relaxed-constexpr", "-lineinfo"]},
    )
else:
    ext = CppExtension(
        "torch_tiles._C",
        sources("csrc/binding/*.cpp") + sources("csrc/autograd/*.cpp") + sources("csrc/cpu/*.cpp"),
        include_dirs=[os.path.join(HERE, "csrc"), os.path.join(HERE, "csrc/include")],
        extra_compile_args={"cxx": cxx_flags},
    )
print(f"torch_tiles: building {'CUDA + CPU' if with_cuda else 'CPU-only'} kernels ({why})"
      + (f", archs {os.environ.get('TORCH_CUDA_ARCH_LIST')}" if with_cuda else "")
      + f", against torch {torch.__version__}", file=sys.stderr, flush=True)

# The extension only loads in the torch release it was compiled against: pin it (without a local label
# such as +cpu or +cu130, so that either build of that release satisfies it).
setup(ext_modules=[ext], cmdclass={"build_ext": BuildExtension},
      install_requires=[f"torch=={torch.__version__.split('+')[0]}"])
