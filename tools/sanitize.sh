#!/usr/bin/env bash
# Runs tools/sanitizer_driver.py (every CUDA kernel path once, forward and backward) under each of
# compute-sanitizer's tools and prints each tool's error count. Needs an installed CUDA build
# (tools/gpu_check.sh builds one). Logs go to $OUT (or /tmp/tiles_out), one per tool.
#   TOOLS="memcheck racecheck"  runs only those tools;
#   SECTIONS="hopper reductions" runs the driver once per section named (`python tools/sanitizer_driver.py
#                               --list` names them; SECTIONS=all, the default, is one run of all of them),
#                               so a tool too slow for one device call over the whole driver (racecheck)
#                               can be split across calls, and each section's count prints as it ends;
#   TOOL_TIMEOUT=S              stops each run after S seconds (its line then reads "? errors").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
summary=""
for tool in ${TOOLS:-memcheck racecheck initcheck synccheck}; do
  log="$OUT/sanitize_$tool.log"
  : >"$log"
  total=0
  for section in ${SECTIONS:-all}; do
    args=()
    [ "$section" = all ] || args=("$section")
    part=$(mktemp)
    start=$(date +%s)
    timeout "${TOOL_TIMEOUT:-0}" compute-sanitizer --tool "$tool" --error-exitcode 0 \
      python -P tools/sanitizer_driver.py ${args[@]+"${args[@]}"} >"$part" 2>&1  # (an empty array under set -u)
    cat "$part" >>"$log"
    # memcheck/initcheck/synccheck end with "ERROR SUMMARY: N errors", racecheck with "(N errors, M warnings)"
    errors=$(grep -oE "ERROR SUMMARY: [0-9]+|\(([0-9]+) errors" "$part" | grep -oE "[0-9]+" | tail -1)
    driver=$(grep -o "sanitizer driver: .*" "$part" | tail -1)
    rm -f "$part"
    echo "sanitizer $tool [$section]: ${errors:-?} errors in $(( $(date +%s) - start )) s | ${driver:-driver did not finish}"
    if [ -n "$errors" ] && [ "$total" != "?" ]; then total=$(( total + errors )); else total="?"; fi
  done
  summary="$summary $tool=$total"
done
echo "SANITIZER SUMMARY:$summary"
