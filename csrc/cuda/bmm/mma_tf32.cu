// The mma.sync bmm kernels with the Tf32 atom, all four operand major orders, aligned or not.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Tf32)
}
