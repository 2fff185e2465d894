// The tiles operator schemas, defined once for every backend, and the Python extension module that
// loads them. Kernels register per dispatch key: csrc/cpu/ops.cpp, csrc/cuda/ops.cu, and autograd in
// csrc/autograd/; fake (meta) kernels are registered from Python, in torch_tiles/_fake.py.
#include <Python.h>
#include <torch/library.h>

#include "binding/direct_calls.h"
#include "tiles/functions.h"

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
  // Each row's cross-entropy loss -log softmax(logits)[target], [N], for logits [N, C] and integer
  // class indices target [N]: tiles kernels composed in C++ with an autograd node of their own
  // (csrc/autograd/cross_entropy.cpp). What torch_tiles.functional.cross_entropy calls. Internal.
  m.def("_cross_entropy(Tensor logits, Tensor target) -> Tensor");
  // Which kernel bmm would run for these operands ("cpu", "hopper-wgmma", "mma-sync <kind>", "general";
  // a "general" answer on CUDA carries the reason after a colon). For tests and benchmarks; not part of
  // the API.
  m.def("_bmm_path(Tensor a, Tensor b) -> str");
  // The output tile (rows x columns) of the Hopper kernels for these operands: bf16 / fp16 "128x256",
  // "128x192" or "128x128"; float32 "128x256", "128x192", "128x128" or, with the roles swapped,
  // "256x128" / "192x128"; the mma.sync kernel's "64x64", "128x128" or "128x64" (3xTF32); "" when bmm
  // would run another path. For tests of the tile rules; not part of the API.
  m.def("_bmm_tile(Tensor a, Tensor b) -> str");
  // bmm through one named CUDA kernel path ("hopper", "mma", "thin" or "general"; "mma-64" / "mma-128"
  // and "general-32" / "general-64" force a tile size, "mma-64 whole-k" / "mma-128 whole-k" turn the mma
  // kernel's split-K off); an error if that path cannot take the operands.
  // For tests that cover every path on one GPU; not part of the API.
  m.def("_bmm_on_path(Tensor a, Tensor b, str path) -> Tensor");
  // An empty output of map's / zip's layout rule for these candidates (binding/problems.h), on the
  // first candidate's device: what the fake kernels allocate. Internal.
  m.def("_empty_like_first_dense(SymInt[] shape, ScalarType dtype, Tensor[] candidates) -> Tensor");
}

namespace {

PyObject* built_with_cuda(PyObject*, PyObject*) {
#ifdef TILES_WITH_CUDA
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}

// A tuple of the names (those `keep` accepts); nullptr with the Python error set on failure.
template <class Enum, size_t N>
PyObject* name_tuple(const char* const (&names)[N], bool (*keep)(Enum) = nullptr) {
  PyObject* out = PyList_New(0);
  for (size_t i = 0; out && i < N; ++i) {
    if (keep && !keep(Enum(i))) continue;
    PyObject* name = PyUnicode_FromString(names[i]);
    if (!name || PyList_Append(out, name) < 0) Py_CLEAR(out);  // Append takes its own reference
    Py_XDECREF(name);
  }
  PyObject* tuple = out ? PyList_AsTuple(out) : nullptr;
  Py_XDECREF(out);
  return tuple;
}

// The fn names of each op, in enum order, from tiles/functions.h: the one list Python derives its own
// from (torch_tiles.MAP_FNS, the fake kernels' checks, the tests).
PyObject* fn_names(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  auto put = [&](const char* key, PyObject* value) {
    if (d && (!value || PyDict_SetItemString(d, key, value) < 0)) Py_CLEAR(d);
    Py_XDECREF(value);
  };
  put("map", name_tuple<tiles::MapFn>(tiles::kMapFnNames));
  put("zip", name_tuple<tiles::ZipFn>(tiles::kZipFnNames));
  put("reduce", name_tuple<tiles::ReduceFn>(tiles::kReduceFnNames));
  put("zip_grad_kernel", name_tuple<tiles::ZipFn>(tiles::kZipFnNames, +[](tiles::ZipFn f) {
        return tiles::has_zip_grad_kernel(f);
      }));
  return d;
}

PyMethodDef methods[] = {
    {"built_with_cuda", built_with_cuda, METH_NOARGS, "Whether the CUDA kernels were compiled in."},
    {"fn_names", fn_names, METH_NOARGS, "Each op's fn names, in the order of the C++ enums."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "torch_tiles native operators", -1, methods};

}  // namespace

// Importing torch_tiles._C loads this library, which runs the registrations above.
PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&module);
  if (m && PyModule_AddFunctions(m, tiles::kDirectCalls) < 0) Py_CLEAR(m);
  return m;
}
