#!/usr/bin/env bash
# The general kernel (bmm/general.cu), for A/Bs of its registers, occupancy and split-K (NOTES N1e, N1j,
# N1k): the grid's 67 rows it takes (float32 at full precision and small TF32 products on unaligned
# operands: one row of each shape and a second layout), examples/train.py's MLP products, and larger
# float32 products as controls, and split-K rows of 2^22-2^24 multiply-adds (the 32-wide tiles' limit, 7923f93;
# 2 x 256 x 64 x 512 ran slower on 32-wide tiles in clusters of eight splits), on bmm's pick and on
# general-32 / general-64 by name. ~1 minute a build.
#   tools/device_ab.sh --patch benchmarks/experiments/general_cluster_one_wave.diff \
#     --patch benchmarks/experiments/general_vector_reads.diff bash benchmarks/experiments/time_general.sh
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
full=(1,474,138,202,NN 1,474,138,202,TN 2,35,4483,445,NN 2,35,4483,445,TN 8,47,1254,74,NN 8,47,1254,74,NT
      6,1307,5,23,NN 8,375,49,22,NN 8,375,49,22,TT 2,633,10,944,NN 2,1905,10,16,NN 8,25,23,75,TT 2,408,13,55,NT
      0,64,256,64,NN 0,64,64,256,NT 0,64,256,256,TN 0,64,10,256,NN 0,256,256,256,NN 8,128,128,128,NN 0,2048,64,2048,NN
      2,256,64,512,NN 2,300,30,300,NN 2,128,128,256,TT 8,64,64,256,NN 4,128,127,100,NN)
tf32=(1,474,138,202,NN 1,474,138,202,TT 2,633,10,944,NN 2,633,10,944,TN 8,375,49,22,NN 6,1307,5,23,NN 8,25,23,75,NT)
run() {  # precision, label, shapes...
  local precision=$1 label=$2; shift 2
  local args=()
  for s in "$@"; do args+=(--shape "$s"); done
  python -P benchmarks/bmm_paths.py --dtype float32 --precision "$precision" "${args[@]}" \
    --paths bmm,general-32,general-64 --rep-ms 15 --out "$OUT/${AB_LABEL:-general}_$label.jsonl" | tail -n 1
}
run highest fp32 "${full[@]}"
run high tf32 "${tf32[@]}"
