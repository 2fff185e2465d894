// The mma.sync bmm kernels with the Half16<false> atom, all four operand major orders, aligned or not.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Half16<false>)
}
