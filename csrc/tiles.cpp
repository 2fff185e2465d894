// The tiles operator schemas, defined once for every backend, and the Python extension module that
// loads them. Kernels register per dispatch key in csrc/cpu/ops.cpp and csrc/cuda/ops.cu; autograd
// and fake (meta) kernels are registered from Python, in torch_tiles/_autograd.py and _fake.py.
#include <Python.h>
#include <torch/library.h>

TORCH_LIBRARY(tiles, m) {
  // Where torch.compile finds the fake kernels if the Python package was not imported first.
  m.set_python_module("torch_tiles._fake");
  m.def("map(Tensor x, str fn) -> Tensor");
  m.def("zip(Tensor a, Tensor b, str fn) -> Tensor");
  m.def("reduce(Tensor x, int[]? dim, str fn, bool keepdim=False) -> Tensor");
  m.def("bmm(Tensor a, Tensor b) -> Tensor");
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
