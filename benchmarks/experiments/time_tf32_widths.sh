#!/usr/bin/env bash
# The Hopper TF32 kernel at each tile width by name ("hopper-64" ... "hopper-256" on float32, 3a29177)
# and with ping-pong consumers at 128 (88b32bd), beside bmm's pick
# and cuBLAS, on the grid's slowest 256-wide TF32 rows: NT's one-wave and few-wave rows (8192 x 2304 x
# 768: 576 tiles of 256 in 4.4 waves, cuBLAS 128 x 128 tiles in clusters of two), TN's transposing rows
# (72 of 97 256-wide TN rows below 0.95x), and NN / TT controls.
# What it answers: whether the width model (bmm/hopper_tf32.cu block_cost) picks the fastest width there.
#   on a build of the head: SKIP_BUILD=1 bash benchmarks/experiments/time_tf32_widths.sh (the forty-seventh
#   session ran it as an A/B against the cooperative 128 at six stages, tf32_128_six_stages.diff, in git
#   history at ee5956b: NOTES, N1q)
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
shapes=(0,8192,2304,768,NT 0,16384,2304,768,NT 0,16384,3072,768,NT 0,8192,4096,1024,NT 0,2048,1024,3072,NT
        0,1024,4096,16384,TN 0,2048,4096,12288,TN 0,16384,1024,4096,TN 0,16384,1024,3072,TN 0,4096,16384,2048,TN
        0,8192,768,50257,TN 0,4096,4096,4096,TN 0,8192,2304,768,NN 0,4096,4096,4096,TT 0,1024,4096,8192,NN)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
python -P benchmarks/bmm_paths.py --dtype float32 --precision high "${args[@]}" \
  --paths "bmm,hopper-128,hopper-192,hopper-256,hopper-128 ping-pong" --rep-ms 15 \
  --out "$OUT/${AB_LABEL:-tf32}_widths.jsonl" | tail -n 20
