// Direct calls of the four operators from Python: torch_tiles.map / zip / reduce / bmm in eager mode.
//
// Why: `torch.ops.tiles.reduce(x, [1], "sum")` matches its arguments against the schema in Python and
// C++ on every call, about 1 us more than a torch function's generated binding (2-core host, 16-element
// input: torch.ops.tiles.reduce.default 2.9 us, torch.sum 1.8 us), and a training loop issues thousands
// of small calls. These functions read the common argument forms straight off the Python objects and
// call the same operator through the dispatcher (its typed handle found once), so autograd, every
// backend, torch.compile's fake tensors and __torch_dispatch__ modes see exactly the call torch.ops makes.
//
// Anything else returns None and the Python wrapper (torch_tiles/ops.py) calls torch.ops instead, so
// its argument checks and error messages stay the only ones: a tensor subclass other than nn.Parameter
// (it may override __torch_function__), any call under a torch function mode, a dim that is not an int
// or a list / tuple of ints, a fn that is not a str, a keepdim that is not a bool.
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <optional>
#include <string_view>

#include "binding/direct_calls.h"

namespace tiles {
namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// A plain tensor argument: exactly a torch.Tensor or an nn.Parameter (whose __torch_function__ is
// torch's own), with no torch function mode active. Other subclasses may override __torch_function__.
bool plain_tensor(PyObject* obj) {
  return THPVariable_CheckExact(obj) && !at::impl::torch_function_mode_enabled();
}

std::optional<std::string_view> str_view(PyObject* obj) {
  if (!PyUnicode_CheckExact(obj)) return std::nullopt;
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(obj, &size);  // cached on the str object
  if (!data) {
    PyErr_Clear();  // not encodable (lone surrogates): torch.ops reports it
    return std::nullopt;
  }
  return std::string_view(data, size);
}

// An exact int that fits int64_t.
bool int_value(PyObject* obj, int64_t* out) {
  if (!PyLong_CheckExact(obj)) return false;
  int overflow = 0;
  *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow || (*out == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// reduce's dim: None, an int, or a list / tuple of ints (at most kMaxDims of them).
constexpr int kMaxDims = 16;
struct Dims {
  bool none = false;
  int count = 0;
  int64_t values[kMaxDims];
};

bool dims_value(PyObject* obj, Dims* out) {
  if (obj == Py_None) {
    out->none = true;
    return true;
  }
  if (PyLong_CheckExact(obj)) {
    out->count = 1;
    return int_value(obj, &out->values[0]);
  }
  if (!PyList_CheckExact(obj) && !PyTuple_CheckExact(obj)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  if (n > kMaxDims) return false;
  PyObject** items = PySequence_Fast_ITEMS(obj);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!int_value(items[i], &out->values[i])) return false;
  out->count = static_cast<int>(n);
  return true;
}

// Runs `body` (which returns a new reference, or nullptr with a Python error set), translating a C++
// exception into the Python error torch.ops raises for it. Unlike HANDLE_TH_ERRORS, with no warning
// handler: a TORCH_WARN is reported as through torch.ops (by c10's handler, not as a Python warning,
// which a warnings filter could turn into an error after the result was made).
template <class F>
PyObject* translated(const F& body) {
  try {
    return body();
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
}

// Runs `call` without the GIL (as torch's own bindings do) and wraps its tensor. The callers hold the
// inputs as at::Tensor copies (a reference count each), as the generated bindings do, not as
// references into the Python objects.
template <class F>
PyObject* wrapped(const F& call) {
  at::Tensor out;
  {
    pybind11::gil_scoped_release no_gil;
    out = call();
  }
  return THPVariable_Wrap(std::move(out));
}

PyObject* map_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return translated([&]() -> PyObject* {
    std::optional<std::string_view> fn;
    if (nargs != 2 || !plain_tensor(args[0]) || !(fn = str_view(args[1]))) Py_RETURN_NONE;
    static const auto handle = op<at::Tensor(const at::Tensor&, c10::string_view)>("tiles::map");
    const at::Tensor x = THPVariable_Unpack(args[0]);
    return wrapped([&] { return handle.call(x, *fn); });
  });
}

PyObject* zip_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return translated([&]() -> PyObject* {
    std::optional<std::string_view> fn;
    if (nargs != 3 || !plain_tensor(args[0]) || !plain_tensor(args[1]) || !(fn = str_view(args[2])))
      Py_RETURN_NONE;
    static const auto handle =
        op<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>("tiles::zip");
    const at::Tensor a = THPVariable_Unpack(args[0]);
    const at::Tensor b = THPVariable_Unpack(args[1]);
    return wrapped([&] { return handle.call(a, b, *fn); });
  });
}

PyObject* reduce_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return translated([&]() -> PyObject* {
    Dims dims;
    std::optional<std::string_view> fn;
    if (nargs != 4 || !plain_tensor(args[0]) || !dims_value(args[1], &dims) || !(fn = str_view(args[2])) ||
        !PyBool_Check(args[3]))
      Py_RETURN_NONE;
    static const auto handle =
        op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, c10::string_view, bool)>("tiles::reduce");
    const at::Tensor x = THPVariable_Unpack(args[0]);
    const bool keepdim = args[3] == Py_True;
    const at::OptionalIntArrayRef dim =
        dims.none ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(at::IntArrayRef(dims.values, dims.count));
    return wrapped([&] { return handle.call(x, dim, *fn, keepdim); });
  });
}

PyObject* bmm_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return translated([&]() -> PyObject* {
    if (nargs != 2 || !plain_tensor(args[0]) || !plain_tensor(args[1])) Py_RETURN_NONE;
    static const auto handle = op<at::Tensor(const at::Tensor&, const at::Tensor&)>("tiles::bmm");
    const at::Tensor a = THPVariable_Unpack(args[0]);
    const at::Tensor b = THPVariable_Unpack(args[1]);
    return wrapped([&] { return handle.call(a, b); });
  });
}

}  // namespace

PyMethodDef kDirectCalls[] = {
    {"map", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(map_call)), METH_FASTCALL,
     "map(x, fn): tiles::map through the dispatcher, or None for arguments torch.ops should take."},
    {"zip", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(zip_call)), METH_FASTCALL,
     "zip(a, b, fn): tiles::zip through the dispatcher, or None for arguments torch.ops should take."},
    {"reduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(reduce_call)), METH_FASTCALL,
     "reduce(x, dim, fn, keepdim): tiles::reduce through the dispatcher, or None for arguments torch.ops "
     "should take."},
    {"bmm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(bmm_call)), METH_FASTCALL,
     "bmm(a, b): tiles::bmm through the dispatcher, or None for arguments torch.ops should take."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace tiles
