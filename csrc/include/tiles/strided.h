// Strided index math shared by the CPU and CUDA kernels.
//
// The minitorch vocabulary, done the ATen way:
//   to_index(linear, shape)         -> multi-index of the linear (row-major) position
//   index_to_position(index, strides) -> element offset in storage
//   broadcast_index                 -> not a per-element step here: a broadcast operand gets stride 0
//                                      on the dims it is broadcast along (broadcast_strides), so
//                                      index_to_position on the *output's* index lands on the right
//                                      element of every operand.
// StridedIndexer fuses the first two for several operands that share one logical shape, after the
// host has merged ("coalesced") dims that are contiguous in every operand (binding/indexer.h), so a
// contiguous 4-D tensor is a 1-D problem. It travels to kernels by value: no shape arrays are copied
// to the device.
#pragma once

#include <array>

#include "tiles/common.h"

namespace tiles {

// Dims are stored innermost first (dim 0 varies fastest), so loops over dims can be unrolled with
// compile-time indices and stop at `ndim`; an array indexed at run time would spill to local memory.
template <int NARGS>
struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[NARGS][kMaxDims];  // in elements; 0 where an operand is broadcast

  // to_index + index_to_position: the element offset of linear position `linear` in every operand,
  // in Index arithmetic (the CUDA strided elementwise kernel passes uint32_t when every offset fits:
  // 64-bit division costs several times more); with `index`, also the multi-index (CPU loops continue from it as an odometer).
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

}  // namespace tiles
