#!/usr/bin/env bash
# The products the patches of this folder moved or may move (NOTES.md: N0t, N0v, N0w), timed by
# tools/device_ab.sh under each variant, with controls they must leave alone; one jsonl a variant in $OUT
# ($AB_LABEL.jsonl), so that a call returns at most 8 files (the build logs among them):
#   tools/device_ab.sh --patch benchmarks/experiments/odd_rows_realigned.diff bash benchmarks/experiments/time_shapes.sh
#   python benchmarks/compare_runs.py $OUT/head.jsonl $OUT/variant.jsonl
# (several patches: --patch a.diff --patch b.diff, then $OUT/<patch name>.jsonl each)
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
parts=$(mktemp -d)
run() {  # dtype precision shapes...
  local dtype=$1 precision=$2; shift 2
  local args=()
  for s in "$@"; do args+=(--shape "$s"); done
  python -P benchmarks/bmm_paths.py --dtype "$dtype" --precision "$precision" "${args[@]}" --paths bmm \
    --rep-ms 15 --out "$parts/$dtype-$precision.jsonl" | tail -n $(( $# + 1 ))
}
# bf16: the LM head over V = 50257 in every layout (Hopper NT / TT forward, mma.sync for the rest), its
# aligned neighbour 50256, N % 8 != 0 on Hopper tiles (3070, 5), the mma kernel's 4-byte and mixed rows,
# and an aligned 128 x 256 product.
run bfloat16 highest 0,8192,50257,768,NT 0,8192,50257,768,TT 0,8192,50256,768,NT 0,8192,50257,768,TN \
  0,8192,50257,768,NN 0,8192,768,50257,NN 0,768,50257,8192,TN 0,768,3070,2048,NT 0,768,3072,2048,NT \
  5,2565,5,16,NT 4,3123,2188,734,NN 8,96,2174,1410,NT 0,4096,4096,4096,NN
run float16 highest 0,8192,50257,768,NT 0,8192,50257,768,TN 0,8192,768,50257,NT
# the TF32 Hopper kernel's register stores (odd N) and the 3xTF32 / DMMA pair stores
run float32 high 0,8192,50257,768,NT 4,386,2153,715,NT
run float32 highest 4,3123,2188,734,NN 2,35,4483,445,TN
run float64 highest 0,474,139,202,NT 0,2048,768,3072,NN
cat "$parts"/*.jsonl > "$OUT/$AB_LABEL.jsonl"
rm -rf "$parts"
