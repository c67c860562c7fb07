// Opening a checkpoint reads headers only; reading one tensor as a view
// raises resident memory by about that tensor only.
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "loader/checkpoint.h"
#include "loader/checkpoint_writer.h"
#include "tests/loader/test_files.h"

namespace placer::loader {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

// A field of a /proc/self file ("VmRSS:", "rchar:"), in its own unit.
std::int64_t ProcField(const std::string& file, const std::string& field) {
  std::ifstream in(file);
  std::string key;
  while (in >> key) {
    if (key == field) {
      std::int64_t value = 0;
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  ADD_FAILURE() << field << " not found in " << file;
  return 0;
}

std::int64_t RssBytes() { return ProcField("/proc/self/status", "VmRSS:") * 1024; }
std::int64_t BytesRead() { return ProcField("/proc/self/io", "rchar:"); }

TEST(LazinessTest, OpenReadsHeadersOnlyAndAViewCostsOneTensor) {
  testing::TempDir dir;
  CheckpointSpec spec = *PresetSpec("llama", "tiny");
  spec.layers = 2, spec.hidden = 1024, spec.heads = 8, spec.kv_heads = 8;
  spec.intermediate = 4096, spec.vocab = 32000, spec.dtype = DType::kF32;
  // Values do not matter here, only bytes on disk: a cheap fill.
  absl::StatusOr<WrittenCheckpoint> written = WriteCheckpoint(
      dir.path(), spec, 1ull << 40, [](const ExpectedTensor&, DType) {
        return [](std::uint8_t* destination, std::size_t nbytes) {
          std::memset(destination, 0x3c, nbytes);
          return absl::OkStatus();
        };
      });
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_GT(written->total_bytes, 300u * kMiB);

  const std::int64_t read_before = BytesRead();
  const std::int64_t rss_before = RssBytes();
  absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::uint64_t listed_bytes = 0;
  for (const auto& [name, info] : (*checkpoint)->tensors()) listed_bytes += info.nbytes();
  EXPECT_EQ(listed_bytes, written->total_bytes);
  EXPECT_LT(BytesRead() - read_before, 1 * kMiB) << "Open read tensor data";
  EXPECT_LT(RssBytes() - rss_before, 8 * kMiB);
  EXPECT_EQ((*checkpoint)->mapped_shard_count(), 0u);

  const std::string name = "model.layers.1.mlp.up_proj.weight";
  const std::int64_t tensor_bytes = static_cast<std::int64_t>((*checkpoint)->Find(name)->nbytes());
  const std::int64_t rss_opened = RssBytes();
  absl::StatusOr<at::Tensor> view = (*checkpoint)->ReadTensor(name, at::kFloat, at::kCPU);
  ASSERT_TRUE(view.ok()) << view.status();
  // Touch every byte of the tensor.
  const float sum = view->sum().item<float>();
  EXPECT_GT(sum, 0.0f);
  const std::int64_t grown = RssBytes() - rss_opened;
  EXPECT_GT(grown, tensor_bytes * 9 / 10) << "the view's pages were not touched?";
  EXPECT_LT(grown, tensor_bytes + 12 * kMiB) << "reading one tensor paged in more than it";
  EXPECT_LT(BytesRead() - read_before, 1 * kMiB) << "mmap reads need no read() calls";
}

}  // namespace
}  // namespace placer::loader
