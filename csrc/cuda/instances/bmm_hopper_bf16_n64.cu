// The Hopper bmm kernels for __nv_bfloat16 with 64-wide tiles, all four operand major orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE(__nv_bfloat16, 64)
}
