#pragma once
// The bridge from a Model to the CUDA backend's plain PD (gpu::DevicePd, docs/gpu.md).
#include <memory>
#include <xpd/gpu/cuda_backend.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

/// What gpu::DevicePd needs to run `model` with the frame inputs `inputs` (gravity, nodal forces,
/// attachment targets; fixed for the DevicePd's life). The description points into `model`, which
/// must outlive it. Throws GpuError naming what the device does not run: implicit Euler, the coupled
/// volume term, strain limits, shape targets, point springs, barycentric attachments, a factor that
/// is not supernodal.
gpu::DevicePdDesc make_device_pd_desc(const Model& model, const FrameInputs& inputs);

/// Wang et al. 2021's Algorithm 1 on the device for a CollisionModel with the schur method
/// (gpu::DeviceCollisionPd): the model's terms as make_device_pd_desc() accepts them, the x2-last
/// factor, Σ, Σ⁻¹, L22, A22^(β) and E_β of `collision`, buffers for up to `max_springs` springs.
/// The positions start at the rest shape. Throws GpuError for a method other than schur, an empty
/// region, a factor that is not supernodal or Σ⁻¹ not precomputed, and what make_device_pd_desc()
/// refuses.
std::unique_ptr<gpu::DeviceCollisionPd> make_device_collision_pd(const CollisionModel& collision,
                                                                 const FrameInputs& inputs, int max_springs);

/// The springs the CPU's CollisionState builds from `contacts` detected at positions x (all of them
/// active, none kept from earlier detections): per contact its proxy's tet weights over
/// REGION-local nodes and offset = the target; a self contact with a surface point
/// (two_sided_self_contact) gets the other side's tet with negated weights in slots 4-7 and offset
/// 0; a one-sided self contact the half-way target x_p + (t − x_p)/2. Stiffness: the model's.
/// The contacts pass CollisionModel::check_contacts (SolverError, as every CPU detection); GpuError
/// for a contact whose nodes are not all in the region or positions of the wrong size.
void device_springs(const CollisionModel& collision, const std::vector<ProxyContact>& contacts, const Points& x,
                    std::vector<gpu::ContactSpring>& springs, Points& offsets);

/// Quasistatic PD on the device as a frame-loop strategy (solver.device "cuda"): the positions stay
/// on the device for the whole frame. begin_frame uploads state.x and the frame inputs; evaluate()
/// runs the device local step and forces and brings back E and ||f|| only (fixed-order sums);
/// iterate() is x ← x + K⁻¹ f on the device (gpu::DevicePd); Anderson runs on the device through
/// GlobalStep::resident_anderson (the Gram matrix's k(k+3)/2 sums come back, the mixing
/// coefficients are solved on the host by the loop's own detail::anderson_coefficients; window ≤ 8);
/// end_frame() downloads x and f into the state. Chebyshev is refused. iterate() waits for the device
/// (one host synchronization per iteration besides evaluate's) so that the phase times are the
/// device's. The model must outlive the step; make_device_pd_desc() names what the device does not
/// run (GpuError).
class DevicePdStep final : public GlobalStep {
 public:
  /// anderson_window > 0: the device's Anderson buffers for that window are made here (GpuError for
  /// a window above 8 or too little memory), so that no frame allocates.
  explicit DevicePdStep(const Model& model, int anderson_window = 0);
  const char* name() const override { return "device pd"; }
  bool supports(Accelerator a) const override { return a != Accelerator::Chebyshev; }
  const char* unsupported_reason(Accelerator) const override {
    return "Chebyshev acceleration does not run on the device (solver.accelerator: anderson or none)";
  }
  bool in_place() const override { return true; }
  bool resident() const override { return true; }
  void begin_frame(State& state) override;
  double evaluate(State& state, FrameStats& stats) override;
  void iterate(State& state, FrameStats& stats) override;
  double residual_norm(const State&) const override { return residual_; }
  bool resident_anderson(int window) override;
  void resident_anderson_reject() override { pd_->anderson_reject(); }
  void resident_anderson_reset() override { pd_->anderson_reset(); }
  void end_frame(State& state, FrameStats& stats) override;
  /// The model's own (host) factor: adjoint solves do not need the device.
  void solve_with_matrix(Eigen::MatrixXd& b) const override;

 private:
  const Model* model_;
  std::unique_ptr<gpu::DevicePd> pd_;
  double residual_ = 0;
  AndersonScratch anderson_;  // the window's normal equations (the 3n vectors live on the device)
};

}  // namespace xpd
