#include "placement/device.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace placer::placement {
namespace {

bool ParseOrdinal(absl::string_view text, int& ordinal) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return absl::SimpleAtoi(text, &ordinal) && ordinal >= 0 && ordinal < 4096;
}

}  // namespace

std::string Device::Name() const {
  switch (kind) {
    case DeviceKind::kCuda:
      return absl::StrCat("cuda:", index);
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kDisk:
      return "disk";
  }
  return "unknown";
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed == "cpu") return Device::Cpu();
  if (trimmed == "disk") return Device::Disk();
  int ordinal = 0;
  if (absl::StartsWith(trimmed, "cuda:") &&
      ParseOrdinal(trimmed.substr(5), ordinal)) {
    return Device::Cuda(ordinal);
  }
  if (ParseOrdinal(trimmed, ordinal)) return Device::Cuda(ordinal);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown device '", text, "': expected cuda:N, N (a GPU ordinal), cpu or disk"));
}

nlohmann::json DeviceToHfJson(const Device& device) {
  if (device.is_gpu()) return device.index;
  return device.Name();
}

absl::StatusOr<Device> DeviceFromHfJson(const nlohmann::json& value) {
  if (value.is_number_integer()) {
    const auto ordinal = value.get<std::int64_t>();
    if (ordinal < 0 || ordinal >= 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ordinal ", ordinal, " is out of range"));
    }
    return Device::Cuda(static_cast<int>(ordinal));
  }
  if (value.is_string()) return ParseDevice(value.get<std::string>());
  return absl::InvalidArgumentError(absl::StrCat(
      "device must be an integer GPU ordinal or a string (\"cpu\", \"disk\", "
      "\"cuda:N\"), got ", value.dump()));
}

}  // namespace placer::placement
