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
