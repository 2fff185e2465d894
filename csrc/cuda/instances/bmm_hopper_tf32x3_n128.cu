// The Hopper float32 bmm kernels for 3xTF32 (float32-accurate) with 128-wide tiles, every operand role layout.
#include "cuda/bmm/hopper_tf32_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_TF32_INSTANTIATE(3, 128, false)
}
