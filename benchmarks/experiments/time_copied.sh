#!/usr/bin/env bash
# The Hopper TF32 kernel's copied variants (operands TMA cannot describe, copied by the producer warps),
# for A/Bs of them (N1b landed its copier registers): the grid's worst copied tf32 rows in every layout, under "high"
# (1xTF32) and "highest" (3xTF32), bmm's pick only. TN is the control (its copiers already have 72
# registers). ~1-2 minutes a build on an H200 (the two K = 50257 / V = 50257 rows dominate).
#   tools/device_ab.sh --patch PATCH bash benchmarks/experiments/time_copied.sh
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
shapes=()
for layout in NN TN NT TT; do
  shapes+=(4,386,2153,715,$layout 4,3123,2188,734,$layout 8,96,2174,1410,$layout 7,1801,49,1097,$layout)
done
shapes+=(0,8192,768,50257,NT 0,8192,768,50257,TN 0,8192,50257,768,NN)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
for precision in high highest; do
  python -P benchmarks/bmm_paths.py --dtype float32 --precision "$precision" "${args[@]}" --paths bmm \
    --rep-ms 15 --out "$OUT/${AB_LABEL:-copied}_$precision.jsonl" | tail -n 1
done
