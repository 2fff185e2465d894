// The Hopper bmm kernels for __nv_bfloat16 with 192-wide tiles in pairs of blocks (Pair::share_b and
// Pair::share_a), all four operand major orders.
#include "cuda/bmm/hopper_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_INSTANTIATE_PAIRS(__nv_bfloat16, 192)
}
