// The mma.sync bmm kernels with the Half16<false> atom, all four operand major orders, every copy width.
#include "cuda/bmm/mma_launch.cuh"

namespace tiles::cuda::mma {
TILES_MMA_INSTANTIATE(Half16<false>)
TILES_MMA_INSTANTIATE_WIDTH(Half16<false>, 2)
}
