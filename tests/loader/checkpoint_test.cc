#include "loader/checkpoint.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loader/dtype_torch.h"
#include "loader/architectures/architecture.h"
#include "loader/safetensors_file.h"
#include "loader/safetensors_writer.h"
#include "tests/loader/test_checkpoint.h"
#include "tests/loader/test_files.h"

namespace placer::loader {
namespace {

using testing::TempDir;
using testing::TinySpec;
using testing::WriteTestCheckpoint;

struct RoundTripCase {
  std::string arch;
  DType dtype;
  bool sharded;
};

class RoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTripTest, ReadsBackExactlyWhatWasWritten) {
  const RoundTripCase& c = GetParam();
  TempDir dir;
  const CheckpointSpec spec = TinySpec(c.arch, c.dtype);
  const WrittenCheckpoint written =
      WriteTestCheckpoint(dir.path(), spec, c.sharded ? 20000 : 1ull << 40);
  EXPECT_EQ(written.shard_count > 1, c.sharded);

  absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const Checkpoint& ck = **checkpoint;
  EXPECT_EQ(ck.shards().size(), static_cast<std::size_t>(written.shard_count));
  EXPECT_EQ(ck.parameter_count(), written.parameter_count);
  EXPECT_EQ(ck.total_bytes(), written.total_bytes);
  EXPECT_EQ(ck.dtype(), c.dtype);
  EXPECT_EQ(ck.config().hidden_size, spec.hidden);
  EXPECT_TRUE(ck.has_generation_config());
  EXPECT_EQ(ck.mapped_shard_count(), 0u);

  const at::ScalarType stored = *ToScalarType(c.dtype);
  for (const ExpectedTensor& expected : ExpectedTensors(ck.config())) {
    const TensorInfo* info = ck.Find(expected.name);
    ASSERT_NE(info, nullptr) << expected.name;
    EXPECT_EQ(info->shape, expected.shape);
    absl::StatusOr<at::Tensor> view = ck.ReadTensor(expected.name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->scalar_type(), stored);
    EXPECT_TRUE(at::equal(*view, testing::ExpectedValues(expected, c.dtype, stored)))
        << expected.name;
    // Conversion to float32 equals converting the stored values.
    absl::StatusOr<at::Tensor> as_float = ck.ReadTensor(expected.name, at::kFloat, at::kCPU);
    ASSERT_TRUE(as_float.ok()) << as_float.status();
    EXPECT_TRUE(at::equal(*as_float, view->to(at::kFloat))) << expected.name;
  }
  EXPECT_EQ(ck.mapped_shard_count(), ck.shards().size());
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, RoundTripTest,
    ::testing::Values(RoundTripCase{"llama", DType::kF32, false},
                      RoundTripCase{"llama", DType::kBF16, true},
                      RoundTripCase{"llama", DType::kF16, false},
                      RoundTripCase{"llama", DType::kF32, true},
                      RoundTripCase{"gpt2", DType::kF32, true},
                      RoundTripCase{"gpt2", DType::kBF16, false},
                      RoundTripCase{"gpt2", DType::kF16, true}),
    [](const auto& info) {
      return info.param.arch + std::string(DTypeName(info.param.dtype)) +
             (info.param.sharded ? "Sharded" : "Single");
    });

TEST(SafetensorsFileTest, RoundTripsEveryComputeDtypeAndRefusesF8) {
  TempDir dir;
  std::vector<at::Tensor> sources;
  SafetensorsWriter writer;
  const DType dtypes[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
                          DType::kI32, DType::kI16, DType::kI8,  DType::kU8,   DType::kBool};
  for (const DType dtype : dtypes) {
    at::Tensor source = (at::arange(24, at::kDouble).reshape({2, 3, 4}) - 7).to(*ToScalarType(dtype));
    if (dtype == DType::kBool) source = at::arange(24).reshape({2, 3, 4}).remainder(3).eq(0);
    sources.push_back(source.contiguous());
    const at::Tensor& held = sources.back();
    ASSERT_TRUE(writer
                    .AddBytes(std::string(DTypeName(dtype)), dtype, {2, 3, 4},
                              absl::string_view(static_cast<const char*>(held.data_ptr()),
                                                static_cast<std::size_t>(held.nbytes())))
                    .ok());
  }
  const std::string f8(4, '\x38');
  ASSERT_TRUE(writer.AddBytes("f8", DType::kF8E4M3, {4}, f8).ok());
  ASSERT_TRUE(writer.Write(dir / "all.safetensors").ok());

  absl::StatusOr<std::shared_ptr<SafetensorsFile>> file = SafetensorsFile::Open(dir / "all.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE((*file)->mapped());
  for (std::size_t i = 0; i < std::size(dtypes); ++i) {
    absl::StatusOr<at::Tensor> read = (*file)->Read(DTypeName(dtypes[i]));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(at::equal(*read, sources[i])) << DTypeName(dtypes[i]);
  }
  absl::StatusOr<at::Tensor> f8_read = (*file)->Read("f8");
  ASSERT_FALSE(f8_read.ok());
  EXPECT_NE(std::string(f8_read.status().message()).find("F8_E4M3"), std::string::npos);
  EXPECT_NE(std::string(f8_read.status().message()).find("not supported for compute"),
            std::string::npos);
  EXPECT_NE(std::string(f8_read.status().message()).find("\"f8\""), std::string::npos);
}

TEST(CheckpointTest, ViewsAreZeroCopyAndOutliveTheCheckpoint) {
  TempDir dir;
  WriteTestCheckpoint(dir.path(), TinySpec("llama"));
  at::Tensor view;
  at::Tensor again;
  {
    absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    view = *(*checkpoint)->ReadTensor("model.embed_tokens.weight", at::kFloat, at::kCPU);
    again = *(*checkpoint)->ReadTensor("model.embed_tokens.weight", at::kFloat, at::kCPU);
    // Same bytes of the same mapping: no copy was made.
    EXPECT_EQ(view.data_ptr(), again.data_ptr());
    absl::StatusOr<at::Tensor> converted =
        (*checkpoint)->ReadTensor("model.embed_tokens.weight", at::kBFloat16, at::kCPU);
    ASSERT_TRUE(converted.ok());
    EXPECT_NE(converted->data_ptr(), view.data_ptr());
    EXPECT_TRUE(at::equal(*converted, view.to(at::kBFloat16)));
  }
  // The checkpoint is gone; the mapping lives on while views do.
  EXPECT_TRUE(at::equal(view, again));
  EXPECT_GT(view.abs().sum().item<float>(), 0.0f);
}

TEST(CheckpointTest, UnknownTensorNamesTheCheckpoint) {
  TempDir dir;
  WriteTestCheckpoint(dir.path(), TinySpec("gpt2"));
  absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<at::Tensor> missing = (*checkpoint)->ReadTensor("lm_head.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.status().message()).find(dir.path()), std::string::npos);
  EXPECT_NE(std::string(missing.status().message()).find("lm_head.weight"), std::string::npos);
}

TEST(CheckpointTest, MissingTokenizerStillLoads) {
  TempDir dir;
  WriteTestCheckpoint(dir.path(), TinySpec("llama"));
  absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_FALSE((*checkpoint)->has_tokenizer());
  EXPECT_FALSE((*checkpoint)->tokenizer_config().has_value());
}

TEST(CheckpointTest, Gpt2NamesWithoutTransformerPrefixLoadUnderCanonicalNames) {
  TempDir dir;
  const CheckpointSpec spec = TinySpec("gpt2");
  WriteTestCheckpoint(dir.path(), spec);
  // Rewrite the file with Hub-style names ("h.0.ln_1.weight").
  absl::StatusOr<std::shared_ptr<SafetensorsFile>> original =
      SafetensorsFile::Open(dir / "model.safetensors");
  ASSERT_TRUE(original.ok());
  std::vector<at::Tensor> keep;
  SafetensorsWriter writer;
  for (const auto& [name, entry] : (*original)->header().tensors) {
    keep.push_back(*(*original)->Read(name));
    ASSERT_TRUE(writer
                    .AddBytes(name.substr(std::string("transformer.").size()), entry.dtype,
                              entry.shape,
                              absl::string_view(static_cast<const char*>(keep.back().data_ptr()),
                                                entry.nbytes()))
                    .ok());
  }
  ASSERT_TRUE(writer.Write(dir / "model.safetensors").ok());
  absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const TensorInfo* info = (*checkpoint)->Find("transformer.h.1.attn.c_attn.weight");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->stored_name, "h.1.attn.c_attn.weight");
  EXPECT_EQ(info->shape, (std::vector<std::int64_t>{spec.hidden, 3 * spec.hidden}));
  EXPECT_TRUE((*checkpoint)->ReadTensor("transformer.h.1.attn.c_attn.weight").ok());
}

#ifdef PLACER_MAKE_CHECKPOINT_PATH
TEST(MakeCheckpointToolTest, WritesALoadableDeterministicCheckpointWithTokenizer) {
  TempDir dir;
  const std::string tool = PLACER_MAKE_CHECKPOINT_PATH;
  const auto run = [&](const std::string& out, const std::string& extra) {
    const std::string command = tool + " --out " + out + " --preset tiny " + extra + " > /dev/null";
    return std::system(command.c_str());
  };
  ASSERT_EQ(run(dir / "a", "--seed 3 --dtype BF16 --max-shard-size 1MB"), 0);
  ASSERT_EQ(run(dir / "b", "--seed 3 --dtype BF16 --max-shard-size 1MB"), 0);
  ASSERT_EQ(run(dir / "c", "--seed 4 --arch gpt2"), 0);
  ASSERT_NE(run(dir / "d", "--dtype F8_E4M3"), 0);

  absl::StatusOr<std::shared_ptr<Checkpoint>> a = Checkpoint::Open(dir / "a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT((*a)->shards().size(), 1u);
  EXPECT_GE((*a)->parameter_count(), 1000000);
  EXPECT_LE((*a)->parameter_count(), 5000000);
  EXPECT_EQ((*a)->dtype(), DType::kBF16);
  EXPECT_EQ((*a)->config().torch_dtype, "bfloat16");
  ASSERT_TRUE((*a)->has_tokenizer());
  const nlohmann::json& tokenizer = *(*a)->tokenizer();
  EXPECT_EQ(tokenizer["model"]["type"], "BPE");
  EXPECT_EQ(tokenizer["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(tokenizer["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(static_cast<std::int64_t>(tokenizer["model"]["vocab"].size()),
            (*a)->config().vocab_size);
  EXPECT_GT(tokenizer["model"]["merges"].size(), 100u);
  EXPECT_EQ(tokenizer["model"]["vocab"]["</s>"], (*a)->config().eos_token_ids.at(0));
  EXPECT_EQ((*a)->tokenizer_config()->at("eos_token"), "</s>");

  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "a")) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(testing::ReadFileBytes(dir / ("a/" + name)), testing::ReadFileBytes(dir / ("b/" + name)))
        << name << " differs between two runs with the same seed";
    ++compared;
  }
  EXPECT_GE(compared, 7);
  absl::StatusOr<std::shared_ptr<Checkpoint>> c = Checkpoint::Open(dir / "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->config().is_gpt2());
  EXPECT_EQ((*(*c)->tokenizer())["added_tokens"][0]["content"], "<|endoftext|>");
  EXPECT_EQ((*c)->Find("lm_head.weight"), nullptr);
}
#endif

}  // namespace
}  // namespace placer::loader
