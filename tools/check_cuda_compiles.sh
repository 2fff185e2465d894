#!/usr/bin/env bash
# Compile-checks every CUDA source with nvcc on a machine without a GPU (or a CUDA build of torch):
# the CPU torch wheel still ships the ATen/c10 CUDA headers, so each .cu file can be compiled to an
# object for sm_90a with the flags torch.utils.cpp_extension would use. Nothing is linked or run.
# Usage: tools/check_cuda_compiles.sh [file.cu ...]   (default: every .cu under csrc/cuda; non-zero exit if any fails)
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then echo "check_cuda_compiles: nvcc not found; skipping"; exit 0; fi

read -r TORCH_INC PY_INC STD < <(python - <<'PY'
import os, sysconfig, torch
inc = os.path.join(os.path.dirname(torch.__file__), "include")
std = "c++20" if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 10) else "c++17"
print(inc, sysconfig.get_paths()["include"], std)
PY
)
ARCH=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a"}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# A CPU wheel lacks this header that torch's CMake generates for CUDA builds; the check needs only
# its macro, which marks c10_cuda as a shared library.
mkdir -p "$OUT/stub/c10/cuda/impl"
echo '#define C10_CUDA_BUILD_SHARED_LIBS' > "$OUT/stub/c10/cuda/impl/cuda_cmake_macros.h"
check_one() {
  local src=$1 start=$(date +%s)
  if "$NVCC" -c "$src" -o "$OUT/$(basename "$src").o" $ARCH -std=$STD -O1 \
      -I csrc -I csrc/include -I "$TORCH_INC" -I "$OUT/stub" -I "$TORCH_INC/torch/csrc/api/include" -I "$PY_INC" \
      -DTILES_WITH_CUDA -DTILES_HAS_SM90A -DTILES_HAS_SM80 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ \
      -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr \
      -Xcompiler -fPIC -w ${EXTRA_NVCC_FLAGS:-}; then
    echo "check_cuda_compiles: ok   $src ($(( $(date +%s) - start ))s)"
  else
    echo "check_cuda_compiles: FAIL $src"; return 1
  fi
}

# One compile per core at a time; the exit status is non-zero if any file failed.
jobs_max=$(nproc)
status=0
for src in ${@:-$(find csrc/cuda -name "*.cu" | sort)}; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || status=1; done
  check_one "$src" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || status=1; done
exit $status
