#!/usr/bin/env bash
# N0x (NOTES.md): the 16-bit products the grid runs on the mma.sync kernel (rows named `mma-sync <kind>
# unaligned...` in this GPU's results file: operands TMA cannot address), timed on bmm's own pick, the
# mma kernel by name and the Hopper kernel on packed operands, in one build of the patched tree:
#   git apply benchmarks/experiments/hopper_packed.diff && pip install --no-build-isolation --no-deps . &&
#   bash benchmarks/experiments/time_packed.sh     # -> $OUT/packed-<dtype>.jsonl, a summary last
# From its rows, fit bmm/packed.cu's rates (prefers): the products where hopper-packed beats mma by both
# timings should be those bmm sends there.
set -euo pipefail
OUT=${OUT:-/tmp/tiles_out}
RESULTS=${RESULTS:-benchmarks/results/nvidia-h200.json}
mkdir -p "$OUT"
for dtype in bfloat16 float16; do
  prec=$([ "$dtype" = bfloat16 ] && echo bf16 || echo fp16)
  shapes=$(python - "$RESULTS" "$prec" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))["cases"]
pattern = re.compile(r"grid bmm (\w+) (\w\w) B=(\S+) M=(\d+) N=(\d+) K=(\d+)$")
seen = []
for r in rows:
    m = pattern.match(r["name"])
    if m and m.group(1) == sys.argv[2] and r.get("path", "").startswith("mma-sync"):
        prec, layout, b, mm, n, k = m.groups()
        shape = f"{0 if b == '-' else b},{mm},{n},{k},{layout}"
        if shape not in seen:
            seen.append(shape)
print(" ".join(f"--shape {s}" for s in seen))
PY
)
  # shellcheck disable=SC2086
  python -P benchmarks/bmm_paths.py --dtype "$dtype" --precision highest $shapes --paths bmm,mma,hopper-packed \
    --rep-ms 15 --out "$OUT/packed-$dtype.jsonl" > "$OUT/packed-$dtype.txt"
  tail -n 12 "$OUT/packed-$dtype.txt"
done
