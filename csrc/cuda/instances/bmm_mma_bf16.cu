// The mma.sync bmm kernels with the Half16<true> atom, all four operand major orders, every copy width.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Half16<true>)
TILES_MMA_INSTANTIATE_WIDTH(Half16<true>, 2)
}
