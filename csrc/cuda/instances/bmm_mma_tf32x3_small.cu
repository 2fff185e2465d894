// The mma.sync bmm kernels of small tiles (bmm/mma_launch.cuh) with the Tf32x3 atom, all four operand
// major orders, 16- and 4-byte copies; 8-byte copies with an M-major a only (bmm/mma.cu, narrower_copies).
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE_WIDTH(Tf32x3, TileSize::small, 16)
TILES_MMA_INSTANTIATE_WIDTH(Tf32x3, TileSize::small, 4)
template void launch<Tf32x3, TileSize::small, true, false, 8, 8>(const Params<float>&);
template void launch<Tf32x3, TileSize::small, true, true, 8, 8>(const Params<float>&);
}
