#!/usr/bin/env bash
# N1a (NOTES.md): the tile walk on one-wave and multi-wave bf16 products, by name, for A/Bs of the walk's
# code. Default: 15 shapes at every width, ~190 s a build on an H200 (8192^3 and 4096^3 dominate), so that
# head + two patches under device_ab.sh run past one call's 600 s. QUICK=1: 6 shapes at 128 and 192
# columns (192 the control), a few seconds a build; PATHS=bmm,hopper-160,... times other widths on them.
#   tools/device_ab.sh --patch PATCH sh -c 'QUICK=1 bash benchmarks/experiments/time_walk.sh'
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
if [ "${QUICK:-0}" = 1 ]; then
  shapes=(1,2048,768,2304,TN 0,768,2304,16384,TN 1,2048,1024,4096,TT 1,768,3072,2048,TN 8,2048,2048,2048,NN
          0,8192,3072,768,NN)
  paths=${PATHS:-hopper-128,hopper-192}
else
  shapes=(1,2048,768,2304,TN 1,2048,768,2304,NN 0,768,2304,8192,TT 0,768,2304,16384,TN 1,2048,1024,4096,TT
          0,768,3072,8192,NT 1,768,3072,2048,TN 0,4096,4096,4096,NN 0,4096,4096,4096,TN 8,2048,2048,2048,NN
          0,8192,768,3072,NT 0,8192,3072,768,NN 4,1024,1024,1024,TN 0,8192,8192,8192,NN 16,512,512,4096,NT)
  paths="bmm,hopper-128,hopper-160,hopper-192,hopper-256"
fi
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
python -P benchmarks/bmm_paths.py --dtype bfloat16 --precision highest "${args[@]}" \
  --paths "$paths" --rep-ms 15 --out "$OUT/${AB_LABEL:-walk}.jsonl" | tail -n 3
