// Registers the CPU kernels for the tiles operators.
#include <torch/library.h>

#include <string>

#include "binding/entry.h"
#include "cpu/kernels.h"

TORCH_LIBRARY_IMPL(tiles, CPU, m) {
  m.impl("map", &tiles::map_entry<tiles::cpu::map>);
  m.impl("zip", &tiles::zip_entry<tiles::cpu::zip>);
  m.impl("reduce", &tiles::reduce_entry<tiles::cpu::reduce>);
  m.impl("bmm", &tiles::bmm_entry<tiles::cpu::bmm>);
  m.impl("_map_backward", &tiles::map_grad_entry<tiles::cpu::map_grad>);
  m.impl("_zip_backward", &tiles::zip_grad_entry<tiles::cpu::zip_grad>);
  m.impl("_bmm_path", [](const at::Tensor& a, const at::Tensor& b) -> std::string {
    tiles::make_bmm_problem(a, b);  // the same argument checks as bmm
    return "cpu";
  });
  m.impl("_bmm_tile", [](const at::Tensor& a, const at::Tensor& b) -> std::string {
    tiles::make_bmm_problem(a, b);
    return "";
  });
}
