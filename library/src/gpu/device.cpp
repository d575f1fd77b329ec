// Host-only build of device discovery: used when the CUDA backend is not compiled.
#include <xpd/config.hpp>
#include <xpd/gpu/device.hpp>

#if !XPD_WITH_CUDA
namespace xpd::gpu {
bool cuda_compiled() { return false; }
std::vector<DeviceInfo> cuda_devices() { return {}; }
}  // namespace xpd::gpu
#endif
