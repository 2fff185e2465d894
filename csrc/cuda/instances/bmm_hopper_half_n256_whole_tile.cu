// The Hopper bmm kernels for __half with 256-wide tiles and whole-tile store buffers
// (Store::tma_whole_tile), all four operand major orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE_WHOLE_TILE(__half)
}
