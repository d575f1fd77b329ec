#include <gtest/gtest.h>

#include <xpd/config.hpp>
#include <xpd/gpu/device.hpp>

namespace xpd {

TEST(GpuDevice, DiscoveryMatchesBuildAndNeverThrows) {
  EXPECT_EQ(gpu::cuda_compiled(), XPD_WITH_CUDA == 1);
  const auto devices = gpu::cuda_devices();
  if (!gpu::cuda_compiled()) EXPECT_TRUE(devices.empty());
  if (devices.empty()) GTEST_SKIP() << "no CUDA device (built with CUDA: " << gpu::cuda_compiled() << ")";
  for (const auto& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.memory_gib, 0.0);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

}  // namespace xpd
