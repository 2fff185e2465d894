// The Hopper float32 bmm kernel with ping-pong consumers: TF32, 128-wide tiles, NT (R K-major) only.
#include "cuda/bmm/hopper_tf32_launch.cuh"

namespace tiles::cuda::hopper {
TILES_HOPPER_TF32_LAUNCH(1, 128, true, false, false, false, true)
}
