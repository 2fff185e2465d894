// Typed dispatcher handles of the tiles operators, looked up once.
#include "autograd/calls.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace tiles::calls {
namespace {

#define TILES_HANDLE(NAME, SIGNATURE)                                                                 \
  const c10::TypedOperatorHandle<SIGNATURE>& NAME##_handle() {                                      \
    static const auto h = c10::Dispatcher::singleton().findSchemaOrThrow("tiles::" #NAME, "").typed<SIGNATURE>(); \
    return h;                                                                                         \
  }

TILES_HANDLE(map, at::Tensor(const at::Tensor&, c10::string_view))
TILES_HANDLE(zip, at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view))
TILES_HANDLE(reduce, at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, c10::string_view, bool))
TILES_HANDLE(bmm, at::Tensor(const at::Tensor&, const at::Tensor&))
TILES_HANDLE(_map_backward, at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view))
TILES_HANDLE(_zip_backward,
             at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view, int64_t))
#undef TILES_HANDLE

}  // namespace

at::Tensor map(const at::Tensor& x, c10::string_view fn) { return map_handle().call(x, fn); }
at::Tensor zip(const at::Tensor& a, const at::Tensor& b, c10::string_view fn) { return zip_handle().call(a, b, fn); }
at::Tensor reduce(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn, bool keepdim) {
  return reduce_handle().call(x, dim, fn, keepdim);
}
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) { return bmm_handle().call(a, b); }
at::Tensor map_backward(const at::Tensor& grad, const at::Tensor& saved, c10::string_view fn) {
  return _map_backward_handle().call(grad, saved, fn);
}
at::Tensor zip_backward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, c10::string_view fn,
                        int64_t which) {
  return _zip_backward_handle().call(grad, a, b, fn, which);
}

}  // namespace tiles::calls
