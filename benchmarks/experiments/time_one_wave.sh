#!/usr/bin/env bash
# N0y (NOTES.md): the bf16 grid rows on the Hopper kernel below 0.95x that make at most 132 tiles (one
# partial wave), worst first, one of each shape, timed on bmm's pick, on the tile shapes the plan could
# have taken instead, and on stream-K at 96, 128 and 160 columns (`stream_k.diff`, in git history at 718ebb0; without it those
# names print `-`), by name. On main, or beside a patch:
#   bash benchmarks/experiments/time_one_wave.sh     # -> $OUT/one_wave.jsonl ($AB_LABEL.jsonl under
#   tools/device_ab.sh --patch ...), the summary last
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
shapes=(1,2048,768,2304,TN 1,2048,768,3072,TN 1,2048,768,2304,NN 0,2048,768,3072,NN 0,768,2304,2048,TT
        0,768,2304,8192,TT 1,768,2304,2048,NT 1,768,2304,16384,TT 1,2048,768,2304,TT 0,768,3072,2048,NN
        1,768,3072,2048,NT 1,2048,768,3072,TT 1,768,3072,2048,TN 1,2048,1024,4096,TT 0,768,2304,16384,TN
        0,768,3072,8192,NT 0,2048,1024,4096,TN)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
python -P benchmarks/bmm_paths.py --dtype bfloat16 --precision highest "${args[@]}" \
  --paths "bmm,hopper-64x64,hopper-96,hopper-128,hopper-160,hopper-192,hopper-192x192,hopper-256,hopper-96 stream-k,hopper-128 stream-k,hopper-160 stream-k" \
  --rep-ms 15 --out "$OUT/${AB_LABEL:-one_wave}.jsonl" | tail -n 30
