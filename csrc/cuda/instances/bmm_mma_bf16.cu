// The mma.sync bmm kernels of large tiles (bmm/mma_launch.cuh) with the Half16<true> atom, all four operand
// major orders, every copy width.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Half16<true>, TileSize::large)
TILES_MMA_INSTANTIATE_WIDTH(Half16<true>, TileSize::large, 2)
}
