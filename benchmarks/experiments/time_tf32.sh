#!/usr/bin/env bash
# The Hopper TF32 kernel's mainloop, for A/Bs of it: float32 products under
# "high" (1xTF32) and "highest" (3xTF32), bmm's pick and the kernel by name ("hopper"), on one-wave,
# multi-wave and small batched rows. ~10 shapes x 2 precisions, well under a minute a build on an H200.
#   tools/device_ab.sh --patch PATCH bash benchmarks/experiments/time_tf32.sh
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
shapes=(1,2048,768,2304,TN 0,768,2304,16384,TN 1,2048,1024,4096,TT 1,768,3072,2048,TN 8,2048,2048,2048,NN
        0,8192,3072,768,NN 0,4096,4096,4096,NN 0,8192,768,3072,NT 256,128,128,64,NN 4,386,2153,715,NN)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
for precision in high highest; do
  python -P benchmarks/bmm_paths.py --dtype float32 --precision "$precision" "${args[@]}" --paths bmm,hopper \
    --rep-ms 15 --out "$OUT/${AB_LABEL:-tf32}_$precision.jsonl" | tail -n 1
done
