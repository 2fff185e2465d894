// The order in which every bmm kernel walks the output tiles of one matrix: groups of kGroupRows tile
// rows, each group walked column by column, so the blocks running at one time share a few rows of a
// and columns of b in L2 instead of streaming all of b for every tile row.
#pragma once

#include <cstdint>

namespace tiles::cuda {

struct TilePos {
  int tm, tn;  // tile row and tile column
};

// Tile `r` (0 <= r < tiles_m * tiles_n) of a tiles_m x tiles_n grid in the grouped order.
__device__ __forceinline__ TilePos grouped_tile(int64_t r, int tiles_m, int tiles_n) {
  constexpr int kGroupRows = 8;
  const int64_t span = int64_t(kGroupRows) * tiles_n;  // tiles in one full group
  const int first_m = int(r / span) * kGroupRows;
  const int rows = tiles_m - first_m < kGroupRows ? tiles_m - first_m : kGroupRows;
  const int64_t in_group = r % span;
  return {first_m + int(in_group % rows), int(in_group / rows)};
}

}  // namespace tiles::cuda
