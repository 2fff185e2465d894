#!/usr/bin/env bash
# On a GPU machine, after the extension is installed: one ncu report per benchmark case for the tiles
# kernel and for the kernel PyTorch launches (cuBLAS's name tells its tile shape and stages).
#   tools/ncu_cases.sh "bmm fp64 B=32 512x512x512" ["case" ...]
# Env: SECTIONS (default: speed of light, launch, occupancy, warp states, compute and memory workload);
# KERNELS, the regex of kernel names (ncu matches the function name, no namespace) to profile, which
# keeps the kernels that make the inputs out (default: matmul kernels; for the reductions
# KERNELS='rows_kernel|columns_kernel|generic_kernel|reduce_kernel', ours and ATen's).
# Reports go to $OUT/ncu_<n>_{tiles,torch}.txt; a two-line digest per kernel is printed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
SECTIONS=${SECTIONS:-"SpeedOfLight LaunchStats Occupancy WarpStateStats ComputeWorkloadAnalysis MemoryWorkloadAnalysis"}
args=()
for s in $SECTIONS; do args+=(--section "$s"); done
n=0
for name in "$@"; do
  n=$((n + 1))
  for side in tiles torch; do
    flag=""; [ "$side" = torch ] && flag="--torch"
    f="$OUT/ncu_${n}_${side}.txt"
    ncu --clock-control none -k regex:"${KERNELS:-bmm|hopper|gemm|nvjet|xmma|cutlass|dmma}" -c 1 "${args[@]}" \
      python -P benchmarks/profile_case.py $flag "$name" >"$f" 2>&1
    kernel=$(grep -m1 -E '^  [A-Za-z_].*\(' "$f" | cut -c1-150)
    dur=$(grep -m1 -E '^ +Duration' "$f" | awk '{print $(NF-1), $NF}')
    regs=$(grep -m1 -E 'Registers Per Thread' "$f" | awk '{print $NF}')
    echo "$name [$side] $dur regs=$regs :: $kernel"
  done
done
