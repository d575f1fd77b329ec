#pragma once
// Spring terms. Points are barycentric combinations of up to 4 nodes (a plain node is
// {i, -1, -1, -1} with weights {1, 0, 0, 0}); unused slots have node −1 and weight 0.
//  - AttachmentTerm: zero-rest-length springs to kinematic targets, E = Σ c_j/2 ||W_j x − t_j||²;
//    the targets t_j live in FrameInputs::attachment_targets (changeable per frame; the matrix
//    Σ c_j W_jᵀ W_j does not depend on them). Projection p_j = t_j.
//  - SpringTerm: point-to-point springs with rest length L ≥ 0, E = Σ c/2 (||d|| − L)²,
//    d = W_a x − W_b x; PD form c/2 ||d − p||² with p = L d/||d|| (p = 0 for L = 0).
#include <array>
#include <xpd/energy/term.hpp>

namespace xpd {

/// A point given by up to 4 nodes and barycentric weights.
struct BaryPoint {
  std::array<int, 4> nodes{-1, -1, -1, -1};
  std::array<double, 4> weights{0, 0, 0, 0};
  /// The node itself.
  static BaryPoint node(int i) { return {{i, -1, -1, -1}, {1.0, 0, 0, 0}}; }
  /// Position at x.
  Vec3 eval(const Points& x) const {
    Vec3 p = Vec3::Zero();
    for (int a = 0; a < 4; ++a)
      if (nodes[static_cast<size_t>(a)] >= 0)
        p += weights[static_cast<size_t>(a)] * x.row(nodes[static_cast<size_t>(a)]).transpose();
    return p;
  }
};

struct AttachmentSpring {
  BaryPoint point;
  double stiffness = 0;  ///< c > 0
};

struct PointSpring {
  BaryPoint a, b;
  double stiffness = 0;    ///< c > 0
  double rest_length = 0;  ///< L ≥ 0
};

/// Zero-rest-length springs to kinematic targets (targets in FrameInputs).
class AttachmentTerm final : public Term {
 public:
  /// Validates node indices (< num_nodes), stiffness > 0 and finite weights (SolverError).
  AttachmentTerm(std::vector<AttachmentSpring> springs, int num_nodes);
  std::string_view name() const override { return "attachment"; }
  int num_constraints() const override { return static_cast<int>(springs_.size()); }
  int projection_size() const override { return 3; }
  void add_matrix(std::vector<Triplet>& triplets) const override;
  void project(const Points& x, const FrameInputs& in, double* p) const override;
  double energy_given(const Points& x, const FrameInputs& in, const double* p) const override;
  void add_force_given(const Points& x, const FrameInputs& in, const double* p, Points& f) const override;
  double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const override;
  void add_hessian(const Points& x, const FrameInputs& in, std::vector<Triplet>& triplets,
                   bool psd_project = true) const override;
  /// out += Σ c_j W_jᵀ W_j h (the term is quadratic: its Hessian is its PD matrix).
  void add_hessian_product(const Points& x, const FrameInputs& in, const Points& h, Points& out) const override;
  /// grad.attachment_targets.row(j) += c_j (W_j h)ᵀ  (f = −c Wᵀ(W x − t), so ∂f/∂t_j = c_j W_jᵀ).
  void add_input_gradient(const Points& x, const FrameInputs& in, const Points& h, FrameInputs& grad) const override;
  const std::vector<AttachmentSpring>& springs() const { return springs_; }

 private:
  std::vector<AttachmentSpring> springs_;
};

/// Point-to-point springs (rest length ≥ 0).
class SpringTerm final : public Term {
 public:
  SpringTerm(std::vector<PointSpring> springs, int num_nodes);
  std::string_view name() const override { return "spring"; }
  int num_constraints() const override { return static_cast<int>(springs_.size()); }
  int projection_size() const override { return 3; }
  void add_matrix(std::vector<Triplet>& triplets) const override;
  void project(const Points& x, const FrameInputs& in, double* p) const override;
  double energy_given(const Points& x, const FrameInputs& in, const double* p) const override;
  void add_force_given(const Points& x, const FrameInputs& in, const double* p, Points& f) const override;
  double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const override;
  void add_hessian(const Points& x, const FrameInputs& in, std::vector<Triplet>& triplets,
                   bool psd_project = true) const override;
  const std::vector<PointSpring>& springs() const { return springs_; }

 private:
  std::vector<PointSpring> springs_;
};

}  // namespace xpd
