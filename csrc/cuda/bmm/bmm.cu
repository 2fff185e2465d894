// tiles::bmm on CUDA: the choice of kernel. The fastest path whose requirements the problem meets runs;
// the general kernel takes everything else, so every input is computed (bmm/paths.h lists the paths).
#include "cuda/bmm/paths.h"
#include "cuda/kernels.h"

namespace tiles::cuda {

void bmm(const BmmProblem& p) {
  if (hopper::can_run(p)) return hopper::bmm(p);
  if (hopper_tf32::can_run(p)) return hopper_tf32::bmm(p);
  if (mma::can_run(p)) return mma::bmm(p);
  general::bmm(p);
}

}  // namespace tiles::cuda
