#include <fmt/format.h>

#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/energy/corotated.hpp>
#include <xpd/energy/loads.hpp>
#include <xpd/energy/springs.hpp>
#include <xpd/solver/device_pd.hpp>

#include "anderson.hpp"

namespace xpd {

gpu::DevicePdDesc make_device_pd_desc(const Model& model, const FrameInputs& inputs) {
  if (model.integrator() != Integrator::Quasistatic)
    throw GpuError("GPU PD: only quasistatic models run on the device so far (implicit Euler stays on the CPU)");
  if (model.coupled()) throw GpuError("GPU PD: the coupled volume term (lambda > 0) does not run on the device");
  const CorotatedTerm* corot = nullptr;
  const AttachmentTerm* att = nullptr;
  for (const auto& t : model.terms()) {
    if (auto* c = dynamic_cast<const CorotatedTerm*>(t.get()); c && !corot)
      corot = c;
    else if (auto* a = dynamic_cast<const AttachmentTerm*>(t.get()); a && !att)
      att = a;
    else if (!dynamic_cast<const LoadTerm*>(t.get()))
      throw GpuError(fmt::format("GPU PD: the term '{}' does not run on the device", t->name()));
  }
  if (!corot) throw GpuError("GPU PD: the model has no corotated term");
  gpu::DevicePdDesc d;
  d.elements = &corot->elements();
  if (att) {
    d.attachments = att->springs();
    d.attachment_targets = inputs.attachment_targets;
  } else {
    d.attachment_targets.resize(0, 3);
  }
  d.masses = model.masses();
  d.gravity = inputs.gravity;
  d.nodal_forces = inputs.nodal_forces;
  d.rest = model.rest_positions();
  d.factor = model.factor().supernodal_factor();
  if (d.factor.nsuper == 0) throw GpuError("GPU PD: the model's factor is not a CHOLMOD supernodal factor");
  return d;
}

std::unique_ptr<gpu::DeviceCollisionPd> make_device_collision_pd(const CollisionModel& collision,
                                                                 const FrameInputs& inputs, int max_springs) {
  if (collision.options().method != CollisionMethod::Schur)
    throw GpuError("GPU collision PD: only the schur method runs on the device");
  if (collision.options().self_contact_half_space)
    throw GpuError("GPU collision PD: half-space self-contact springs (self_collision.half_space) run on the CPU only");
  const SchurFactorization* S = collision.schur();
  if (!S) throw GpuError("GPU collision PD: the collision region is empty");
  if (S->schur_inverse().rows() != S->m())
    throw GpuError("GPU collision PD: the Schur factorization has no precomputed inverse (Woodbury needs it)");
  const SupernodalFactorCopy factor = S->supernodal_factor();
  if (factor.nsuper == 0) throw GpuError("GPU collision PD: the x2-last factor is not a CHOLMOD supernodal factor");
  gpu::DeviceCollisionDesc d;
  d.pd = make_device_pd_desc(collision.model(), inputs);
  d.pd.factor = factor.view();
  d.region_nodes = S->region_nodes();
  d.factor_position.resize(d.region_nodes.size());
  for (int i = 0; i < S->m(); ++i) d.factor_position[static_cast<size_t>(i)] = S->factor_position(i);
  d.l22 = S->schur_factor();
  d.sigma = S->schur_complement();
  d.sigma_inv = S->schur_inverse();
  d.a22_beta = collision.beta_matrix();
  for (const CollisionBetaElements& b : collision.beta_elements())
    if (&b.term->elements() == d.pd.elements) d.beta_elements = b.elements;
  d.max_springs = max_springs;
  return std::make_unique<gpu::DeviceCollisionPd>(d);
}

void device_springs(const CollisionModel& collision, const std::vector<ProxyContact>& contacts, const Points& x,
                    std::vector<gpu::ContactSpring>& springs, Points& offsets) {
  const SchurFactorization* S = collision.schur();
  if (!S) throw GpuError("GPU collision PD: the collision region is empty");
  const Tets& tets = collision.model().tets();
  const ProxySet& proxies = collision.proxies();
  const bool two_sided = collision.options().two_sided_self_contact;
  if (x.rows() != collision.model().num_nodes() || x.cols() != 3)
    throw GpuError(fmt::format("GPU collision PD: positions of {} nodes for a mesh of {}", x.rows(),
                               collision.model().num_nodes()));
  collision.check_contacts(contacts);
  springs.assign(contacts.size(), {});
  offsets.setZero(static_cast<Eigen::Index>(contacts.size()), 3);
  auto local = [&](int node) {
    const int i = S->region_index(node);
    if (i < 0) throw GpuError(fmt::format("GPU collision PD: a contact reads node {}, outside the region", node));
    return i;
  };
  for (size_t c = 0; c < contacts.size(); ++c) {
    const ProxyContact& ct = contacts[c];
    gpu::ContactSpring& sp = springs[c];
    const int t = proxies.tet[static_cast<size_t>(ct.proxy)];
    for (int a = 0; a < 4; ++a) {
      sp.nodes[static_cast<size_t>(a)] = local(tets(t, a));
      sp.weights[static_cast<size_t>(a)] = proxies.weights(ct.proxy, a);
    }
    const bool self = ct.source == ProxyContact::Source::Self;
    if (self && two_sided && ct.surface_tet >= 0) {
      if (ct.surface_tet >= collision.model().num_tets())
        throw GpuError(
            fmt::format("GPU collision PD: proxy {} has surface tet {} outside the mesh", ct.proxy, ct.surface_tet));
      for (int a = 0; a < 4; ++a) {
        sp.nodes[static_cast<size_t>(4 + a)] = local(tets(ct.surface_tet, a));
        sp.weights[static_cast<size_t>(4 + a)] = -ct.surface_weights[a];
      }
    } else if (self) {  // one-sided self contact: the half-way target (collision_solver.cpp)
      Vec3 xp = Vec3::Zero();
      for (int a = 0; a < 4; ++a) xp += proxies.weights(ct.proxy, a) * x.row(tets(t, a)).transpose();
      offsets.row(static_cast<Eigen::Index>(c)) = (xp + 0.5 * (ct.target - xp)).transpose();
    } else {
      offsets.row(static_cast<Eigen::Index>(c)) = ct.target.transpose();
    }
    sp.stiffness = collision.options().stiffness;
  }
}

DevicePdStep::DevicePdStep(const Model& model, int anderson_window)
    : model_(&model), pd_(std::make_unique<gpu::DevicePd>(make_device_pd_desc(model, model.initial_inputs()))) {
  if (anderson_window > 0) pd_->anderson_prepare(anderson_window);
}

void DevicePdStep::begin_frame(State& s) {
  pd_->set_positions(s.x);
  pd_->set_inputs(s.inputs.attachment_targets, s.inputs.gravity, s.inputs.nodal_forces);
}

double DevicePdStep::evaluate(State&, FrameStats& st) {
  PhaseTimer pt;
  const gpu::DevicePd::Evaluation e = pd_->evaluate();
  residual_ = e.residual;
  pt.lap(st.timings_ms.local);
  return e.energy;
}

void DevicePdStep::iterate(State&, FrameStats& st) {
  PhaseTimer pt;
  pd_->apply_step();
  gpu::synchronize();  // so that the phase times are the device's, not the launches'
  pt.lap(st.timings_ms.solve);
}

bool DevicePdStep::resident_anderson(int window) {
  if (anderson_.normal.rows() != window) detail::anderson_size_window(anderson_, window);
  const int k = pd_->anderson_record(window, anderson_.normal, anderson_.dFtF);
  if (k > 0) {
    detail::anderson_coefficients(anderson_, k);
    pd_->anderson_combine(anderson_.gamma, k);
  }
  return k > 0;
}

void DevicePdStep::end_frame(State& s, FrameStats&) {
  s.x = pd_->positions();
  s.force = pd_->forces();
}

void DevicePdStep::solve_with_matrix(Eigen::MatrixXd& b) const { model_->factor().solve_in_place(b); }

}  // namespace xpd
