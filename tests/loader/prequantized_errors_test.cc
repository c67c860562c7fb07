// Every malformed field of a pre-quantized checkpoint is refused with a message naming the
// file, the field or tensor and why. Each case starts from a good checkpoint written by the
// independent Python packer (tests/model/prequantized_writer.py) and breaks one thing.
#include <algorithm>
#include <filesystem>
#include <list>
#include <random>
#include <string>

#include "tests/loader/prequantized_checkpoints.h"

namespace placer::loader {
namespace {

using testing::ReadFileBytes;
namespace fs = std::filesystem;
using testing::WriteFileBytes;

TEST_F(PrequantizedErrorsTest, TheGoodCheckpointsOpenAndRepack) {
  for (const std::string format : {"gptq", "awq", "ct-pack", "ct-int", "gptq-file"}) {
    auto checkpoint = Checkpoint::Open((*sources_) / format);
    ASSERT_TRUE(checkpoint.ok()) << format << ": " << checkpoint.status();
    ASSERT_TRUE((*checkpoint)->config().quantization.has_value()) << format;
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(absl::StrCat(kQProj, ".weight"));
    ASSERT_NE(source, nullptr) << format;
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok()) << format;
  }
}

TEST_F(PrequantizedErrorsTest, TensorsAreCheckedByNameDtypeAndShape) {
  const std::string q = kQProj;
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t.erase(q + ".qzeros"); });
    ExpectOpenFails(dir, {q + ".qzeros", "is missing", "GPTQ 4-bit"});
  }
  {
    const std::string dir = Copy("awq");
    EditTensors(dir, [&](auto& t) { t[q + ".qweight"] = t[q + ".qweight"].repeat({1, 2}); });
    ExpectOpenFails(dir, {q + ".qweight", "has shape [128, 32]", "implies [128, 16]"});
  }
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t[q + ".scales"] = t[q + ".scales"].to(at::kInt); });
    ExpectOpenFails(dir, {q + ".scales", "is I32", "F16 or BF16 or F32"});
  }
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t[q + ".weight"] = at::ones({128, 128}); });
    ExpectOpenFails(dir, {q + ".weight", "says it is stored quantized"});
  }
  {
    const std::string dir = Copy("ct-pack");
    EditTensors(dir, [&](auto& t) { t.erase(q + ".weight_zero_point"); });
    ExpectOpenFails(dir, {q + ".weight_zero_point", "is missing"});
  }
  {
    const std::string dir = Copy("ct-int");
    EditTensors(dir, [&](auto& t) { t[q + ".weight"] = t[q + ".weight"].to(at::kFloat); });
    ExpectOpenFails(dir, {q + ".weight", "is F32", "I8"});
  }
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t["model.layers.0.self_attn.q_proj.qstray"] = at::ones({2}); });
    ExpectOpenFails(dir, {"q_proj.qstray", "is not part of"});
  }
}

TEST_F(PrequantizedErrorsTest, ValuesThatShapesCannotRejectAreCheckedAtRepack) {
  const std::string q = kQProj;
  {
    const std::string dir = Copy("ct-pack");
    EditTensors(dir, [&](auto& t) { t[q + ".weight_shape"] = at::tensor(std::vector<int64_t>{128, 64}); });
    ExpectRepackFails(dir, {q + ".weight_shape", "says [128, 64]", "implies [128, 128]"});
  }
  {
    // Inputs 0 and 32 swap groups without desc_act: refused (not silently served wrong).
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) {
      at::Tensor g = t[q + ".g_idx"].clone();
      g[0] = 1;
      g[32] = 0;
      t[q + ".g_idx"] = g;
    });
    ExpectRepackFails(dir, {q + ".g_idx", "input 0 is in group 1", "does not match", "desc_act is false"});
    fs::remove_all(dir);
  }
  {
    // The same swap with desc_act: activation order, served with the inputs regrouped (the
    // stable sort of g_idx: group 0 is inputs 1..32, group 1 is input 0 then 33..63).
    const std::string dir = Copy("gptq");
    EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
    EditTensors(dir, [&](auto& t) {
      at::Tensor g = t[q + ".g_idx"].clone();
      g[0] = 1;
      g[32] = 0;
      t[q + ".g_idx"] = g;
    });
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
    ASSERT_NE(source, nullptr);
    auto order = QuantizedInputOrder(**checkpoint, *source);
    ASSERT_TRUE(order.ok()) << order.status();
    ASSERT_TRUE(order->defined());
    std::vector<int64_t> expected;
    for (int64_t i = 1; i <= 32; ++i) expected.push_back(i);
    expected.push_back(0);
    for (int64_t i = 33; i < 128; ++i) expected.push_back(i);
    EXPECT_TRUE(order->to(at::kLong).equal(at::tensor(expected, at::kLong))) << *order;
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok());
    // k_proj keeps its inputs in group order: no order.
    auto k_order = QuantizedInputOrder(**checkpoint,
                                       *(*checkpoint)->QuantizedLinear(
                                           "model.layers.0.self_attn.k_proj.weight"));
    ASSERT_TRUE(k_order.ok()) << k_order.status();
    EXPECT_FALSE(k_order->defined());
    fs::remove_all(dir);
  }
  {
    // desc_act, but a group index that cannot be: groups must each hold group_size inputs,
    // and be among the weight's groups.
    struct Bad {
      int64_t input, group;
      std::vector<std::string> needles;
    };
    for (const Bad& bad : {Bad{0, 1, {"group 0 holds 31 inputs, not group_size 32"}},
                           Bad{5, 4, {"input 5 is in group 4, outside 0..3"}},
                           Bad{7, -1, {"input 7 is in group -1, outside 0..3"}}}) {
      const std::string dir = Copy("gptq");
      EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
      EditTensors(dir, [&](auto& t) {
        at::Tensor g = t[q + ".g_idx"].clone();
        g[bad.input] = static_cast<int32_t>(bad.group);
        t[q + ".g_idx"] = g;
      });
      auto checkpoint = Checkpoint::Open(dir);
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
      for (const auto& result : {QuantizedInputOrder(**checkpoint, *source),
                                 RepackQuantizedLinear(**checkpoint, *source)}) {
        ASSERT_FALSE(result.ok()) << "served g_idx with input " << bad.input << " in group " << bad.group;
        EXPECT_NE(std::string(result.status().message()).find(q + ".g_idx"), std::string::npos)
            << result.status();
        for (const std::string& needle : bad.needles) {
          EXPECT_NE(std::string(result.status().message()).find(needle), std::string::npos)
              << "missing \"" << needle << "\" in: " << result.status();
        }
      }
      fs::remove_all(dir);
    }
  }
  {
    // compressed-tensors actorder "weight" and "static" keep the groups in input order: served
    // as they are, with no weight_g_idx.
    for (const char* actorder : {"weight", "static"}) {
      const std::string dir = Copy("ct-pack");
      EditQuantization(dir, [&](nlohmann::json& c) {
        c["config_groups"]["group_0"]["weights"]["actorder"] = actorder;
      });
      auto checkpoint = Checkpoint::Open(dir);
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
      ASSERT_NE(source, nullptr);
      EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok());
      fs::remove_all(dir);
    }
  }
  {
    // desc_act with g_idx in group order (static groups) is served.
    const std::string dir = Copy("gptq");
    EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *(*checkpoint)->QuantizedLinear(q + ".weight")).ok());
  }
}

// g_idx is outside bytes: random ones (permutations of valid group orders, with some entries
// moved or out of range) either give an order that regroups the inputs exactly as g_idx says,
// or an error naming g_idx; which one is decided here independently, from the counts.
TEST_F(PrequantizedErrorsTest, RandomGroupIndicesAreServedExactlyOrRefused) {
  const std::string q = kQProj;
  const std::string dir = Copy("gptq");
  EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
  constexpr int64_t kIn = 128, kGroupSize = 32, kGroups = 4;
  std::mt19937 random(7);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int32_t> g(kIn);
    for (int64_t i = 0; i < kIn; ++i) g[static_cast<size_t>(i)] = static_cast<int32_t>(i / kGroupSize);
    std::shuffle(g.begin(), g.end(), random);
    const int changes = trial % 3;  // 0: a valid activation order
    for (int c = 0; c < changes; ++c) {
      g[random() % kIn] = static_cast<int32_t>(static_cast<int64_t>(random() % (kGroups + 3)) - 1);
    }
    bool valid = true;
    std::vector<int64_t> counts(kGroups, 0);
    for (int32_t v : g) {
      if (v < 0 || v >= kGroups) {
        valid = false;
      } else {
        ++counts[static_cast<size_t>(v)];
      }
    }
    for (int64_t n : counts) valid = valid && n == kGroupSize;
    EditTensors(dir, [&](auto& t) { t[q + ".g_idx"] = at::tensor(g, at::kInt); });
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
    ASSERT_NE(source, nullptr);
    auto order = QuantizedInputOrder(**checkpoint, *source);
    ASSERT_EQ(order.ok(), valid) << "trial " << trial << ": " << order.status();
    if (!order.ok()) {
      ++refused;
      EXPECT_NE(std::string(order.status().message()).find(q + ".g_idx"), std::string::npos)
          << order.status();
      EXPECT_FALSE(RepackQuantizedLinear(**checkpoint, *source).ok());
      continue;
    }
    ++served;
    ASSERT_TRUE(order->defined());  // a shuffle of 128 inputs is never the identity here
    const at::Tensor o = order->to(at::kLong);
    ASSERT_EQ(o.numel(), kIn);
    EXPECT_TRUE(std::get<0>(at::sort(o)).equal(at::arange(kIn, at::kLong))) << "not a permutation";
    for (int64_t j = 0; j < kIn; ++j) {
      const int64_t input = o[j].item<int64_t>();
      ASSERT_EQ(g[static_cast<size_t>(input)], j / kGroupSize) << "position " << j;
      if (j % kGroupSize != 0) {
        EXPECT_LT(o[j - 1].item<int64_t>(), input) << "a group keeps its inputs in stored order";
      }
    }
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok());
  }
  EXPECT_GT(served, 10);
  EXPECT_GT(refused, 10);
}

}  // namespace
}  // namespace placer::loader
