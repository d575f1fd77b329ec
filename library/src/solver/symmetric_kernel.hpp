#pragma once
// The product of a dense symmetric matrix with three columns (private to solver/): the Woodbury
// step of IPC contact (schur.cpp, solve_low_rank_system) multiplies the region's dense Σ⁻¹ and Σ
// (m × m, m = 2,134 on scenes/face_ipc.json: 36 MB each) by the m × 3 block of x, y and z twice
// per global step.
//
//   out_c ← α A x_c  (+ out_c when accumulating),   c = 0, 1, 2,
//
// A column-major with leading dimension m, only its lower triangle read; x_c = x + c·ldx and
// out_c = out + c·m. Why not the BLAS: three dsymv calls stream the triangle three times and dsymm
// packs the whole matrix into panels first; once A no longer fits in the cache (a PD iteration's
// local step and barrier evict it between global steps) either costs several passes over memory.
// This kernel reads each stored entry once and applies it to all three columns, both as A(i, j)
// (to row i) and as A(j, i) (to row j).
//
// Deterministic: the columns are cut into a fixed number of slices of equal triangle area, each
// accumulated in its own part of `scratch` and summed in slice order, so the result does not
// depend on the number of threads. `scratch` is the caller's (a solve's workspace): resized on
// first use, then reused, so the product does not allocate.
#include <vector>

namespace xpd::detail {

void symmetric_times3(int m, const double* a, const double* x, int ldx, double alpha, double* out, bool accumulate,
                      std::vector<double>& scratch);

/// Whether the AVX2 + FMA inner loop is used on this CPU (else plain C++).
bool symmetric_times3_vector_available();

}  // namespace xpd::detail
