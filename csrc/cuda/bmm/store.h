// How the 16-bit Hopper bmm's consumers write an output tile: bmm/hopper.cu `plan` picks one, and
// tiles::_bmm_on_path's "hopper-<width> tma-store" / "streaming-store" / "hopper-256 whole-tile-store"
// force one (to time them on a new GPU). Host and device code both name it, so it stands alone.
#pragma once

namespace tiles::cuda::hopper {

enum class Store : int {
  tma,        // TMA bulk stores from the swizzled buffers (store_group_tma)
  tma_whole_tile,  // the same from buffers for a whole 256-wide tile, a stage fewer (TileConfig's kWholeTile)
  streaming,  // the threads' own evict-first 16-byte stores from the same buffers (store_tile_streaming)
  direct,     // bounds-checked stores straight from the accumulators (store_tile_direct)
  partials,   // the same, of the float accumulators, into a split-K slice of GemmShape::partials
};

// Whether TMA's bulk stores write the output (described by the kernel's map_c; the block waits for them
// before it exits).
constexpr bool bulk_stores(Store s) { return s == Store::tma || s == Store::tma_whole_tile; }

}  // namespace tiles::cuda::hopper
