#!/usr/bin/env bash
# The Hopper TF32 kernel on NT rows (a K-major, b = y.mT K-major: R K-major, the layout whose R wgmma can
# read from shared memory), bmm's pick under "high" (1xTF32): the grid's slowest NT rows (one-wave,
# multi-wave, split-K, copied, attention's batched q @ k^T) and NN / TT / "highest" controls that the
# change leaves alone.
#   tools/device_ab.sh --patch PATCH bash benchmarks/experiments/time_tf32_nt.sh
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
nt=(0,8192,2304,768 384,2048,2048,128 384,2048,2048,64 0,8192,4096,1024 0,2048,1024,3072 0,768,2304,2048
    384,1024,128,1024 1,768,3072,16384 512,64,64,64 0,2048,3072,768 4,386,2153,715 0,4096,4096,4096
    96,1024,1024,64 0,16384,3072,768)
args=()
for s in "${nt[@]}"; do args+=(--shape "$s,NT"); done
for s in 0,8192,2304,768,NN 0,4096,4096,4096,TT 384,2048,2048,128,TT; do args+=(--shape "$s"); done
python -P benchmarks/bmm_paths.py --dtype float32 --precision high "${args[@]}" --paths bmm \
  --rep-ms 15 --out "$OUT/${AB_LABEL:-tf32}_high.jsonl" | tail -n 1
python -P benchmarks/bmm_paths.py --dtype float32 --precision highest --shape 0,8192,2304,768,NT \
  --shape 384,2048,2048,128,NT --paths bmm --rep-ms 15 --out "$OUT/${AB_LABEL:-tf32}_highest.jsonl" | tail -n 1
