#pragma once
// The bridge from a Model to the CUDA backend's plain PD (gpu::DevicePd, docs/gpu.md).
#include <memory>
#include <xpd/gpu/cuda_backend.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/model.hpp>

namespace xpd {

/// What gpu::DevicePd needs to run `model` with the frame inputs `inputs` (gravity, nodal forces,
/// attachment targets; fixed for the DevicePd's life). The description points into `model`, which
/// must outlive it. Throws GpuError naming what the device does not run: implicit Euler, the coupled
/// volume term, strain limits, shape targets, point springs, barycentric attachments, a factor that
/// is not supernodal.
gpu::DevicePdDesc make_device_pd_desc(const Model& model, const FrameInputs& inputs);

/// Plain quasistatic PD on the device as a frame-loop strategy (solver.device "cuda"): the positions
/// stay on the device for the whole frame. begin_frame uploads state.x and the frame inputs;
/// evaluate() runs the device local step and forces and brings back E and ||f|| only (fixed-order
/// sums); iterate() is x ← x + K⁻¹ f on the device (gpu::DevicePd); end_frame() downloads x and f
/// into the state. No accelerator (run_frame refuses them for resident strategies). The model must
/// outlive the step; make_device_pd_desc() names what the device does not run (GpuError).
class DevicePdStep final : public GlobalStep {
 public:
  explicit DevicePdStep(const Model& model);
  const char* name() const override { return "device pd"; }
  bool supports(Accelerator a) const override { return a == Accelerator::None; }
  const char* unsupported_reason(Accelerator) const override {
    return "Anderson and Chebyshev acceleration do not run on the device yet (solver.accelerator: none)";
  }
  bool in_place() const override { return true; }
  bool resident() const override { return true; }
  void begin_frame(State& state) override;
  double evaluate(State& state, FrameStats& stats) override;
  void iterate(State& state, FrameStats& stats) override;
  double residual_norm(const State&) const override { return residual_; }
  void end_frame(State& state, FrameStats& stats) override;
  /// The model's own (host) factor: adjoint solves do not need the device.
  void solve_with_matrix(Eigen::MatrixXd& b) const override;
  gpu::DevicePd& device() { return *pd_; }

 private:
  const Model* model_;
  std::unique_ptr<gpu::DevicePd> pd_;
  double residual_ = 0;
};

}  // namespace xpd
