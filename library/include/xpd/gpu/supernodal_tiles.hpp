#pragma once
// Tile sizes of the GPU supernodal solve (supernodal_plan.hpp), shared by the host reference and
// the CUDA kernels (no other include: the kernels' translation unit stays free of Eigen).

namespace xpd::gpu {

/// Tile sizes shared by the host reference and the CUDA kernels.
struct SupernodalTiles {
  static constexpr int kRows = 128;      ///< forward: rows per tile (one thread per row)
  static constexpr int kCols = 128;      ///< forward: columns per chunk (one partial sum each)
  static constexpr int kWarpCols = 8;    ///< backward: columns per tile (one warp per column)
  static constexpr int kRowChunk = 256;  ///< backward: rows per chunk (one partial sum each)
};

}  // namespace xpd::gpu
