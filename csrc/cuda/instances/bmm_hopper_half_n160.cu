// The Hopper bmm kernels for __half with 160-wide tiles, all four operand major orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE(__half, 160)
}
