// Host side of the strided index math (tiles/strided.h): operands' strides broadcast to the output's
// shape, and the coalesced StridedIndexer built from them.
#pragma once

#include <array>

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include "binding/format.h"
#include "tiles/strided.h"

namespace tiles {

// Sizes, strides or a permutation of a tensor's dims, held inline for up to 8 dims: a call's index
// math makes several of these, and heap vectors cost tiny calls a fifth of their time (NOTES.md).
using Dims = c10::SmallVector<int64_t, 8>;

// The strides (in elements) with which `tensor_sizes`/`tensor_strides` is read when broadcast to
// `shape` (right-aligned; missing and size-1 dims get stride 0). Outermost first, like PyTorch.
inline Dims broadcast_strides(c10::IntArrayRef shape, c10::IntArrayRef tensor_sizes,
                               c10::IntArrayRef tensor_strides) {
  Dims out(shape.size(), 0);
  const size_t lead = shape.size() - tensor_sizes.size();
  for (size_t d = 0; d < tensor_sizes.size(); ++d)
    out[lead + d] = tensor_sizes[d] == 1 ? 0 : tensor_strides[d];
  return out;
}

// Builds a coalesced indexer over `shape` (outermost first) for operands with the given strides
// (outermost first, already broadcast to `shape`). Size-1 dims are dropped; a pair of neighbouring
// dims is merged when every operand steps over the inner one exactly into the outer one.
template <int NARGS>
StridedIndexer<NARGS> make_indexer(const char* op, c10::IntArrayRef shape,
                                   const std::array<Dims, NARGS>& strides) {
  StridedIndexer<NARGS> ix;
  Dims sizes;
  std::array<Dims, NARGS> st;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {  // innermost first
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < NARGS && merge; ++k)
      merge = strides[k][d] == st[k].back() * sizes.back();
    if (merge) {
      sizes.back() *= shape[d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < NARGS; ++k) st[k].push_back(strides[k][d]);
    }
  }
  TILES_CHECK(sizes.size() <= size_t(kMaxDims), op, ": the inputs have ", sizes.size(),
              " dimensions that cannot be merged into contiguous runs; at most ", kMaxDims,
              " are supported");
  ix.ndim = int(sizes.size());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.sizes[d] = sizes[d];
    for (int k = 0; k < NARGS; ++k) ix.strides[k][d] = st[k][d];
  }
  return ix;
}

}  // namespace tiles
