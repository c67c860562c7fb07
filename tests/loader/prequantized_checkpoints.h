// A good pre-quantized checkpoint per format, written once per suite by the independent Python
// packer (tests/model/prequantized_writer.py), and the helpers that break one thing in a copy.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "loader/dtype_torch.h"
#include "loader/prequantized_repack.h"
#include "loader/safetensors_writer.h"
#include "tests/loader/test_files.h"

namespace placer::loader {

inline constexpr char kQProj[] = "model.layers.0.self_attn.q_proj";

// One good checkpoint per format, written once for the whole suite.
class PrequantizedErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sources_ = new testing::TempDir();
    const std::string base = (*sources_) / "base";
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", base,
                                       " --arch llama --layers 1 --hidden 128 --heads 4 --kv-heads 2"
                                       " --intermediate 256 --vocab 300 --attention-bias --seed 5"
                                       " > /dev/null").c_str()),
              0);
    for (const auto& [name, args] : std::map<std::string, std::string>{
             {"gptq", "gptq 4 32"}, {"awq", "awq 4 32"}, {"ct-pack", "ct-pack 4 32"},
             {"ct-int", "ct-int 8 -1 --sym"}, {"gptq-file", "gptq 4 32 --quantize-config-file"}}) {
      ASSERT_EQ(std::system(absl::StrCat("/usr/bin/python3 ", PLACER_SOURCE_DIR,
                                         "/tests/model/prequantized_writer.py ", base, " ",
                                         (*sources_) / name, " ", (*sources_) / (name + "-ref"), " ",
                                         args).c_str()),
                0);
    }
  }
  static void TearDownTestSuite() { delete sources_; }

  // A copy of `format`'s good checkpoint to break.
  std::string Copy(const std::string& format) {
    const std::string dir = dir_ / format;
    std::filesystem::remove_all(dir);
    std::filesystem::copy((*sources_) / format, dir);
    return dir;
  }
  static void EditJson(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json json = nlohmann::json::parse(testing::ReadFileBytes(path));
    edit(json);
    testing::WriteFileBytes(path, json.dump());
  }
  static void EditQuantization(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    EditJson(dir + "/config.json", [&](nlohmann::json& config) { edit(config["quantization_config"]); });
  }
  // Rewrites model.safetensors; `edit` may replace tensors (by stored name) or erase them.
  static void EditTensors(const std::string& dir,
                          const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
    std::map<std::string, at::Tensor> tensors;
    {
      auto checkpoint = Checkpoint::Open(dir);
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      for (const auto& [name, info] : (*checkpoint)->tensors()) {
        tensors[info.stored_name] = (*checkpoint)->ReadTensor(name)->clone();
      }
    }
    edit(tensors);
    SafetensorsWriter writer(std::map<std::string, std::string>{{"format", "pt"}});
    for (auto& [name, tensor] : tensors) {
      tensor = tensor.contiguous();
      ASSERT_TRUE(writer.AddBytes(name, *FromScalarType(tensor.scalar_type()), tensor.sizes().vec(),
                                  absl::string_view(static_cast<const char*>(tensor.data_ptr()),
                                                    tensor.nbytes())).ok());
    }
    ASSERT_TRUE(writer.Write(dir + "/model.safetensors").ok());
  }
  static void ExpectOpenFails(const std::string& dir, std::initializer_list<std::string> needles) {
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_FALSE(checkpoint.ok()) << "opened a bad checkpoint in " << dir;
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(checkpoint.status().message()).find(needle), std::string::npos)
          << "missing \"" << needle << "\" in: " << checkpoint.status().message();
    }
  }
  // Opens, then repacks q_proj, which must fail naming every needle.
  static void ExpectRepackFails(const std::string& dir, std::initializer_list<std::string> needles) {
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(absl::StrCat(kQProj, ".weight"));
    ASSERT_NE(source, nullptr);
    auto packed = RepackQuantizedLinear(**checkpoint, *source);
    ASSERT_FALSE(packed.ok()) << "repacked a bad weight in " << dir;
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(packed.status().message()).find(needle), std::string::npos)
          << "missing \"" << needle << "\" in: " << packed.status().message();
    }
  }

  inline static testing::TempDir* sources_ = nullptr;
  testing::TempDir dir_;
};

}  // namespace placer::loader
