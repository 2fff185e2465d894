// tiles::_cross_entropy: each row's -log softmax(logits)[target], composed of tiles kernels, with an
// autograd node of its own.
//
// It exists so that a training step's loss costs one call from Python, not a Python
// torch.autograd.Function around a dozen calls (their host time was a third of the gap between an eager
// tiles step and a native one). The kernels are those the Python composition launched: a one-hot of the
// targets (arange, a cast, zip "eq"), then on z = logits - max(logits) the row's logsumexp(z) minus z
// at the target (the row's max of z + log(one_hot)); the backward is (exp(z - logsumexp(z)) - one_hot)
// * grad, four kernels. A node of its own also keeps autograd from summing z's two uses with a native add.
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <mutex>

#include "autograd/calls.h"
#include "autograd/node.h"
#include "autograd/recording.h"
#include "binding/format.h"

namespace tiles::autograd {
namespace {

constexpr const char* kOp = "tiles::_cross_entropy";

void check_args(const at::Tensor& logits, const at::Tensor& target) {
  TILES_CHECK(logits.dim() == 2, kOp, ": argument 'logits' must be 2-D [N, C], got ", logits.dim(), "-D");
  const at::ScalarType dtype = logits.scalar_type();
  TILES_CHECK(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat || dtype == at::kDouble, kOp,
              ": argument 'logits' has dtype ", c10::toString(dtype),
              "; expected a float tensor (float16, bfloat16, float32 or float64)");
  TILES_CHECK(at::isIntegralType(target.scalar_type(), /*includeBool=*/false), kOp,
              ": argument 'target' must hold integer class indices, got ", c10::toString(target.scalar_type()));
  TILES_CHECK(logits.sym_size(1) > 0, kOp, ": argument 'logits' has no classes (shape [N, 0])");
  TILES_CHECK(target.dim() == 1 && target.sym_size(0) == logits.sym_size(0), kOp,
              ": argument 'target' must be 1-D with one class index per row of 'logits'");
  TILES_CHECK(logits.device() == target.device(), kOp, ": arguments 'logits' and 'target' must be on the same device, got ",
              logits.device().str(), " and ", target.device().str());
}

struct Parts {
  at::Tensor loss, one_hot, z, lse;  // [N], [N, C], [N, C], [N]
};

// The forward, as tiles calls. The one-hot compares in float32, which holds class indices exactly up
// to 2^24 where bfloat16 would not past 256, and in float64 past 2^24 classes. z at the target is the
// row's max of z + log(one_hot) (0 at the target, -inf elsewhere), not sum(z * one_hot), whose 0 * -inf
// is NaN where a class is masked out with a -inf logit; a target outside [0, C) selects no class, so
// its row's loss is +inf.
Parts forward(const at::Tensor& logits, const at::Tensor& target) {
  const bool wide = logits.sym_size(1) > (int64_t(1) << 24);  // a guard under torch.compile
  const at::ScalarType index_type = wide ? at::kDouble : at::kFloat;
  const at::Tensor classes = at::arange(c10::Scalar(logits.sym_size(1)), logits.options().dtype(index_type));
  at::Tensor one_hot = calls::zip(target.to(index_type).unsqueeze(1), classes, "eq");
  if (one_hot.scalar_type() != logits.scalar_type()) one_hot = one_hot.to(logits.scalar_type());
  const at::Tensor z = calls::zip(logits, calls::reduce(logits, at::IntArrayRef{1}, "max", true), "sub");
  const at::Tensor lse = calls::reduce(z, at::IntArrayRef{1}, "logsumexp", false);
  const at::Tensor target_mask = calls::map(one_hot, "log");
  const at::Tensor picked = calls::reduce(calls::zip(z, target_mask, "add"), at::IntArrayRef{1}, "max", false);
  return {calls::zip(lse, picked, "sub"), one_hot, z, lse};
}

struct CrossEntropyBackward : TilesNode<4> {  // saved: logits, one_hot, z, lse
  CrossEntropyBackward() : TilesNode("tiles::CrossEntropyBackward") {}

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!grads[0].defined()) return {at::Tensor()};  // the loss's gradient is zero: so is the logits'
    const at::Tensor one_hot = saved(1);
    at::Tensor z = saved(2), lse = saved(3);
    if (c10::GradMode::is_enabled()) {  // create_graph: the same values, recorded from the logits
      const at::Tensor logits = saved(0);
      at::Tensor max;
      {
        at::NoGradGuard constant;  // softmax does not depend on the shift
        max = calls::reduce(logits, at::IntArrayRef{1}, "max", true);
      }
      z = calls::zip(logits, max, "sub");
      lse = calls::reduce(z, at::IntArrayRef{1}, "logsumexp", false);
    }
    const at::Tensor softmax = calls::map(calls::zip(z, lse.unsqueeze(1), "sub"), "exp");
    return {calls::zip(calls::zip(softmax, one_hot, "sub"), grads[0].unsqueeze(1), "mul")};
  }
};

at::Tensor cross_entropy_kernel(const at::Tensor& logits, const at::Tensor& target) {
  check_args(logits, target);
  return forward(logits, target).loss;
}

at::Tensor cross_entropy_autograd(const at::Tensor& logits, const at::Tensor& target) {
  check_no_tangent(kOp, "logits", logits);
  check_args(logits, target);
  const bool record = records_graph({&logits});
  Parts parts;
  {
    at::AutoDispatchBelowADInplaceOrView below;  // the forward's own calls record nothing
    parts = forward(logits, target);
  }
  if (!record) return parts.loss;
  auto node = make_node<CrossEntropyBackward>();
  node->save(0, logits, false);
  node->save(1, parts.one_hot, false);
  node->save(2, parts.z, false);
  node->save(3, parts.lse, false);
  return recorded(node, parts.loss, logits);
}

}  // namespace
}  // namespace tiles::autograd

// The forward is the same composition on every device (its calls reach each backend's kernels).
TORCH_LIBRARY_IMPL(tiles, CPU, m) { m.impl("_cross_entropy", &tiles::autograd::cross_entropy_kernel); }
TORCH_LIBRARY_IMPL(tiles, CUDA, m) { m.impl("_cross_entropy", &tiles::autograd::cross_entropy_kernel); }
TORCH_LIBRARY_IMPL(tiles, Autograd, m) { m.impl("_cross_entropy", &tiles::autograd::cross_entropy_autograd); }
