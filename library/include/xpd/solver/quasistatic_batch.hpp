#pragma once
// Forward and backward passes of quasistatic equilibria over a batch of frames of one model: what a
// learning front end (the Python module's xpd.torch.QuasistaticLayer) calls. Wang 2025, ch. 6:
// per frame i the actuation a_i (shape targets b, #actuated tets × 6) and optionally the attachment
// targets t_i (#attachments × 3) give the equilibrium x_i* = argmin_x E(x; a_i, t_i); backward turns
// ∂L/∂x_i* into ∂L/∂a_i and ∂L/∂t_i by the adjoint method (solver/adjoint.hpp).
//
// Forward keeps one State per batch slot and starts each frame from that slot's last equilibrium
// (the thesis's warm start across training epochs). Backward does not read those states: it is
// given the equilibria and inputs of the forward pass it differentiates (an autograd engine may run
// other forward passes in between, e.g. finite-difference checks), so backward of the same forward
// pass always gives the same gradient.
//
// Array layout: C-contiguous float64, batch index first: a [B, #actuated tets, 6],
// t [B, #attachments, 3], x and ∂L/∂x [B, #nodes, 3].
#include <vector>
#include <xpd/solver/adjoint.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

struct QuasistaticBatchOptions {
  /// The forward solve per frame. Defaults: Anderson, relative tolerance 1e-8, up to 5,000
  /// iterations (SolverOptions otherwise). A frame converges when ||f(x)|| ≤ rel_tolerance ·
  /// ||f(X; a, t)|| (the residual a cold start from the rest shape X would begin with), whatever
  /// its warm start, or by the frame loop's own tests, or at round-off level: ||f(x)|| ≤ 64 ε
  /// || |K| |X − X̄| || (K the PD matrix with entrywise absolute values, X̄ the rest centroid), which
  /// a = 0 needs (its equilibrium is the rest shape, its cold residual is itself round-off) and
  /// tiny actuations too (PD stagnates at ~1e-11 on the face example whatever the size of a).
  SolverOptions forward = default_forward();
  /// Polish each forward equilibrium with the Newton oracle (solver/newton.hpp) to its round-off
  /// level: for gradient checks, where an equilibrium converged only to 1e-8 makes finite
  /// differences compare a slightly different function.
  bool newton_polish = false;
  AdjointOptions adjoint;

  static SolverOptions default_forward() {
    SolverOptions o;
    o.accelerator = Accelerator::Anderson;
    o.rel_tolerance = 1e-8;
    o.max_iterations = 5000;
    return o;
  }
};

class QuasistaticBatch {
 public:
  /// Throws SolverError for an implicit-Euler model.
  explicit QuasistaticBatch(const Model& model, QuasistaticBatchOptions options = {});

  const Model& model() const { return *model_; }
  int num_actuated_tets() const { return static_cast<int>(model_->initial_inputs().shape_targets.rows()); }
  int num_attachment_targets() const { return static_cast<int>(model_->initial_inputs().attachment_targets.rows()); }
  QuasistaticBatchOptions& options() { return options_; }

  /// Solves B frames: x[i] = argmin E(·; a[i], t[i]). `t` may be null (the model's initial attachment
  /// targets). Returns each frame's statistics (check `converged`). Throws SolverError on
  /// non-finite inputs (naming the frame) or a failed solve.
  std::vector<FrameStats> forward(int B, const double* a, const double* t, double* x);

  /// Gradients of the B frames of one forward pass, given its equilibria x, inputs a and t (null:
  /// the initial targets) and ∂L/∂x in g: writes ∂L/∂a to grad_a and ∂L/∂t to grad_t (either may
  /// be null). One batched adjoint solve (AdjointSolver). Throws SolverError as it does.
  std::vector<AdjointStats> backward(int B, const double* x, const double* a, const double* t, const double* g,
                                     double* grad_a, double* grad_t);

  /// The persistent state of batch slot i (after forward or set_warm_start).
  const State& state(int i) const { return states_.at(static_cast<size_t>(i)); }
  /// The slots that hold a warm start: the largest B of a forward pass or set_warm_start so far.
  int num_slots() const { return static_cast<int>(states_.size()); }

  /// Sets the warm start of slots 0..B-1 to x[i] (#nodes × 3 each, layout as above): the next
  /// forward pass starts frame i there (slots beyond B keep theirs). For an optimizer whose trial
  /// step reached an equilibrium it refuses (unstable: the adjoint's Hessian is not positive
  /// definite): warm-started from there, nearby inputs are drawn back to the same unstable branch,
  /// so it returns to the last accepted equilibria instead. Throws SolverError for B < 0 or a
  /// non-finite x (naming the frame).
  void set_warm_start(int B, const double* x);

 private:
  void set_inputs(State& s, int i, const double* a, const double* t) const;
  const Model* model_;
  QuasistaticBatchOptions options_;
  double roundoff_ = 0.0;       // the round-off residual level above
  std::vector<State> states_;   // forward: one per slot, warm-started
  std::vector<State> scratch_;  // backward: equilibria given by the caller
};

}  // namespace xpd
