// The mma.sync bmm kernels (bmm/mma_launch.cuh) with the Half16<true> atom where one operand goes through
// registers (2-byte aligned) and the other is copied 16 bytes at a time, both tile sizes, all four major orders.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE_MIXED(Half16<true>, TileSize::large)
TILES_MMA_INSTANTIATE_MIXED(Half16<true>, TileSize::small)
}
