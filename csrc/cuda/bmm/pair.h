// The 16-bit Hopper bmm's blocks alone, or in clusters of two over adjacent output tiles that load the
// operand the two tiles share once for both: each block loads half of that operand's stage into the
// shared memory of both (TMA multicast), which halves its reads from L2, as cuBLAS's 2-block clusters do
// on the d = 768 layers' one-wave products. By name only (tiles::_bmm_on_path "hopper-<width> pair-b" /
// "pair-a"): they have not yet beaten single blocks where bmm would use them (benchmarks/NOTES.md,
// "Pairs and the producer's k-block"). Host and device code both name it, so it stands alone.
#pragma once

namespace tiles::cuda::hopper {

enum class Pair : int {
  none,
  share_b,  // tiles (2i, j) and (2i + 1, j) of one tile column
  share_a,  // tiles (i, 2j) and (i, 2j + 1) of one tile row
};

}  // namespace tiles::cuda::hopper
