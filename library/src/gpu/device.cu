// CUDA build of device discovery (compiled only with XPD_WITH_CUDA=ON). A missing driver or
// device is not an error: the list is simply empty.
#include <cuda_runtime.h>

#include <xpd/gpu/device.hpp>

namespace xpd::gpu {

bool cuda_compiled() { return true; }

std::vector<DeviceInfo> cuda_devices() {
  std::vector<DeviceInfo> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.major, p.minor, static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                   p.multiProcessorCount});
  }
  return out;
}

}  // namespace xpd::gpu
