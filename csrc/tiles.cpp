// The tiles operator schemas, defined once for every backend, and the Python extension module that
// loads them. Kernels register per dispatch key: csrc/cpu/ops.cpp, csrc/cuda/ops.cu, and autograd in
// csrc/autograd/; fake (meta) kernels are registered from Python, in torch_tiles/_fake.py.
#include <Python.h>
#include <torch/library.h>

TORCH_LIBRARY(tiles, m) {
  // Where torch.compile finds the fake kernels if the Python package was not imported first.
  m.set_python_module("torch_tiles._fake");
  m.def("map(Tensor x, str fn) -> Tensor");
  m.def("zip(Tensor a, Tensor b, str fn) -> Tensor");
  m.def("reduce(Tensor x, int[]? dim, str fn, bool keepdim=False) -> Tensor");
  m.def("bmm(Tensor a, Tensor b) -> Tensor");
  // The backward kernels (csrc/autograd/): one pass each, differentiable themselves (double
  // backward). map's gradient grad * f'(x) reads `saved`: x, or map's output y where the fn's
  // derivative is written in y (map_grad_uses_output in tiles/functions.h). zip's gradient with
  // respect to operand `which` (0: a, 1: b), in the broadcast shape, for div, max, min and pow.
  // Internal: not part of the API.
  m.def("_map_backward(Tensor grad, Tensor saved, str fn) -> Tensor");
  m.def("_zip_backward(Tensor grad, Tensor a, Tensor b, str fn, int which) -> Tensor");
  // Which kernel bmm would run for these operands ("cpu", "hopper-wgmma", "mma-sync <kind>", "general";
  // a "general" answer on CUDA carries the reason after a colon). For tests and benchmarks; not part of
  // the API.
  m.def("_bmm_path(Tensor a, Tensor b) -> str");
  // The output tile of the Hopper bf16 / fp16 kernel for these operands ("128x256" or "128x128"), ""
  // when bmm would run another path. For tests of the tile-width rule; not part of the API.
  m.def("_bmm_tile(Tensor a, Tensor b) -> str");
  // bmm through one named CUDA kernel path ("hopper", "mma" or "general"); an error if that path
  // cannot take the operands. For tests that cover every path on one GPU; not part of the API.
  m.def("_bmm_on_path(Tensor a, Tensor b, str path) -> Tensor");
}

namespace {

PyObject* built_with_cuda(PyObject*, PyObject*) {
#ifdef TILES_WITH_CUDA
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}

PyMethodDef methods[] = {
    {"built_with_cuda", built_with_cuda, METH_NOARGS, "Whether the CUDA kernels were compiled in."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "torch_tiles native operators", -1, methods};

}  // namespace

// Importing torch_tiles._C loads this library, which runs the registrations above.
PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
