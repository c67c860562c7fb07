#include "loader/safetensors_header.h"

#include <string>

#include <gtest/gtest.h>

#include "loader/safetensors_writer.h"
#include "tests/loader/test_files.h"

namespace placer::loader {
namespace {

using testing::SafetensorsBytes;
using testing::TempDir;

// Parses `header` followed by `data_bytes` zero bytes; returns the status.
absl::Status ParseWithData(const std::string& header, std::size_t data_bytes) {
  return ParseSafetensorsBuffer(SafetensorsBytes(header, std::string(data_bytes, '\0')), "f.st")
      .status();
}

void ExpectError(const absl::Status& status, const std::string& needle) {
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find(needle), std::string::npos) << status.message();
  EXPECT_NE(std::string(status.message()).find("f.st"), std::string::npos) << status.message();
}

TEST(SafetensorsHeaderTest, WriterOutputParsesForEveryDtype) {
  TempDir dir;
  SafetensorsWriter writer(std::map<std::string, std::string>{{"format", "pt"}});
  const DType dtypes[] = {DType::kF64, DType::kF32, DType::kF16,  DType::kBF16,
                          DType::kI64, DType::kI32, DType::kI16,  DType::kI8,
                          DType::kU8,  DType::kBool, DType::kF8E4M3, DType::kF8E5M2};
  std::vector<std::string> payloads;
  payloads.reserve(std::size(dtypes));
  for (const DType dtype : dtypes) {
    payloads.push_back(std::string(6 * DTypeSize(dtype), '\x01'));
    ASSERT_TRUE(writer.AddBytes(std::string(DTypeName(dtype)), dtype, {2, 3}, payloads.back()).ok());
  }
  ASSERT_TRUE(writer.AddBytes("empty", DType::kF32, {0, 4}, "").ok());
  ASSERT_TRUE(writer.Write(dir / "all.safetensors").ok());

  absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(dir / "all.safetensors");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  EXPECT_EQ(header->data_start % 8, 0u);
  ASSERT_EQ(header->tensors.size(), std::size(dtypes) + 1);
  for (const DType dtype : dtypes) {
    const SafetensorsEntry& entry = header->tensors.at(std::string(DTypeName(dtype)));
    EXPECT_EQ(entry.dtype, dtype);
    EXPECT_EQ(entry.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(entry.nbytes(), 6 * DTypeSize(dtype));
  }
  EXPECT_EQ(header->tensors.at("empty").nbytes(), 0u);
}

TEST(SafetensorsHeaderTest, RefusesTooShortFile) {
  ExpectError(ParseSafetensorsBuffer("abc", "f.st").status(), "too short");
}

TEST(SafetensorsHeaderTest, RefusesHeaderLengthPastEndOfFile) {
  std::string bytes = SafetensorsBytes("{}", "");
  bytes[0] = 100;
  ExpectError(ParseSafetensorsBuffer(bytes, "f.st").status(), "past the end");
}

TEST(SafetensorsHeaderTest, RefusesHeaderLengthOverBound) {
  std::string bytes = SafetensorsBytes("{}", "");
  bytes[4] = 1;  // 4 GiB
  ExpectError(ParseSafetensorsBuffer(bytes, "f.st").status(), "limit");
}

TEST(SafetensorsHeaderTest, RefusesInvalidJson) {
  ExpectError(ParseWithData("{\"a\": [", 0), "not valid JSON");
  ExpectError(ParseWithData("[1, 2]", 0), "must be a JSON object");
}

TEST(SafetensorsHeaderTest, RefusesWrongTypesNamingTheTensor) {
  ExpectError(ParseWithData(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4),
              "tensor \"w\"");
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4),
              "\"shape\"");
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
              "negative");
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
              "integers");
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
              "data_offsets");
  ExpectError(ParseWithData(R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}})", 4),
              "unknown dtype");
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4),
              "unexpected field");
  ExpectError(ParseWithData(R"({"__metadata__": {"k": 1}})", 0), "__metadata__");
}

TEST(SafetensorsHeaderTest, RefusesOffsetsOutsideTheFile) {
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
              "past the end of the data section");
  ExpectError(ParseWithData(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8),
              "end before they begin");
}

TEST(SafetensorsHeaderTest, RefusesSizeNotMatchingShapeTimesDtype) {
  ExpectError(ParseWithData(R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8),
              "needs 6");
}

TEST(SafetensorsHeaderTest, RefusesOverflowingShape) {
  ExpectError(ParseWithData(
                  R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
                  8),
              "overflows");
  ExpectError(ParseWithData(
                  R"({"w": {"dtype": "F64", "shape": [3074457345618258603], "data_offsets": [0, 8]}})",
                  8),
              "overflows");
}

TEST(SafetensorsHeaderTest, RefusesOverlappingTensors) {
  ExpectError(ParseWithData(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                            12),
              "overlap");
}

TEST(SafetensorsHeaderTest, RefusesDuplicateTensorNames) {
  ExpectError(ParseWithData(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                            2),
              "twice");
}

TEST(SafetensorsHeaderTest, ReadingATruncatedFileNamesIt) {
  TempDir dir;
  SafetensorsWriter writer;
  const std::string payload(400, '\x02');
  ASSERT_TRUE(writer.AddBytes("w", DType::kF32, {100}, payload).ok());
  const std::string path = dir / "model.safetensors";
  ASSERT_TRUE(writer.Write(path).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(path);
  ASSERT_FALSE(header.ok());
  EXPECT_NE(std::string(header.status().message()).find(path), std::string::npos);
  EXPECT_NE(std::string(header.status().message()).find("truncated"), std::string::npos);

  absl::StatusOr<SafetensorsHeader> missing = ReadSafetensorsHeader(dir / "absent.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("absent.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace placer::loader
