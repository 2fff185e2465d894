// Strided index math shared by the CPU and CUDA kernels.
//
// The minitorch vocabulary, done the ATen way:
//   to_index(linear, shape)         -> multi-index of the linear (row-major) position
//   index_to_position(index, strides) -> element offset in storage
//   broadcast_index                 -> not a per-element step here: a broadcast operand gets stride 0
//                                      on the dims it is broadcast along (see broadcast_strides), so
//                                      index_to_position on the *output's* index lands on the right
//                                      element of every operand.
// StridedIndexer fuses the first two for several operands that share one logical shape, after the
// host has merged ("coalesced") dims that are contiguous in every operand, so a contiguous 4-D tensor
// is a 1-D problem. It travels to kernels by value: no shape arrays are copied to the device.
#pragma once

#include <array>
#include <vector>

#include <c10/util/ArrayRef.h>

#include "tiles/common.h"
#include "tiles/format.h"

namespace tiles {

// Dims are stored innermost first (dim 0 varies fastest), so loops over dims can be unrolled with
// compile-time indices and stop at `ndim`; an array indexed at run time would spill to local memory.
template <int NARGS>
struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[NARGS][kMaxDims];  // in elements; 0 where an operand is broadcast

  // to_index + index_to_position: the element offset of linear position `linear` in every operand,
  // in Index arithmetic (CUDA kernels pass uint32_t when every offset fits: 64-bit division costs
  // several times more); with `index`, also the multi-index (CPU loops continue from it as an odometer).
  template <class Index = int64_t>
  TILES_HD std::array<Index, NARGS> offsets(int64_t linear_position, Index* index = nullptr) const {
    std::array<Index, NARGS> off{};
    Index linear = Index(linear_position);
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const Index size = Index(sizes[d]);
      const Index i = linear % size;
      linear /= size;
      if (index) index[d] = i;
#if defined(__CUDACC__)
#pragma unroll
#endif
      for (int k = 0; k < NARGS; ++k) off[k] += i * Index(strides[k][d]);
    }
    return off;
  }

  // True when every operand walks memory with unit stride in linear order.
  bool is_contiguous() const {
    if (ndim > 1) return false;
    for (int k = 0; k < NARGS; ++k)
      if (ndim == 1 && strides[k][0] != 1) return false;
    return true;
  }
};

// The strides (in elements) with which `tensor_sizes`/`tensor_strides` is read when broadcast to
// `shape` (right-aligned; missing and size-1 dims get stride 0). Outermost first, like PyTorch.
inline std::vector<int64_t> broadcast_strides(c10::IntArrayRef shape, c10::IntArrayRef tensor_sizes,
                                              c10::IntArrayRef tensor_strides) {
  std::vector<int64_t> out(shape.size(), 0);
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
                                   const std::array<std::vector<int64_t>, NARGS>& strides) {
  StridedIndexer<NARGS> ix;
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, NARGS> st;
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
