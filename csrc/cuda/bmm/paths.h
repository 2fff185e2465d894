// The CUDA bmm kernels, one namespace per path, and the choice between them (bmm/bmm.cu).
//
//   hopper   TMA + wgmma tensor-core kernel: bf16 / fp16 on sm_90a, operands whose rows (or columns)
//            are contiguous with 16-byte-aligned strides, either major order (bmm/hopper.cu)
//   general  shared-memory tiled SIMT kernel: any dtype, strides, GPU (bmm/general.cu)
#pragma once

#include "tiles/problems.h"

namespace tiles::cuda {

namespace general {
void bmm(const BmmProblem& p);
}

namespace hopper {
// Whether this build, the current device and the problem's dtype and layout suit the Hopper kernel;
// when not and `why` is given, says why.
bool can_run(const BmmProblem& p, const char** why = nullptr);
void bmm(const BmmProblem& p);
}  // namespace hopper

}  // namespace tiles::cuda
