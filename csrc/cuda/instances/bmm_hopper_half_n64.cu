// The Hopper bmm kernels for __half with 64-wide tiles, all four operand major orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE(__half, 64)
}
