#include "loader/offload_store.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loader/quantized_weight.h"
#include "tests/loader/test_checkpoint.h"
#include "tests/loader/test_files.h"

namespace placer::loader {
namespace {

using testing::TempDir;
using testing::TinySpec;
using testing::WriteTestCheckpoint;

class OffloadStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteTestCheckpoint(checkpoint_dir_.path(), TinySpec("llama", DType::kBF16), 1ull << 40, 7);
  }
  std::shared_ptr<Checkpoint> OpenCheckpoint() {
    absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(checkpoint_dir_.path());
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    return checkpoint.ok() ? *checkpoint : nullptr;
  }
  std::shared_ptr<OffloadStore> OpenStore(const std::shared_ptr<Checkpoint>& checkpoint,
                                          at::ScalarType dtype = at::kFloat) {
    absl::StatusOr<std::shared_ptr<OffloadStore>> store =
        OffloadStore::Open(checkpoint, offload_dir_.path(), names_, dtype);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *store : nullptr;
  }
  void ExpectServesConvertedValues(const Checkpoint& checkpoint, const OffloadStore& store) {
    for (const std::string& name : names_) {
      absl::StatusOr<at::Tensor> offloaded = store.Read(name);
      ASSERT_TRUE(offloaded.ok()) << offloaded.status();
      EXPECT_EQ(offloaded->scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(*offloaded, checkpoint.ReadTensor(name)->to(at::kFloat))) << name;
    }
  }
  std::string StorePath() const {
    return offload_dir_ / std::string(OffloadStore::kStoreName);
  }

  TempDir checkpoint_dir_;
  TempDir offload_dir_;
  std::vector<std::string> names_ = {"model.layers.1.mlp.down_proj.weight",
                                     "model.layers.1.self_attn.q_proj.weight", "lm_head.weight"};
};

TEST_F(OffloadStoreTest, MatchingDtypeIsServedFromTheCheckpointWithoutWriting) {
  std::shared_ptr<Checkpoint> checkpoint = OpenCheckpoint();
  std::shared_ptr<OffloadStore> store = OpenStore(checkpoint, at::kBFloat16);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->converted().empty());
  EXPECT_TRUE(std::filesystem::is_empty(offload_dir_.path()));
  absl::StatusOr<at::Tensor> view = store->Read("lm_head.weight");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->data_ptr(), checkpoint->ReadTensor("lm_head.weight")->data_ptr());
  EXPECT_FALSE(store->Read("model.norm.weight").ok());
}

TEST_F(OffloadStoreTest, ConvertsOnceAndReusesOnTheSecondOpen) {
  std::shared_ptr<Checkpoint> checkpoint = OpenCheckpoint();
  std::shared_ptr<OffloadStore> first = OpenStore(checkpoint);
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(first->reused());
  EXPECT_EQ(first->converted().size(), names_.size());
  ExpectServesConvertedValues(*checkpoint, *first);
  const auto written_at = std::filesystem::last_write_time(StorePath());

  std::shared_ptr<OffloadStore> second = OpenStore(OpenCheckpoint());
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->reused()) << second->rebuild_reason();
  EXPECT_EQ(std::filesystem::last_write_time(StorePath()), written_at);
  ExpectServesConvertedValues(*checkpoint, *second);
}

TEST_F(OffloadStoreTest, RebuildsWhenTheSourceChanges) {
  ASSERT_NE(OpenStore(OpenCheckpoint()), nullptr);
  // Same layout, different values: only the source files' identity changed.
  WriteTestCheckpoint(checkpoint_dir_.path(), TinySpec("llama", DType::kBF16), 1ull << 40, 8);
  std::shared_ptr<Checkpoint> changed = OpenCheckpoint();
  std::shared_ptr<OffloadStore> store = OpenStore(changed);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->reused());
  EXPECT_NE(store->rebuild_reason().find("source"), std::string::npos) << store->rebuild_reason();
  ExpectServesConvertedValues(*changed, *store);
}

TEST_F(OffloadStoreTest, RebuildsWhenTheStoreOrManifestIsCorrupt) {
  std::shared_ptr<Checkpoint> checkpoint = OpenCheckpoint();
  ASSERT_NE(OpenStore(checkpoint), nullptr);
  std::filesystem::resize_file(StorePath(), std::filesystem::file_size(StorePath()) - 100);
  std::shared_ptr<OffloadStore> after_truncation = OpenStore(checkpoint);
  ASSERT_NE(after_truncation, nullptr);
  EXPECT_FALSE(after_truncation->reused());
  EXPECT_NE(after_truncation->rebuild_reason().find("corrupt"), std::string::npos)
      << after_truncation->rebuild_reason();
  ExpectServesConvertedValues(*checkpoint, *after_truncation);

  testing::WriteFileBytes(offload_dir_ / std::string(OffloadStore::kManifestName), "{\"version\": ");
  std::shared_ptr<OffloadStore> after_bad_manifest = OpenStore(checkpoint);
  ASSERT_NE(after_bad_manifest, nullptr);
  EXPECT_FALSE(after_bad_manifest->reused());
  ExpectServesConvertedValues(*checkpoint, *after_bad_manifest);

  // A different set of offloaded tensors is a different store.
  names_.pop_back();
  std::shared_ptr<OffloadStore> other_plan = OpenStore(checkpoint);
  ASSERT_NE(other_plan, nullptr);
  EXPECT_FALSE(other_plan->reused());
  ExpectServesConvertedValues(*checkpoint, *other_plan);
}

// --quantize with weights on disk: the packed weights go into the store once (beside converted
// ones), come back as the packer made them, are reused at the next start with the same scheme,
// and rebuilt under another.
TEST_F(OffloadStoreTest, PackedWeightsAreStoredOnceAndReusedUnderTheSameScheme) {
  const std::string packed_name = "model.layers.0.mlp.up_proj.weight";  // [48, 32]
  int packs = 0;
  auto open = [&](const std::shared_ptr<Checkpoint>& checkpoint, const std::string& scheme,
                  int64_t group) {
    const PackedLayout layout{group == 0 ? 8 : 4, 48, 32, group == 0 ? 32 : group};
    PackedOffload packed;
    packed.scheme = scheme;
    packed.tensors.push_back({packed_name, layout.bits == 8 ? DType::kI8 : DType::kU8,
                              {layout.out, layout.groups(), layout.block_bytes()}});
    packed.pack = [&packs, checkpoint, layout](const std::string& name) {
      ++packs;
      return QuantizeLinearWeight(*checkpoint->ReadTensor(name), layout, name);
    };
    absl::StatusOr<std::shared_ptr<OffloadStore>> store =
        OffloadStore::Open(checkpoint, offload_dir_.path(), names_, at::kFloat, packed);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *store : nullptr;
  };
  std::shared_ptr<Checkpoint> checkpoint = OpenCheckpoint();
  std::shared_ptr<OffloadStore> first = open(checkpoint, "int4 (groups of 32)", 32);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(packs, 1);
  EXPECT_EQ(first->converted().count(packed_name), 1u);
  absl::StatusOr<at::Tensor> read = first->Read(packed_name);
  ASSERT_TRUE(read.ok()) << read.status();
  const PackedLayout int4{4, 48, 32, 32};
  EXPECT_TRUE(at::equal(*read, *QuantizeLinearWeight(*checkpoint->ReadTensor(packed_name), int4, "w")));
  EXPECT_TRUE(IsPackedWeight(*read));
  ExpectServesConvertedValues(*checkpoint, *first);

  std::shared_ptr<OffloadStore> again = open(OpenCheckpoint(), "int4 (groups of 32)", 32);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->reused()) << again->rebuild_reason();
  EXPECT_EQ(packs, 1) << "reused: nothing packed again";

  std::shared_ptr<OffloadStore> other = open(OpenCheckpoint(), "int8 (one scale per output channel)", 0);
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->reused());
  EXPECT_NE(other->rebuild_reason().find("quantization"), std::string::npos) << other->rebuild_reason();
  EXPECT_EQ(packs, 2);
  EXPECT_EQ(other->Read(packed_name)->scalar_type(), at::kChar);
}

}  // namespace
}  // namespace placer::loader
