#!/usr/bin/env bash
# One call on a GPU machine (the device tool): build the CUDA extension, run the whole test suite with
# the CUDA tests, optionally run the benchmarks, and print a short summary last.
#   tools/gpu_check.sh [pytest args...]   default: tests -m 'not big'; e.g. tools/gpu_check.sh tests/test_bmm.py
# Env: SKIP_BUILD=1 reuses the build installed by an earlier call on the same (warm) machine.
# BENCH="--quick" (or BENCH="" for every case) runs `python benchmarks/run.py $BENCH` after the tests.
# Logs go to $OUT (the device tool's folder that comes back) or /tmp/tiles_out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
torch_v=$(python -c "import torch; print(torch.__version__)")
echo "gpu: $gpu | torch $torch_v | commit $(git -c safe.directory='*' rev-parse --short HEAD 2>/dev/null || echo none)"

source tools/stale_build.sh
drop_stale_variant_build gpu_check || { echo "SUMMARY: not run: SKIP_BUILD=1 on a marked build/"; exit 1; }
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  echo "reusing the installed build"
elif ! python -m pip install --no-build-isolation --no-deps -v . >"$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -40
  echo "SUMMARY: build FAILED after $(( $(date +%s) - t0 ))s (see build.log)"
  exit 1
fi
[ "${SKIP_BUILD:-0}" = 1 ] || clear_variant_mark  # the head's build is installed
build_s=$(( $(date +%s) - t0 ))
if [ -f "$OUT/build.log" ]; then
  grep "torch_tiles: building" "$OUT/build.log"
  grep -E "registers|spill|stack frame" "$OUT/build.log" | sort | uniq -c | sort -rn | head -5 >"$OUT/ptxas.txt" || true
fi

# `python -P` keeps the source tree off sys.path, so `import torch_tiles` finds the installed build.
python -P -c "import torch_tiles, torch; assert torch_tiles.built_with_cuda() and torch.cuda.is_available(); print('cuda build ok')" || exit 1
t1=$(date +%s)
# Default: the whole suite but the `big` tests (several GiB each: run them alone, without -n). The 15
# slowest tests are listed: where the suite's device time goes.
if [ $# -eq 0 ]; then set -- tests -m "not big"; fi
python -P -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-16}" -rs --durations=15 "$@" 2>&1 | tee "$OUT/pytest.log" | tail -60
test_s=$(( $(date +%s) - t1 ))
result=$(grep -E "^(=+ )?[0-9]+ (passed|failed)|[0-9]+ passed|[0-9]+ failed" "$OUT/pytest.log" | tail -1)

if [ -n "${BENCH+set}" ]; then
  # A copy of the repo without git records commit "unknown", and a copied working tree may carry an
  # older .git than the files it holds (the device tool's copies do): set TILES_COMMIT to the hash of
  # the checkout that was copied, taken there, not from `git rev-parse` on the copy.
  python benchmarks/run.py $BENCH 2>&1 | tee "$OUT/bench.log" | tail -40
  cp benchmarks/results/*.json benchmarks/results/*.png "$OUT/" 2>/dev/null
fi
echo "SUMMARY: $gpu | torch $torch_v | build ${build_s}s | tests ${test_s}s: $result"
