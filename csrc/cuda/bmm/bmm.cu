// tiles::bmm on CUDA: the choice of kernel. The fastest path whose requirements the problem meets runs;
// the general kernel takes everything else, so every input is computed (bmm/paths.h lists the paths).
#include "cuda/bmm/paths.h"
#include "cuda/kernels.h"

namespace tiles::cuda {

Path choose_path(const BmmProblem& p, const char** why) {
  if (hopper::can_run(p)) return Path::hopper;
  if (hopper_tf32::can_run(p)) return Path::hopper_tf32;
  if (mma::can_run(p, why)) return Path::mma;
  return Path::general;
}

void bmm(const BmmProblem& p) {
  switch (choose_path(p)) {
    case Path::hopper: return hopper::bmm(p);
    case Path::hopper_tf32: return hopper_tf32::bmm(p);
    case Path::mma: return mma::bmm(p);
    case Path::general: return general::bmm(p);
  }
}

}  // namespace tiles::cuda
