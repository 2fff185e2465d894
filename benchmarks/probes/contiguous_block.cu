// The contiguous elementwise kernel (cuda/elementwise/kernels.cuh) at several block shapes, threads x
// vectors in flight per thread, for contiguous_block.py: the product's kernel and launch, instantiated here.
#include <torch/extension.h>
#include "cuda/elementwise/launch.cuh"

using namespace tiles::cuda;
using namespace tiles::cuda::elementwise;

template <class T, class Op, int TH, int UN>
void go(torch::Tensor out, std::vector<torch::Tensor> ins) {
  Operands<T, Op::kArity> in;
  for (int k = 0; k < Op::kArity; ++k) in.ptr[k] = reinterpret_cast<const T*>(ins[k].const_data_ptr());
  launch_contiguous<T, Op, 16 / sizeof(T), BlockShape<TH, UN>>(reinterpret_cast<T*>(out.data_ptr()), in, out.numel(),
                                                               current_stream());
}

template <class T, class Op>
bool pick(int th, int un, torch::Tensor out, std::vector<torch::Tensor> ins) {
#define CASE(A, B) if (th == A && un == B) { go<T, Op, A, B>(out, ins); return true; }
  CASE(128, 1) CASE(128, 2) CASE(128, 4)
  CASE(256, 1) CASE(256, 2) CASE(256, 4)
  CASE(512, 1) CASE(512, 2)
  CASE(1024, 1)
#undef CASE
  return false;
}

void run(torch::Tensor out, std::vector<torch::Tensor> ins, std::string op, int64_t th, int64_t un) {
  bool ok = false;
  if (op == "exp" && out.scalar_type() == at::kFloat) ok = pick<float, MapOp<tiles::MapFn::Exp>>(th, un, out, ins);
  else if (op == "exp" && out.scalar_type() == at::kBFloat16) ok = pick<c10::BFloat16, MapOp<tiles::MapFn::Exp>>(th, un, out, ins);
  else if (op == "mul" && out.scalar_type() == at::kFloat) ok = pick<float, ZipOp<tiles::ZipFn::Mul>>(th, un, out, ins);
  TORCH_CHECK(ok, "no variant ", op, " ", th, "x", un);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
