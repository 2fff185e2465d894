// The mma.sync bmm kernels with the F64 atom, all four operand major orders.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(F64)
}
