# Sourced by tools/device_ab.sh and tools/gpu_check.sh. device_ab.sh marks build/ while it holds a
# variant's objects and removes build/ when it ends. A call the device's time limit kills ends without
# that, and the next call's copy of the tree brings the head's sources with times older than those
# objects: ninja then links the variant's objects, or a mix ("undefined symbol" at import, thirty-ninth
# session). So the next build starts from an empty build/, and a run that reuses the installed build
# (SKIP_BUILD=1) refuses it. The mark stays until a build of the head succeeds (clear_variant_mark): the
# installed package is the variant's until then, whatever failed in between.
VARIANT_MARK=build/.device_ab_variant
drop_stale_variant_build() {  # $1: the calling script's name
  [ -f "$VARIANT_MARK" ] || return 0
  if [ "${SKIP_BUILD:-0}" = 1 ]; then
    echo "$1: the installed build may be an unfinished A/B's variant (build/ is marked): build again without SKIP_BUILD"
    return 1
  fi
  echo "$1: build/ holds the objects of an A/B's variant from a call that did not finish: removing them"
  rm -rf build && mark_variant_build
}
mark_variant_build() { mkdir -p build && touch "$VARIANT_MARK"; }
clear_variant_mark() { rm -f "$VARIANT_MARK"; }
