// The Hopper bmm kernels for __nv_bfloat16 with 192 x 192 tiles (three consumer warpgroups), all four operand
// major orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE_SQUARE(__nv_bfloat16, 192)
}
