#pragma once
// Internal: Anderson acceleration step of the frame loop (frame_loop.cpp).
#include <Eigen/Core>
#include <algorithm>
#include <xpd/solver/state.hpp>

namespace xpd::detail {

// Forgets the history (start of a frame, rejected iterate, line search).
inline void anderson_reset(AndersonScratch& a) {
  a.history = a.head = 0;
  a.has_prev = false;
}

// Sizes the window-sized buffers (normal equations) once; the 3n-sized ones are the caller's.
inline void anderson_size_window(AndersonScratch& a, int window) {
  a.normal.resize(window, window);
  a.normal_k.resize(window, window);
  // Size the LDLT's storage by factoring the identity once (a default-constructed LDLT copied
  // into place would carry an uninitialized ComputationInfo).
  a.normal_k.setIdentity();
  a.ldlt.compute(a.normal_k);
  a.gamma.resize(window);
  a.dFtF.resize(window);
  a.history = a.head = 0;
  a.has_prev = false;
}

// The mixing coefficients γ = argmin ||δ − dF γ|| over the k newest secant pairs, from the normal
// equations: M = dFᵀdF in a.normal's top-left k × k block and dFᵀδ in a.dFtF's first k entries
// (the rest zero). M is regularized by 1e-12 tr(M). Shared by the host loop below and by resident
// (device) strategies, which compute M and dFᵀδ where their vectors live.
inline void anderson_coefficients(AndersonScratch& a, int k) {
  auto M = a.normal.topLeftCorner(k, k);
  const double reg = 1e-12 * M.trace() + 1e-300;
  M.diagonal().array() += reg;
  // Solve on the full window: [M 0; 0 I] γ = [dFᵀδ; 0] gives γ = (M⁻¹ dFᵀδ, 0) with buffers of one
  // fixed size, so the step never reallocates while the history grows or restarts.
  a.normal_k.setIdentity();
  a.normal_k.topLeftCorner(k, k) = M;
  a.ldlt.compute(a.normal_k);
  a.gamma = a.ldlt.solve(a.dFtF);
}

// Anderson acceleration (type II, Walker & Ni 2011) of G(x) = x + K⁻¹ f(x); returns the next
// iterate in `x` (a 3n vector view of state.x); the plain iterate is kept in a.x_pd.
inline void anderson_update(AndersonScratch& a, int window, Eigen::Map<Eigen::VectorXd> x,
                            const Eigen::Map<const Eigen::VectorXd>& delta) {
  const Eigen::Index N = x.size();
  if (a.dF.rows() != N || a.dF.cols() != window) {  // first use: size the buffers once
    a.dF.resize(N, window);
    a.dG.resize(N, window);
    a.F_prev.resize(N);
    a.G_prev.resize(N);
    a.x_pd.resize(N);
    anderson_size_window(a, window);
  }
  a.x_pd = x + delta;  // G(x)
  if (a.has_prev) {
    a.dF.col(a.head) = delta - a.F_prev;
    a.dG.col(a.head) = a.x_pd - a.G_prev;
    a.head = (a.head + 1) % window;
    a.history = std::min(a.history + 1, window);
  }
  a.F_prev = delta;
  a.G_prev = a.x_pd;
  a.has_prev = true;
  if (a.history == 0) {
    x = a.x_pd;
    return;
  }
  const int k = a.history;
  auto dF = a.dF.leftCols(k);
  a.normal.topLeftCorner(k, k).noalias() = dF.transpose() * dF;
  a.dFtF.setZero();
  a.dFtF.head(k).noalias() = dF.transpose() * delta;
  anderson_coefficients(a, k);
  x = a.x_pd;
  x.noalias() -= a.dG.leftCols(k) * a.gamma.head(k);
}

}  // namespace xpd::detail
