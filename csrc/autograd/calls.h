// The tiles operators called from C++ through the dispatcher, as Python calls them: from an autograd
// formula they record their own autograd nodes (double backward), and under
// at::AutoDispatchBelowADInplaceOrView they go straight to the backend kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/string_view.h>

namespace tiles::calls {

at::Tensor map(const at::Tensor& x, c10::string_view fn);
at::Tensor zip(const at::Tensor& a, const at::Tensor& b, c10::string_view fn);
at::Tensor reduce(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn, bool keepdim);
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b);
at::Tensor map_backward(const at::Tensor& grad, const at::Tensor& saved, c10::string_view fn);
at::Tensor zip_backward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, c10::string_view fn,
                        int64_t which);

}  // namespace tiles::calls
