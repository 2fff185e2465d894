// The order in which every bmm kernel walks the output tiles of one matrix: groups of kGroupRows tile
// rows, each group walked column by column, so the blocks running at one time share a few rows of a
// and columns of b in L2 instead of streaming all of b for every tile row.
#pragma once

#include <cstdint>

namespace tiles::cuda {

struct TilePos {
  int tm, tn;  // tile row and tile column
};

// Tile `r` (0 <= r < tiles_m * tiles_n) of a tiles_m x tiles_n grid in the grouped order. 32-bit: a matrix
// has fewer than 2^31 tiles of at least 64 x 64 (mma.cu checks; a Hopper output of 2^31 such tiles would
// take 16 TiB), and a 64-bit division is a software routine, paid per tile (96 x 2048^2 K=64: one k-block a
// tile).
__device__ __forceinline__ TilePos grouped_tile(int r, int tiles_m, int tiles_n) {
  constexpr int kGroupRows = 8;
  const int span = kGroupRows * tiles_n;  // tiles in one full group
  const int first_m = r / span * kGroupRows;
  const int rows = tiles_m - first_m < kGroupRows ? tiles_m - first_m : kGroupRows;
  const int in_group = r % span;
  return {first_m + in_group % rows, in_group / rows};
}

}  // namespace tiles::cuda
