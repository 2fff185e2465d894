// The Hopper bmm kernels for __nv_bfloat16 with 64 x 64 tiles (one consumer warpgroup), all four operand major
// orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE_SQUARE(__nv_bfloat16, 64)
}
