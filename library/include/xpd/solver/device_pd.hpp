#pragma once
// The bridge from a Model to the CUDA backend's plain PD (gpu::DevicePd, docs/gpu.md).
#include <xpd/gpu/cuda_backend.hpp>
#include <xpd/solver/model.hpp>

namespace xpd {

/// What gpu::DevicePd needs to run `model` with the frame inputs `inputs` (gravity, nodal forces,
/// attachment targets; fixed for the DevicePd's life). The description points into `model`, which
/// must outlive it. Throws GpuError naming what the device does not run: implicit Euler, the coupled
/// volume term, strain limits, shape targets, point springs, barycentric attachments, a factor that
/// is not supernodal.
gpu::DevicePdDesc make_device_pd_desc(const Model& model, const FrameInputs& inputs);

}  // namespace xpd
