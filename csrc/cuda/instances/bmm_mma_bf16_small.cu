// The mma.sync bmm kernels of small tiles (bmm/mma_launch.cuh) with the Half16<true> atom, all four operand
// major orders, every copy width.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Half16<true>, TileSize::small)
TILES_MMA_INSTANTIATE_WIDTH(Half16<true>, TileSize::small, 2)
}
