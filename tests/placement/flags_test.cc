#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/budget.h"
#include "placement/byte_size.h"
#include "placement/device_inventory.h"
#include "placement/memory_flags.h"

namespace placer::placement {
namespace {

using ::testing::HasSubstr;

TEST(ByteSizeTest, UnitsAreDecimalOrBinaryAsInAccelerate) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("7B"), 7u);
  EXPECT_EQ(*ParseByteSize("2KB"), 2000u);
  EXPECT_EQ(*ParseByteSize("2KiB"), 2048u);
  EXPECT_EQ(*ParseByteSize("3MB"), 3000000u);
  EXPECT_EQ(*ParseByteSize("3MiB"), 3u << 20);
  EXPECT_EQ(*ParseByteSize("20GB"), 20000000000u);
  EXPECT_EQ(*ParseByteSize("20GiB"), 20ull << 30);
  EXPECT_EQ(*ParseByteSize("1TB"), 1000000000000u);
  EXPECT_EQ(*ParseByteSize("2TiB"), 2ull << 40);
  EXPECT_EQ(*ParseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseByteSize(" 20 GiB "), 20ull << 30);
}

TEST(ByteSizeTest, ErrorsSayWhatIsWrong) {
  EXPECT_THAT(ParseByteSize("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(ParseByteSize("-1GiB").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseByteSize("20 gigs").status().message(), HasSubstr("unknown unit 'gigs'"));
  EXPECT_THAT(ParseByteSize("20Gb").status().message(), HasSubstr("unknown unit 'Gb'"));
  EXPECT_THAT(ParseByteSize("GiB").status().message(), HasSubstr("no number"));
  EXPECT_THAT(ParseByteSize("1.2.3GB").status().message(), HasSubstr("malformed"));
  EXPECT_THAT(ParseByteSize("1.5").status().message(), HasSubstr("fractional"));
  EXPECT_THAT(ParseByteSize("99999999TiB").status().message(), HasSubstr("too large"));
}

TEST(ByteSizeTest, FormatsInBinaryUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(312ull << 20), "312 MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.50 GiB");
}

TEST(MaxMemoryTest, AcceptsEveryAccelerateForm) {
  auto limits = ParseMaxMemory("0=20GiB,cuda:1=10GB, cpu=64GiB,disk=1TB");
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(limits->size(), 4u);
  EXPECT_EQ(limits->at(Device::Cuda(0)), 20ull << 30);
  EXPECT_EQ(limits->at(Device::Cuda(1)), 10000000000u);
  EXPECT_EQ(limits->at(Device::Cpu()), 64ull << 30);
  EXPECT_EQ(limits->at(Device::Disk()), 1000000000000u);
}

TEST(MaxMemoryTest, ErrorsNameTheEntry) {
  EXPECT_THAT(ParseMaxMemory("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(ParseMaxMemory("0=1GiB,,cpu=2GiB").status().message(), HasSubstr("stray comma"));
  EXPECT_THAT(ParseMaxMemory("0:20GiB").status().message(),
              HasSubstr("entry '0:20GiB': expected DEVICE=SIZE"));
  EXPECT_THAT(ParseMaxMemory("gpu0=20GiB").status().message(),
              HasSubstr("entry 'gpu0=20GiB': unknown device 'gpu0'"));
  EXPECT_THAT(ParseMaxMemory("cuda:x=1GiB").status().message(), HasSubstr("unknown device"));
  EXPECT_THAT(ParseMaxMemory("0=lots").status().message(),
              HasSubstr("entry '0=lots': byte size 'lots'"));
  EXPECT_THAT(ParseMaxMemory("0=1GiB,cuda:0=2GiB").status().message(),
              HasSubstr("cuda:0 already given by '0=1GiB'"));
}

TEST(VirtualDevicesTest, ParsesGpusCpuAndDisk) {
  auto devices = ParseVirtualDevices("cuda:0=4GiB,cuda:1=2GiB,cpu=8GiB");
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(devices->gpu_bytes, (std::vector<std::uint64_t>{4ull << 30, 2ull << 30}));
  EXPECT_EQ(devices->cpu_bytes, 8ull << 30);
  EXPECT_FALSE(devices->disk_bytes.has_value());
}

TEST(VirtualDevicesTest, Errors) {
  EXPECT_THAT(ParseVirtualDevices("cuda:1=4GiB").status().message(),
              HasSubstr("cuda:1 given without cuda:0"));
  EXPECT_THAT(ParseVirtualDevices("0=4GiB").status().message(), HasSubstr("cuda:N"));
  EXPECT_THAT(ParseVirtualDevices("cuda:0=0").status().message(), HasSubstr("non-zero"));
  EXPECT_THAT(ParseVirtualDevices("cuda:0").status().message(), HasSubstr("DEVICE=SIZE"));
}

TEST(InventoryTest, ParsesMemInfo) {
  auto memory = ParseMemInfo("MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    8000 kB\n");
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 16000u * 1024);
  EXPECT_EQ(memory->available_bytes, 8000u * 1024);
  EXPECT_THAT(ParseMemInfo("MemTotal: 1 kB\n").status().message(), HasSubstr("MemAvailable"));
  EXPECT_THAT(ParseMemInfo("MemAvailable: lots\n").status().message(),
              HasSubstr("MemAvailable"));
}

TEST(InventoryTest, VirtualDevicesReplaceTheGpuProbe) {
  InventoryOptions options;
  options.virtual_devices = *ParseVirtualDevices("cuda:0=4GiB,cuda:1=4GiB,cpu=8GiB,disk=1TiB");
  bool probed = false;
  options.gpu_probe = [&]() -> absl::StatusOr<std::vector<GpuMemoryInfo>> {
    probed = true;
    return std::vector<GpuMemoryInfo>{};
  };
  auto devices = ProbeDevices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_FALSE(probed);
  ASSERT_EQ(devices->size(), 4u);
  EXPECT_EQ((*devices)[1].device, Device::Cuda(1));
  EXPECT_EQ((*devices)[1].free_bytes, 4ull << 30);
  EXPECT_TRUE((*devices)[1].is_virtual);
  EXPECT_EQ((*devices)[2].device, Device::Cpu());
  EXPECT_EQ((*devices)[3].device, Device::Disk());
}

TEST(InventoryTest, ProbesGpusCpuAndOffloadDir) {
  InventoryOptions options;
  options.gpu_probe = []() -> absl::StatusOr<std::vector<GpuMemoryInfo>> {
    return std::vector<GpuMemoryInfo>{{"Fake GPU", 80ull << 30, 70ull << 30}};
  };
  options.offload_dir = ::testing::TempDir() + "/not/yet/created";
  auto devices = ProbeDevices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0].description, "Fake GPU");
  EXPECT_EQ((*devices)[0].free_bytes, 70ull << 30);
  EXPECT_GT((*devices)[1].free_bytes, 0u);
  EXPECT_EQ((*devices)[2].device, Device::Disk());
  EXPECT_GT((*devices)[2].free_bytes, 0u);
}

TEST(InventoryTest, NoProbeMeansCpuOnly) {
  auto devices = ProbeDevices(InventoryOptions{});
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].device, Device::Cpu());
}

std::vector<DeviceInfo> ThreeDevices() {
  return {{Device::Cuda(0), "gpu", 100ull << 30, 50ull << 30, false},
          {Device::Cpu(), "host", 64ull << 30, 40ull << 30, false},
          {Device::Disk(), "disk", 1ull << 40, 500ull << 30, false}};
}

TEST(BudgetTest, DefaultsToUtilizationOfFreeGpuMemoryAndCpuLessMargin) {
  auto budgets = ComputeBudgets(ThreeDevices(), BudgetOptions{});
  ASSERT_TRUE(budgets.ok()) << budgets.status();
  EXPECT_EQ((*budgets)[0].limit_bytes, 45ull << 30);  // 0.90 x 50 GiB
  EXPECT_EQ((*budgets)[1].limit_bytes, (40ull << 30) - (40ull << 30) / 10);
  EXPECT_EQ((*budgets)[2].limit_bytes, 500ull << 30);
  EXPECT_EQ(CpuSafetyMargin(2ull << 30), 1ull << 30);
  EXPECT_EQ(CpuSafetyMargin(100), 100u);
}

TEST(BudgetTest, MaxMemoryWinsAndUnlistedMemoryDevicesGetNothing) {
  BudgetOptions options;
  options.max_memory = *ParseMaxMemory("0=20GiB");
  auto budgets = ComputeBudgets(ThreeDevices(), options);
  ASSERT_TRUE(budgets.ok()) << budgets.status();
  EXPECT_EQ((*budgets)[0].limit_bytes, 20ull << 30);
  EXPECT_EQ((*budgets)[1].limit_bytes, 0u);
  EXPECT_EQ((*budgets)[2].limit_bytes, 500ull << 30);
}

TEST(BudgetTest, Errors) {
  BudgetOptions options;
  options.max_memory = *ParseMaxMemory("cuda:3=20GiB");
  EXPECT_THAT(ComputeBudgets(ThreeDevices(), options).status().message(),
              HasSubstr("--max-memory entry for cuda:3: no such device"));
  BudgetOptions bad_fraction;
  bad_fraction.gpu_memory_utilization = 1.5;
  EXPECT_THAT(ComputeBudgets(ThreeDevices(), bad_fraction).status().message(),
              HasSubstr("--gpu-memory-utilization"));
}

}  // namespace
}  // namespace placer::placement
