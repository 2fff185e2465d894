#!/usr/bin/env bash
# Instruction mix of the built extension's kernels whose (mangled) name matches a pattern, from
# cuobjdump's SASS: total instructions and the counts of the kinds that matter for a GEMM mainloop
# (tensor-core ops, shared loads, spills). Needs the CUDA build installed and cuobjdump.
#   tools/sass_stats.sh dmma_bmm_kernel
set -euo pipefail
pattern=${1:?usage: tools/sass_stats.sh <kernel name pattern>}
so=$(python -P -c "import torch_tiles._C as m; print(m.__file__)")
cuobjdump -sass "$so" | awk -v pat="$pattern" '
  /Function :/ { if (name != "") report(); name = $3; keep = index(name, pat) > 0; delete n; total = 0; next }
  keep && /\/\*[0-9a-f]{4}\*\// {
    total++
    if (match($0, /(DMMA|HMMA|HGMMA|LDS|LDSM|STS|LDL|STL|LDG|STG|LDGSTS|BAR|SHFL)[.A-Z0-9]*/)) n[substr($0, RSTART, RLENGTH)]++
  }
  function report(   k, line) {
    if (!keep) return
    line = ""
    for (k in n) line = line " " k "=" n[k]
    printf "%s: %d instructions;%s\n", name, total, line
  }
  END { if (name != "") report() }'
