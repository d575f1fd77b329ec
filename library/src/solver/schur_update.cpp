// The change of K in factored form and the signed rank-r updates of SchurFactorization::modify().
#include "schur_update.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <string>
#include <xpd/core/error.hpp>

extern "C" {
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
            const int* lda, const double* beta, double* c, const int* ldc);
}

namespace xpd::detail {
namespace {

[[noreturn]] void bad(const std::string& what) { throw SolverError("Schur modify: " + what); }

}  // namespace

// In 64 × 64 tiles: a column-major mirror row by row touches one cache line per entry written
// (m = 3,783: 7 M lines per matrix).
void mirror_lower(Eigen::MatrixXd& a) {
  const Eigen::Index m = a.rows();
  constexpr Eigen::Index kTile = 64;
  for (Eigen::Index jb = 0; jb < m; jb += kTile)
    for (Eigen::Index ib = jb; ib < m; ib += kTile) {
      const Eigen::Index je = std::min(jb + kTile, m), ie = std::min(ib + kTile, m);
      for (Eigen::Index i = ib; i < ie; ++i)
        for (Eigen::Index j = jb; j < std::min(je, i); ++j) a(j, i) = a(i, j);
    }
}

LowRankChange low_rank_change(const FactorModification& mod, int n_old, int max_rows, double drop_tolerance) {
  if (mod.new_dofs < 0) bad("negative number of new unknowns");
  const int n_new = n_old + mod.new_dofs;
  LowRankChange out;
  std::vector<int>& ids = out.rows;
  auto take = [&](int row, double value, const char* where) {
    if (row < 0 || row >= n_new)
      bad(std::string("unknown ") + std::to_string(row) + " of " + where + " outside [0, " + std::to_string(n_new) +
          ")");
    if (!std::isfinite(value)) bad(std::string("non-finite value in ") + where);
    ids.push_back(row);
  };
  for (const auto* list : {&mod.added, &mod.removed})
    for (const SparseColumn& c : *list) {
      if (c.rows.size() != c.values.size()) bad("a column's rows and values differ in length");
      for (size_t a = 0; a < c.rows.size(); ++a) take(c.rows[a], c.values[a], "a column");
    }
  for (const Eigen::Triplet<double>& t : mod.change) {
    take(t.row(), t.value(), "the entrywise change");
    take(t.col(), t.value(), "the entrywise change");
  }
  for (int j = 0; j < mod.new_dofs; ++j) ids.push_back(n_old + j);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const auto local = [&](int row) {
    return static_cast<Eigen::Index>(std::lower_bound(ids.begin(), ids.end(), row) - ids.begin());
  };
  const auto p = static_cast<Eigen::Index>(ids.size());
  Eigen::MatrixXd d = Eigen::MatrixXd::Zero(p, p);
  const auto add_column = [&](const SparseColumn& c, double sign) {
    for (size_t a = 0; a < c.rows.size(); ++a) {
      const Eigen::Index la = local(c.rows[a]);
      for (size_t b = 0; b < c.rows.size(); ++b) {
        if (b != a && c.rows[b] == c.rows[a]) bad("unknown " + std::to_string(c.rows[a]) + " repeated in a column");
        d(la, local(c.rows[b])) += sign * c.values[a] * c.values[b];
      }
    }
  };
  for (const SparseColumn& c : mod.added) add_column(c, 1.0);
  for (const SparseColumn& c : mod.removed) add_column(c, -1.0);
  for (const Eigen::Triplet<double>& t : mod.change) {
    const Eigen::Index r = local(t.row()), c = local(t.col());
    d(r, c) += t.value();
    if (r != c) d(c, r) += t.value();
  }
  out.delta.resize(static_cast<size_t>(mod.new_dofs));
  for (int j = 0; j < mod.new_dofs; ++j) {
    const Eigen::Index l = local(n_old + j);
    if (!(d(l, l) > 0.0))
      bad("new unknown " + std::to_string(n_old + j) + " has no positive diagonal in the changed matrix");
    out.delta[static_cast<size_t>(j)] = d(l, l);
    d(l, l) = 0.0;
  }
  if (p == 0 || p > max_rows) {
    out.too_large = p > max_rows;
    out.v.resize(0, 0);
    out.lambda.resize(0);
    return out;
  }
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(d);
  if (es.info() != Eigen::Success) bad("eigen-decomposition of the change failed");
  const Eigen::VectorXd& ev = es.eigenvalues();
  out.largest = ev.cwiseAbs().maxCoeff();
  std::vector<Eigen::Index> keep;
  for (Eigen::Index k = 0; k < p; ++k)
    if (std::abs(ev(k)) > drop_tolerance * out.largest) keep.push_back(k);
  const auto r = static_cast<Eigen::Index>(keep.size());
  out.v.resize(p, r);
  out.lambda.resize(r);
  for (Eigen::Index k = 0; k < r; ++k) {
    out.v.col(k) = es.eigenvectors().col(keep[static_cast<size_t>(k)]);
    out.lambda(k) = ev(keep[static_cast<size_t>(k)]);
  }
  return out;
}

bool signed_square(const Eigen::MatrixXd& z, const Eigen::MatrixXd& f, SignedSquare& out) {
  const Eigen::Index m = z.rows(), r = f.rows();
  out.plus.resize(m, 0);
  out.minus.resize(m, 0);
  if (r == 0) return true;
  if (!f.allFinite() || !z.allFinite()) return false;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(f);
  if (es.info() != Eigen::Success) return false;
  const Eigen::VectorXd& xi = es.eigenvalues();
  const double largest = xi.cwiseAbs().maxCoeff();
  if (!(largest > 0.0) || !std::isfinite(largest)) return false;
  Eigen::Index pos = 0;
  for (Eigen::Index k = 0; k < r; ++k) {
    if (!(std::abs(xi(k)) > 1e-14 * largest)) return false;
    pos += xi(k) > 0.0 ? 1 : 0;
  }
  const Eigen::MatrixXd zq = z * es.eigenvectors();
  out.plus.resize(m, pos);
  out.minus.resize(m, r - pos);
  Eigen::Index ip = 0, im = 0;
  for (Eigen::Index k = 0; k < r; ++k) {
    const double s = 1.0 / std::sqrt(std::abs(xi(k)));
    if (xi(k) > 0.0)
      out.plus.col(ip++) = s * zq.col(k);
    else
      out.minus.col(im++) = s * zq.col(k);
  }
  return true;
}

void add_signed_square(Eigen::MatrixXd& a, const SignedSquare& p, double sign) {
  const int m = static_cast<int>(a.rows());
  if (m == 0 || p.plus.cols() + p.minus.cols() == 0) return;
  const double one = 1.0;
  for (const auto& [factor, s] : {std::pair<const Eigen::MatrixXd*, double>{&p.plus, sign}, {&p.minus, -sign}}) {
    const int k = static_cast<int>(factor->cols());
    if (k > 0) dsyrk_("L", "N", &m, &k, &s, factor->data(), &m, &one, a.data(), &m);
  }
  mirror_lower(a);
}

}  // namespace xpd::detail
