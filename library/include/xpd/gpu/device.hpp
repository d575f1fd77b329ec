#pragma once
// CUDA device discovery. The GPU backend is optional (CMake option XPD_WITH_CUDA); without it,
// or on a machine without a GPU, cuda_devices() is empty and every GPU path is skipped.
#include <string>
#include <vector>

namespace xpd::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  double memory_gib = 0;  ///< total global memory
  int multiprocessors = 0;
};

/// True when xpd was built with the CUDA backend (XPD_WITH_CUDA=ON).
bool cuda_compiled();

/// CUDA devices visible to this process; empty without the CUDA backend, without a driver or
/// without a device (never throws).
std::vector<DeviceInfo> cuda_devices();

}  // namespace xpd::gpu
