// The CUDA kernels (binding/kernels.h lists them). Each launches on the current stream of the current
// device (the entry point in ops.cu guards the device).
#pragma once

#include "binding/kernels.h"

namespace tiles::cuda {
TILES_BACKEND_KERNELS
}  // namespace tiles::cuda
