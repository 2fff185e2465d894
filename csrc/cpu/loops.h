// CPU traversal of a strided indexer: the linear range [begin, end) as runs along the innermost dim,
// so the per-element work is a pointer step, and index decomposition happens once per run.
#pragma once

#include <algorithm>
#include <array>

#include "tiles/strided.h"

namespace tiles::cpu {

// Calls row(linear, offsets, count, steps) for each run of `count` consecutive positions starting
// at `linear`; element j of the run sits at offsets[k] + j * steps[k] in operand k.
template <int N, class Row>
void for_each_run(const StridedIndexer<N>& ix, int64_t begin, int64_t end, Row&& row) {
  if (begin >= end) return;
  std::array<int64_t, N> steps{};
  if (ix.ndim == 0) {  // a single element
    row(begin, std::array<int64_t, N>{}, end - begin, steps);
    return;
  }
  for (int k = 0; k < N; ++k) steps[k] = ix.strides[k][0];

  // to_index(begin) and index_to_position, kept incrementally from here on (an odometer).
  int64_t index[kMaxDims];
  std::array<int64_t, N> off = ix.offsets(begin, index);

  int64_t i = begin;
  while (i < end) {
    const int64_t count = std::min(end - i, ix.sizes[0] - index[0]);
    row(i, off, count, steps);
    i += count;
    // Step to the start of the next run: finish dim 0, then carry into the outer dims.
    for (int k = 0; k < N; ++k) off[k] -= index[0] * ix.strides[k][0];
    index[0] = 0;
    for (int d = 1; d < ix.ndim; ++d) {
      ++index[d];
      for (int k = 0; k < N; ++k) off[k] += ix.strides[k][d];
      if (index[d] < ix.sizes[d]) break;
      for (int k = 0; k < N; ++k) off[k] -= index[d] * ix.strides[k][d];
      index[d] = 0;
    }
  }
}

}  // namespace tiles::cpu
