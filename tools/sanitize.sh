#!/usr/bin/env bash
# Runs tools/sanitizer_driver.py (every CUDA kernel path once, forward and backward) under each of
# compute-sanitizer's tools and prints each tool's error count. Needs an installed CUDA build
# (tools/gpu_check.sh builds one). Logs go to $OUT (or /tmp/tiles_out). TOOLS="memcheck racecheck"
# runs only those; TOOL_TIMEOUT=S stops each tool after S seconds (its line then reads "? errors"), so a
# device call with little time left still prints the tools that finished.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
summary=""
for tool in ${TOOLS:-memcheck racecheck initcheck synccheck}; do
  timeout "${TOOL_TIMEOUT:-0}" compute-sanitizer --tool "$tool" --error-exitcode 0 python -P tools/sanitizer_driver.py \
    >"$OUT/sanitize_$tool.log" 2>&1
  # memcheck/initcheck/synccheck end with "ERROR SUMMARY: N errors", racecheck with "(N errors, M warnings)"
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+|\(([0-9]+) errors" "$OUT/sanitize_$tool.log" | grep -oE "[0-9]+" | tail -1)
  driver=$(grep -o "sanitizer driver: .*" "$OUT/sanitize_$tool.log" | tail -1)
  echo "sanitizer $tool: ${errors:-?} errors | ${driver:-driver did not finish}"
  summary="$summary $tool=${errors:-?}"
done
echo "SANITIZER SUMMARY:$summary"
