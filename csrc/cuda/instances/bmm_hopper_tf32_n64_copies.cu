// The Hopper float32 bmm kernels for TF32 with 64-wide tiles, every operand role layout, copying the operands TMA cannot address.
#include "cuda/bmm/hopper_tf32_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_TF32_INSTANTIATE(1, 64, true)
}
