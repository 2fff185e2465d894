// Registers the CPU kernels for the tiles operators.
#include <torch/library.h>

#include "cpu/kernels.h"
#include "tiles/entry.h"

TORCH_LIBRARY_IMPL(tiles, CPU, m) {
  m.impl("map", &tiles::map_entry<tiles::cpu::map>);
  m.impl("zip", &tiles::zip_entry<tiles::cpu::zip>);
  m.impl("reduce", &tiles::reduce_entry<tiles::cpu::reduce>);
  m.impl("bmm", &tiles::bmm_entry<tiles::cpu::bmm>);
}
