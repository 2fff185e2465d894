#!/usr/bin/env bash
# Ping-pong consumers where bmm's plan splits K (N1q's next step). bmm takes "128x128 ping-pong" only for
# unsplit NT plans (9f1401b); "hopper-128 ping-pong" by name runs the 128-wide plan, split where that
# plan splits, so timing it beside bmm's pick and hopper-128 answers whether split ping-pong pays before any
# rule is written. Rows: the grid's split NT weight gradients (768 x 2304-3072 x 8192-16384, 2048 x 768 x
# 2304-3072, 0.94-0.98x of cuBLAS on split 192 / 256 tiles), the split tests' shapes (960 x 1080 x 3076,
# 840 x 832 x 2052), and two unsplit ping-pong rows as controls (2048 x 1024 x 3072, 8192 x 2304 x 768).
#   on a build of the head: SKIP_BUILD=1 bash benchmarks/experiments/time_tf32_pp_split.sh
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
shapes=(0,768,3072,16384,NT 0,768,2304,16384,NT 0,768,3072,8192,NT 0,768,2304,8192,NT 0,2048,768,3072,NT
        0,2048,768,2304,NT 0,2048,1024,4096,NT 1,960,1080,3076,NT 1,840,832,2052,NT 0,2048,1024,3072,NT
        0,8192,2304,768,NT)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
python -P benchmarks/bmm_paths.py --dtype float32 --precision high "${args[@]}" \
  --paths "bmm,hopper-128,hopper-128 ping-pong" --rep-ms 15 \
  --out "$OUT/${AB_LABEL:-tf32}_pp_split.jsonl" | tail -n 14
