// The CPU kernels (binding/kernels.h lists them).
#pragma once

#include "binding/kernels.h"

namespace tiles::cpu {
TILES_BACKEND_KERNELS
}  // namespace tiles::cpu
