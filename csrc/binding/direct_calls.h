// torch_tiles._C.map / zip / reduce / bmm: the operators called from Python without torch.ops'
// argument matching (binding/direct_calls.cpp). Added to the extension module in binding/tiles.cpp.
#pragma once

#include <Python.h>

namespace tiles {

extern PyMethodDef kDirectCalls[];

}  // namespace tiles
