#include <fmt/format.h>

#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/energy/springs.hpp>

namespace xpd {

namespace {

void validate_point(const BaryPoint& p, int num_nodes, const char* what, size_t j) {
  bool any = false;
  for (int a = 0; a < 4; ++a) {
    const int i = p.nodes[static_cast<size_t>(a)];
    const double w = p.weights[static_cast<size_t>(a)];
    if (!std::isfinite(w)) throw SolverError(fmt::format("{} #{}: non-finite barycentric weight", what, j));
    if (i < 0) continue;
    if (i >= num_nodes)
      throw SolverError(fmt::format("{} #{}: node index {} out of range [0, {})", what, j, i, num_nodes));
    any = true;
  }
  if (!any) throw SolverError(fmt::format("{} #{}: point references no node", what, j));
}

void validate_stiffness(double c, const char* what, size_t j) {
  if (!(c > 0.0) || !std::isfinite(c))
    throw SolverError(fmt::format("{} #{}: stiffness must be positive and finite, got {}", what, j, c));
}

// Adds c β βᵀ (scalar block) for β = weights over nodes (signs folded into the weights).
template <size_t N>
void add_outer(std::vector<Triplet>& t, const std::array<int, N>& n, const std::array<double, N>& b, double c) {
  for (size_t a = 0; a < N; ++a)
    for (size_t d = 0; d < N; ++d)
      if (n[a] >= 0 && n[d] >= 0) t.emplace_back(n[a], n[d], c * b[a] * b[d]);
}

// f −= c r at the point (distributed by weights): f_i −= c β_i r.
void scatter(Points& f, const BaryPoint& p, const Vec3& r, double scale) {
  for (int a = 0; a < 4; ++a) {
    const int i = p.nodes[static_cast<size_t>(a)];
    if (i >= 0) f.row(i) += scale * p.weights[static_cast<size_t>(a)] * r.transpose();
  }
}

// 3n × 3n triplets of β βᵀ ⊗ M (β over the 8 slots of two points, b with negative sign).
void add_hessian_block(std::vector<Triplet>& t, const std::array<int, 8>& n, const std::array<double, 8>& b,
                       const Mat3& M) {
  for (size_t a = 0; a < 8; ++a)
    for (size_t e = 0; e < 8; ++e)
      if (n[a] >= 0 && n[e] >= 0)
        for (int d = 0; d < 3; ++d)
          for (int c = 0; c < 3; ++c) t.emplace_back(3 * n[a] + d, 3 * n[e] + c, b[a] * b[e] * M(d, c));
}

std::array<int, 8> concat_nodes(const BaryPoint& a, const BaryPoint& b) {
  return {a.nodes[0], a.nodes[1], a.nodes[2], a.nodes[3], b.nodes[0], b.nodes[1], b.nodes[2], b.nodes[3]};
}
std::array<double, 8> concat_weights(const BaryPoint& a, const BaryPoint& b, double sb) {
  return {a.weights[0],      a.weights[1],      a.weights[2],      a.weights[3],
          sb * b.weights[0], sb * b.weights[1], sb * b.weights[2], sb * b.weights[3]};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
AttachmentTerm::AttachmentTerm(std::vector<AttachmentSpring> springs, int num_nodes) : springs_(std::move(springs)) {
  for (size_t j = 0; j < springs_.size(); ++j) {
    validate_point(springs_[j].point, num_nodes, "attachment", j);
    validate_stiffness(springs_[j].stiffness, "attachment", j);
  }
}

void AttachmentTerm::add_matrix(std::vector<Triplet>& t) const {
  for (const auto& s : springs_) add_outer(t, s.point.nodes, s.point.weights, s.stiffness);
}

void AttachmentTerm::project(const Points&, const FrameInputs& in, double* p) const {
  for (size_t j = 0; j < springs_.size(); ++j)
    for (int d = 0; d < 3; ++d)
      p[3 * j + static_cast<size_t>(d)] = in.attachment_targets(static_cast<Eigen::Index>(j), d);
}

double AttachmentTerm::energy_given(const Points& x, const FrameInputs&, const double* p) const {
  double e = 0.0;
  for (size_t j = 0; j < springs_.size(); ++j)
    e += 0.5 * springs_[j].stiffness * (springs_[j].point.eval(x) - Eigen::Map<const Vec3>(p + 3 * j)).squaredNorm();
  return e;
}

void AttachmentTerm::add_force_given(const Points& x, const FrameInputs&, const double* p, Points& f) const {
  for (size_t j = 0; j < springs_.size(); ++j) {
    const Vec3 r = springs_[j].point.eval(x) - Eigen::Map<const Vec3>(p + 3 * j);
    scatter(f, springs_[j].point, r, -springs_[j].stiffness);
  }
}

double AttachmentTerm::project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const {
  double e = 0.0;
  for (size_t j = 0; j < springs_.size(); ++j) {
    const Vec3 t = in.attachment_targets.row(static_cast<Eigen::Index>(j)).transpose();
    const Vec3 r = springs_[j].point.eval(x) - t;
    e += 0.5 * springs_[j].stiffness * r.squaredNorm();
    scatter(f, springs_[j].point, r, -springs_[j].stiffness);
    if (p_out) Eigen::Map<Vec3>(p_out + 3 * j) = t;
  }
  return e;
}

void AttachmentTerm::add_hessian(const Points&, const FrameInputs&, std::vector<Triplet>& t, bool) const {
  const BaryPoint none;
  for (const auto& s : springs_)
    add_hessian_block(t, concat_nodes(s.point, none), concat_weights(s.point, none, 0.0),
                      s.stiffness * Mat3::Identity());
}

void AttachmentTerm::add_hessian_product(const Points&, const FrameInputs&, const Points& h, Points& out) const {
  for (const auto& s : springs_) {
    const Vec3 Wh = s.stiffness * s.point.eval(h);
    for (int a = 0; a < 4; ++a)
      if (s.point.nodes[static_cast<size_t>(a)] >= 0)
        out.row(s.point.nodes[static_cast<size_t>(a)]) += s.point.weights[static_cast<size_t>(a)] * Wh.transpose();
  }
}

void AttachmentTerm::add_input_gradient(const Points&, const FrameInputs&, const Points& h, FrameInputs& grad) const {
  for (size_t j = 0; j < springs_.size(); ++j)
    grad.attachment_targets.row(static_cast<Eigen::Index>(j)) +=
        springs_[j].stiffness * springs_[j].point.eval(h).transpose();
}

// ---------------------------------------------------------------------------------------------
SpringTerm::SpringTerm(std::vector<PointSpring> springs, int num_nodes) : springs_(std::move(springs)) {
  for (size_t j = 0; j < springs_.size(); ++j) {
    validate_point(springs_[j].a, num_nodes, "spring", j);
    validate_point(springs_[j].b, num_nodes, "spring", j);
    validate_stiffness(springs_[j].stiffness, "spring", j);
    if (!(springs_[j].rest_length >= 0.0) || !std::isfinite(springs_[j].rest_length))
      throw SolverError(fmt::format("spring #{}: rest length must be >= 0, got {}", j, springs_[j].rest_length));
  }
}

void SpringTerm::add_matrix(std::vector<Triplet>& t) const {
  for (const auto& s : springs_) add_outer(t, concat_nodes(s.a, s.b), concat_weights(s.a, s.b, -1.0), s.stiffness);
}

namespace {
inline Vec3 spring_projection(const PointSpring& s, const Vec3& d) {
  if (s.rest_length == 0.0) return Vec3::Zero();
  const double len = d.norm();
  if (len == 0.0) return Vec3(s.rest_length, 0, 0);  // any direction is a minimizer
  return (s.rest_length / len) * d;
}
}  // namespace

void SpringTerm::project(const Points& x, const FrameInputs&, double* p) const {
  for (size_t j = 0; j < springs_.size(); ++j) {
    const Vec3 d = springs_[j].a.eval(x) - springs_[j].b.eval(x);
    Eigen::Map<Vec3>(p + 3 * j) = spring_projection(springs_[j], d);
  }
}

double SpringTerm::energy_given(const Points& x, const FrameInputs&, const double* p) const {
  double e = 0.0;
  for (size_t j = 0; j < springs_.size(); ++j) {
    const Vec3 d = springs_[j].a.eval(x) - springs_[j].b.eval(x);
    e += 0.5 * springs_[j].stiffness * (d - Eigen::Map<const Vec3>(p + 3 * j)).squaredNorm();
  }
  return e;
}

void SpringTerm::add_force_given(const Points& x, const FrameInputs&, const double* p, Points& f) const {
  for (size_t j = 0; j < springs_.size(); ++j) {
    const auto& s = springs_[j];
    const Vec3 r = s.a.eval(x) - s.b.eval(x) - Eigen::Map<const Vec3>(p + 3 * j);
    scatter(f, s.a, r, -s.stiffness);
    scatter(f, s.b, r, s.stiffness);
  }
}

double SpringTerm::project_add_force(const Points& x, const FrameInputs&, Points& f, double* p_out) const {
  double e = 0.0;
  for (size_t j = 0; j < springs_.size(); ++j) {
    const auto& s = springs_[j];
    const Vec3 d = s.a.eval(x) - s.b.eval(x);
    const Vec3 p = spring_projection(s, d);
    const Vec3 r = d - p;
    e += 0.5 * s.stiffness * r.squaredNorm();
    scatter(f, s.a, r, -s.stiffness);
    scatter(f, s.b, r, s.stiffness);
    if (p_out) Eigen::Map<Vec3>(p_out + 3 * j) = p;
  }
  return e;
}

void SpringTerm::add_hessian(const Points& x, const FrameInputs&, std::vector<Triplet>& t, bool psd_project) const {
  for (const auto& s : springs_) {
    const Vec3 d = s.a.eval(x) - s.b.eval(x);
    Mat3 M = s.stiffness * Mat3::Identity();
    const double len = d.norm();
    if (s.rest_length > 0.0 && len > 0.0) {
      // ∇²_d [c/2 (|d| − L)²] = c [(1 − L/|d|)(I − d̂d̂ᵀ) + d̂d̂ᵀ]; clamp the transverse part at 0.
      const Vec3 n = d / len;
      const Mat3 P = n * n.transpose();
      const double transverse = 1.0 - s.rest_length / len;
      M = s.stiffness * ((psd_project ? std::max(0.0, transverse) : transverse) * (Mat3::Identity() - P) + P);
    }
    add_hessian_block(t, concat_nodes(s.a, s.b), concat_weights(s.a, s.b, -1.0), M);
  }
}

// ---------------------------------------------------------------------------------------------
}  // namespace xpd
