// The mma.sync bmm kernels of small tiles (bmm/mma_launch.cuh) with the Tf32 atom, all four operand major
// orders, 16-, 8- and 4-byte copies.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Tf32, TileSize::small)
}
