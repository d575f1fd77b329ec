#pragma once
// The supernodal factor as the GPU backend reads it (filled by SparseCholesky, solver area; defined
// here because the backend sits below the solver in the dependency order).
#include <vector>

namespace xpd {

/// Read-only view of a supernodal factor P A Pᵀ = L Lᵀ in CHOLMOD's layout (Davis & Hager 2009),
/// for backends that copy it (the CUDA solve of gpu/supernodal_plan.hpp). Supernode s owns the
/// columns super[s] .. super[s+1]−1 and an nrows × ncols column-major block of values at x + px[s]
/// (nrows = pi[s+1] − pi[s], ncols = super[s+1] − super[s]): the diagonal block (only its lower
/// triangle is meaningful) and then the rows below it, whose L-order row indices are s[pi[s] + ncols ..].
/// Row i of L is row perm[i] of A. Empty (nsuper == 0) unless the factor is a CHOLMOD supernodal LLᵀ.
/// The pointers stay valid until the next analyze/factorize of the owning SparseCholesky.
struct SupernodalFactorView {
  long n = 0, nsuper = 0;
  const long* super = nullptr;  ///< nsuper + 1 first columns
  const long* pi = nullptr;     ///< nsuper + 1 offsets into s
  const long* px = nullptr;     ///< nsuper + 1 offsets into x
  const long* s = nullptr;      ///< row indices
  const double* x = nullptr;    ///< values
  const long* perm = nullptr;   ///< n: fill-reducing permutation
};

/// A SupernodalFactorView over index arrays held here: for factors whose integers are not `long`
/// (SchurFactorization's CHOLMOD factor uses int), the indices are copied once; the values still
/// point into the owning factor. view() is valid while this object and the factor live.
struct SupernodalFactorCopy {
  long n = 0, nsuper = 0;
  std::vector<long> super, pi, px, s, perm;
  const double* x = nullptr;
  SupernodalFactorView view() const {
    SupernodalFactorView v;
    if (nsuper == 0) return v;
    v.n = n;
    v.nsuper = nsuper;
    v.super = super.data();
    v.pi = pi.data();
    v.px = px.data();
    v.s = s.data();
    v.x = x;
    v.perm = perm.data();
    return v;
  }
};

}  // namespace xpd
