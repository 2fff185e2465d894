#!/usr/bin/env bash
# An A/B of a source edit in one device call: build the tree as it is, run a command; apply a sed
# expression to one file (or a patch, to any files), rebuild (a warm rebuild recompiles only what the
# edit touches), run the same command again; put the files back. With several patches, each in turn on
# the head's tree (one A/B/C... call, one build each). The command sees AB_LABEL: head, then variant (a
# sed edit or one patch) or each patch's file name without its extension (several patches), to name its
# output files. Output goes to $OUT (or /tmp/tiles_out), build logs as build_<label>.log.
#   tools/device_ab.sh FILE SED_EXPR COMMAND...
#   tools/device_ab.sh --patch PATCH [--patch PATCH2 ...] COMMAND...
#       (PATCH as `git diff` writes it, applied with git apply: all of it or nothing; each must apply to
#       the head's tree; FILE and PATCH are paths from the repository root)
#   tools/device_ab.sh csrc/cuda/bmm/thin.cu 's/#pragma unroll(kRound == 1 \&\& kJ < 8 ? 4 : 1)/#pragma unroll(1)/' \
#     sh -c 'python -P benchmarks/bmm_paths.py --dtype float32 --shape 3,113,3,4333,TN --out $OUT/$AB_LABEL.jsonl'
#   python benchmarks/compare_runs.py $OUT/head.jsonl $OUT/variant.jsonl   # then, case by case
#   python tools/ab_report.py   # or every variant against the head at once, the files packed in $OUT/ab.tgz
#                               # (a device call brings back at most 8 files)
# Exits non-zero when a build fails (the files are put back) or any run of the command does, and with 3
# when the tree could not be put back.
# SKIP_BUILD=1 takes the installed build as the head's (an earlier call on the same warm machine built
# it); BUILD_CMD replaces the build command (pip install of the tree). The installed build is the last
# variant's when this ends: the next call must build again (SKIP_BUILD=1 would time the variant as the
# head). The exit empties build/ of that build's objects: the next call's copy of the tree brings the
# sources back with their old times, older than the variant's objects, and a warm rebuild would say "ninja:
# no work to do" and install the variant again (it did, twenty-ninth session). build/ is marked while a variant's
# objects or install may be there (from its build on, and after the exit, which leaves only the mark): the
# next build here or in tools/gpu_check.sh starts from an empty build/, a SKIP_BUILD=1 run refuses, and a
# call killed by the time limit, which never reaches the exit, is covered too (tools/stale_build.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then sed -n '2,/^set /{/^#/p}' "$0"; exit 2; fi
patches=() file="" expr=""
if [ "$1" = --patch ]; then
  while [ $# -ge 2 ] && [ "$1" = --patch ]; do
    [ -f "$2" ] || { echo "device_ab: no patch $2"; exit 2; }
    patches+=("$(realpath "$2")")
    shift 2
  done
  [ $# -ge 1 ] || { echo "device_ab: no command after the patches"; exit 2; }
else
  file=$1 expr=$2
  [ -f "$file" ] || { echo "device_ab: no file $file"; exit 2; }
  shift 2
fi
export OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16}
BUILD_CMD=${BUILD_CMD:-"python -m pip install --no-build-isolation --no-deps -v ."}
source tools/stale_build.sh
drop_stale_variant_build device_ab || exit 1
t0=$(date +%s)
saved=$(mktemp) edited=$(mktemp)
variant_built=0 applied="" saved_ok=0  # applied: the patch now on the tree; saved_ok: $saved holds $file
git_apply() { git -c safe.directory='*' apply "$@"; }  # outside a repository as well; the device's copies
unapply() {  # takes the applied patch off; fails when it cannot
  [ -z "$applied" ] && return 0
  git_apply -R "$applied" || { echo "device_ab: could not reverse $applied"; return 1; }
  applied=""
}
restore() {  # fails (and so does the script) when the tree could not be put back
  if [ ${#patches[@]} -gt 0 ]; then unapply; elif [ $saved_ok = 1 ]; then cp "$saved" "$file"; fi
}
finish() {
  local rc=$?
  restore || rc=3
  rm -f "$saved" "$edited"
  [ $variant_built = 0 ] || { rm -rf build; mark_variant_build; }  # the variant stays installed
  exit $rc
}
trap finish EXIT
# the edits are checked before any build: one that fails or matches nothing wastes none
if [ ${#patches[@]} -gt 0 ]; then
  for patch in "${patches[@]}"; do
    git_apply --check "$patch" 2>/dev/null || { echo "device_ab: $patch does not apply"; exit 2; }
  done
else
  cp "$file" "$saved" || { echo "device_ab: could not save $file"; exit 2; }
  saved_ok=1
  sed "$expr" "$saved" >"$edited" || { echo "device_ab: sed '$expr' failed"; exit 2; }
  if cmp -s "$edited" "$saved"; then echo "device_ab: '$expr' changes nothing in $file"; exit 1; fi
fi

build() {  # $1: label
  if ! bash -c "$BUILD_CMD" >"$OUT/build_$1.log" 2>&1; then
    grep -E "error" "$OUT/build_$1.log" | head -20
    echo "device_ab: the $1 build FAILED ($(( $(date +%s) - t0 )) s)"
    exit 1
  fi
  echo "device_ab: built $1 ($(( $(date +%s) - t0 )) s)"
}
status=0
run() {  # $1: label; the rest: the command
  local label=$1 rc
  shift
  AB_LABEL=$label "$@"
  rc=$?
  echo "device_ab: $label ran, rc $rc ($(( $(date +%s) - t0 )) s)"
  [ $rc = 0 ] || status=$rc
}

if [ "${SKIP_BUILD:-0}" = 1 ]; then echo "device_ab: the installed build is the head's"; else build head && clear_variant_mark; fi
run head "$@"
if [ ${#patches[@]} -eq 0 ]; then
  cp "$edited" "$file"
  diff "$saved" "$file" | head -20
  variant_built=1
  mark_variant_build
  build variant
  run variant "$@"
  exit $status
fi
for patch in "${patches[@]}"; do
  unapply || exit 3
  label=variant
  [ ${#patches[@]} -eq 1 ] || label=$(basename "$patch" | sed 's/\.[^.]*$//')
  git_apply "$patch" || { echo "device_ab: $patch did not apply"; exit 2; }
  applied=$patch
  echo "device_ab: applied $patch to: $(sed -n 's|^+++ b/||p' "$patch" | tr '\n' ' ')"
  variant_built=1
  mark_variant_build
  build "$label"
  run "$label" "$@"
done
exit $status
