// hello_pd: the smallest program embedding xpd. A 1 m × 0.1 m × 0.1 m rubber beam (box mesh),
// clamped at x = 0, sags under gravity; quasistatic corotated PD (Bouaziz et al. 2014) finds the
// equilibrium and the program prints the tip's vertical displacement. See docs/library.md.
#include <cstdio>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>

int main() {
  xpd::ModelDesc desc;
  desc.mesh = xpd::make_box(21, 3, 3, xpd::Vec3::Zero(), xpd::Vec3(1.0, 0.1, 0.1));
  desc.mu = {0.5 * 1e7};    // μ = E / 2 for E = 10 MPa (stiff rubber), Poisson ratio 0
  desc.density = {1000.0};  // kg/m³
  desc.gravity = xpd::Vec3(0, 0, -9.81);
  for (int i = 0; i < desc.mesh.nodes.rows(); ++i)  // clamp the x = 0 face with stiff springs
    if (desc.mesh.nodes(i, 0) == 0.0)
      desc.attachments.push_back(
          {xpd::BaryPoint::node(i), 1e3 * desc.mu[0] * 0.05, desc.mesh.nodes.row(i).transpose()});

  const xpd::Model model = xpd::build_model(desc);  // one sparse Cholesky factorization
  xpd::State state = xpd::make_state(model);        // positions start at rest
  xpd::SolverOptions options;
  options.max_iterations = 2000;
  options.accelerator = xpd::Accelerator::Anderson;
  const xpd::FrameStats stats = xpd::step(model, state, options);

  const int tip = 20;  // node (i, j, k) = (20, 0, 0): the lower edge of the free end
  std::printf("hello_pd: %d nodes, %d tets, %d iterations, converged %s\n", model.num_nodes(), model.num_tets(),
              stats.iterations, stats.converged ? "yes" : "no");
  std::printf("tip displacement z = %.6f m\n", state.x(tip, 2) - model.rest_positions()(tip, 2));
  return stats.converged ? 0 : 1;
}
