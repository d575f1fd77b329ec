#pragma once
// Model: everything constant after setup (rest data, terms, the PD matrix and its factorization).
// Built once from a ModelDesc (what a scene loader fills); per-frame inputs (attachment targets,
// shape targets, gravity, nodal forces) live in the State (see state.hpp) and never trigger a
// refactorization.
#include <Eigen/SparseCore>
#include <array>
#include <memory>
#include <vector>
#include <xpd/energy/springs.hpp>
#include <xpd/energy/term.hpp>
#include <xpd/energy/volume.hpp>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

namespace xpd {

enum class Integrator {
  Quasistatic,   ///< minimize E(x) each frame: K δx = f(x) (Wang et al. 2021, eq. 6)
  ImplicitEuler  ///< minimize E(x) + 1/(2h²)||x − y||²_M, y = x_n + h v_n: (K + M/h²) δx = f
};

/// Strain limit on one tet (Wang et al. 2021, §5.3).
struct StrainLimitDesc {
  int tet = -1;
  double stiffness = 0;  ///< μ′ > 0
  double sigma_min = 0;  ///< 0 ≤ σmin < 1
  double sigma_max = 0;  ///< σmax > 1
};

/// Shape target on one tet (Wang 2025, §6.3): S_t from 6 parameters (see shape_target_matrix). The tet
/// then uses μ ||F − R S_t||² instead of the corotated μ ||F − R||² (same μ, same matrix).
struct ShapeTargetDesc {
  int tet = -1;
  std::array<double, 6> params{};  ///< initial b (zeros = rest shape)
};

/// Zero-rest-length spring from a point of the body to a kinematic target.
struct AttachmentDesc {
  BaryPoint point;
  double stiffness = 0;
  Vec3 target = Vec3::Zero();  ///< initial target (changeable per frame in State::inputs)
};

/// Input of build_model. Units are SI by convention (m, kg/m³, Pa, N).
struct ModelDesc {
  TetMesh mesh;            ///< positively oriented tets; nodes = rest positions
  std::vector<double> mu;  ///< per tet (#T), or one value for all; μ > 0
  /// Optional λ ≥ 0, per tet (#T) or one value for all (empty = 0). Any λ > 0 adds the corotated
  /// volume term λ/2 tr²(RᵀF − I) (energy/volume.hpp) and switches the global step to a coupled
  /// 3n × 3n matrix (see volume_matrix).
  std::vector<double> lambda;
  /// The constant matrix used with λ > 0 (ignored when every λ is 0).
  VolumeMatrix volume_matrix = VolumeMatrix::Coupled;
  std::vector<StrainLimitDesc> strain_limits;
  std::vector<ShapeTargetDesc> shape_targets;
  /// Mass density ρ > 0 [kg/m³], per tet (#T) or one value for all. The lumped masses
  /// m_i = Σ_{tets ∋ i} ρ_t Vol_t / 4 are the one mass path: gravity (m_i g) and implicit-Euler
  /// inertia (M/h²) both use them.
  std::vector<double> density{1000.0};
  std::vector<AttachmentDesc> attachments;
  std::vector<PointSpring> springs;
  Vec3 gravity = Vec3::Zero();  ///< initial gravity (changeable per frame)
  Points nodal_forces;          ///< initial #V × 3 forces, or empty
  Integrator integrator = Integrator::Quasistatic;
  double time_step = 1.0 / 30.0;  ///< h > 0 (implicit Euler only)
  /// Quasistatic only: a connected component without attachment makes K singular (translation).
  /// false → build_model throws SolverError naming the component. true → those components get a
  /// proximal regularization ε·diag(K) on their nodes (ε = free_body_regularization), which keeps
  /// the equilibrium unchanged and fixes their mass-weighted mean position (documented exception
  /// for e.g. shape-targeted free bodies).
  bool allow_unattached = false;
  double free_body_regularization = 1e-6;
  CholeskyBackend backend = CholeskyBackend::Cholmod;
  /// Nodes that no tet uses (left by an excision, topology/face_cut.hpp), each with a placeholder
  /// diagonal δ > 0 added to K: zero mass and force, so they stay where they are; they count as
  /// anchored. Springs and attachments must not use them. Any other unused node is an error.
  std::vector<std::pair<int, double>> inactive_nodes;
  /// false: build_model assembles K but does not factor it (Model::factor() then throws); for
  /// models whose global step solves with another factor, e.g. a DynamicLdlt that follows topology
  /// changes (PdStep's second constructor), where refactoring every event is what it avoids.
  bool factorize = true;
};

class TetTerm;

class Model;
namespace detail {
// build_model's one implementation (both overloads).
Model build_model(const ModelDesc& desc, const Model* previous, const FactorModification* change);
}  // namespace detail

/// Constant simulation model. Movable, not copyable.
class Model {
 public:
  int num_nodes() const { return static_cast<int>(rest_.rows()); }
  int num_tets() const { return static_cast<int>(tets_.rows()); }
  const Points& rest_positions() const { return rest_; }
  const Tets& tets() const { return tets_; }
  Integrator integrator() const { return integrator_; }
  double time_step() const { return h_; }
  /// Lumped nodal masses (#V): Σ over incident tets of ρ_t Vol_t / 4 (ModelDesc::density).
  const Eigen::VectorXd& masses() const { return masses_; }
  /// All terms (tet terms first, then springs, then loads).
  const std::vector<std::unique_ptr<Term>>& terms() const { return terms_; }
  /// The n × n PD matrix (identical for x, y, z): Σ w Gᵀ G (+ M/h²) (+ regularization).
  const Eigen::SparseMatrix<double>& matrix() const { return K_; }
  /// True when the global step solves the coupled 3n × 3n matrix3() (λ > 0 with
  /// VolumeMatrix::Coupled); factor() then factors matrix3() and matrix() is not factored.
  bool coupled() const { return coupled_; }
  /// True when the model has the λ volume term (its global step is then a quasi-Newton step with a
  /// line search, see pd_solver.hpp).
  bool has_volume_term() const { return has_volume_; }
  /// The 3n × 3n matrix (DOF 3·node + coordinate): matrix() ⊗ I₃ plus the volume term's rest
  /// Hessian. Empty unless coupled().
  const Eigen::SparseMatrix<double>& matrix3() const { return K3_; }
  /// Diagonal added for unattached components (zero elsewhere); part of matrix().
  const Eigen::VectorXd& regularization() const { return reg_; }
  /// The factor of the global step's matrix: matrix() (n × n, 3 right-hand sides), or matrix3()
  /// when coupled() (3n × 3n, one right-hand side).
  /// Throws SolverError when the model was built with ModelDesc::factorize = false.
  const SparseCholesky& factor() const;
  /// False when the model was built with ModelDesc::factorize = false.
  bool has_factor() const { return factor_ != nullptr; }
  /// Frame inputs as given in the ModelDesc (copied into a new State).
  const FrameInputs& initial_inputs() const { return inputs0_; }
  /// Number of connected components and how many needed regularization.
  int num_components() const { return num_components_; }
  int num_free_components() const { return num_free_components_; }

 private:
  friend Model detail::build_model(const ModelDesc& desc, const Model* previous, const FactorModification* change);
  Points rest_;
  Tets tets_;
  Integrator integrator_ = Integrator::Quasistatic;
  double h_ = 1.0;
  Eigen::VectorXd masses_;
  std::vector<std::unique_ptr<Term>> terms_;
  Eigen::SparseMatrix<double> K_;
  Eigen::SparseMatrix<double> K3_;
  bool coupled_ = false;
  bool has_volume_ = false;
  Eigen::VectorXd reg_;
  std::unique_ptr<SparseCholesky> factor_;
  FrameInputs inputs0_;
  int num_components_ = 0;
  int num_free_components_ = 0;
};

/// Validates `desc` (μ > 0, λ ≥ 0, weights > 0, 0 ≤ σmin < 1 < σmax, h > 0, indices in range, every
/// node used, components attached), builds the terms, assembles K and factorizes it once.
/// Throws SolverError / MeshError with a message naming the offending item.
Model build_model(const ModelDesc& desc);

/// build_model for a description that differs from `previous`'s by a change of the PD matrix the
/// caller knows exactly (a topology event's FactorModification, solver/topology_update.hpp):
/// K = apply_modification(previous.matrix(), change), plus implicit Euler's ΔM/h² from the two
/// models' lumped masses (a new node had none), instead of assembling the terms' 16 entries per
/// tet (about 1.7 s of the 2.1 s build of box:48; the terms, masses and checks are built as
/// build_model does). The result equals build_model(desc) up to summation-order round-off when
/// `change` is the difference of the two assemblies (inactive nodes' placeholders included) —
/// the caller's contract, which SurgerySession's refactor mode (an assembly per event) checks.
/// Throws SolverError for a coupled or regularized model (either one), or when previous's nodes +
/// change.new_dofs is not desc's node count; otherwise as build_model.
Model build_model(const ModelDesc& desc, const Model& previous, const FactorModification& change);

}  // namespace xpd
