#!/usr/bin/env bash
# The few-columns kernel walked along k over rows that are not 16-byte aligned (one element a lane:
# narrow_k_fastest_kernel<..., kVec = 1>), for A/Bs of its chunk depth and of split-K summed in thread
# block clusters (NOTES N1d, N1g, N1i): the grid's small rows that take it (an A = a with K odd, or A = b^T), long-K ones that split,
# long-K ones walked along rows (a column-major: TN / TT, which clusters of 8 splits slowed 1.2-2x, N1i),
# and large ones as controls, in each dtype, on bmm's pick and on the thin kernel whole and split.
# ~1-2 minutes a build on an H200.
#   tools/device_ab.sh --patch benchmarks/experiments/cluster_costed.diff bash benchmarks/experiments/time_thin.sh
#   python tools/ab_report.py
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
shapes=(4,145,5,229,NN 4,145,5,229,NT 2,422,7,122,NN 2,422,7,122,NT 5,254,1,3985,NN 5,254,1,3985,NT
        4,4,144,218,NT 4,4,144,218,TT 8,1,3484,42,NT 8,1,3484,42,TT 1,112,2,158,NN 1,112,2,158,TT 2,88,3,2025,NN
        3,113,3,4333,NN 1,92,4,1858,NN 2,88,3,2025,TN 3,113,3,4333,TT 1,92,4,1858,TN 5,254,1,3985,TN 3,2,35,1194,NN
        0,16384,4,4095,NN 0,16383,8,4095,NN 0,4,16384,4095,NT 0,16384,1,4095,NN)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
for dtype in bfloat16 float16 float32 float64; do
  python -P benchmarks/bmm_paths.py --dtype "$dtype" --precision highest "${args[@]}" \
    --paths "bmm,thin whole-k,thin split-k" --rep-ms 15 --out "$OUT/${AB_LABEL:-thin}_$dtype.jsonl" | tail -n 1
done
