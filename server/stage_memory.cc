#include "server/stage_memory.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace placer::server {

using nlohmann::json;

std::string EncodeStageMemory(const runtime::RuntimeFigures& figures) {
  json devices = json::array();
  for (const runtime::DeviceUsage& usage : figures.devices) {
    json kinds = json::object();
    for (int kind = 0; kind < runtime::kMemoryKinds; ++kind) {
      kinds[runtime::MemoryKindName(static_cast<runtime::MemoryKind>(kind))] =
          usage.used_bytes[static_cast<size_t>(kind)];
    }
    devices.push_back({{"device", usage.device}, {"used_bytes", kinds}});
  }
  return devices.dump();
}

absl::StatusOr<std::vector<StageMemoryUse>> DecodeStageMemory(const std::string& text) {
  constexpr size_t kMaxDevices = 64, kMaxName = 64;
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("stage memory figures: ", why));
  };
  const json devices = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (devices.is_discarded() || !devices.is_array()) return bad("not a JSON array");
  if (devices.size() > kMaxDevices) return bad(absl::StrCat(devices.size(), " devices"));
  std::vector<StageMemoryUse> uses;
  for (size_t i = 0; i < devices.size(); ++i) {
    const json& entry = devices[i];
    if (!entry.is_object() || !entry.contains("device") || !entry["device"].is_string() ||
        entry["device"].get_ref<const std::string&>().empty() ||
        entry["device"].get_ref<const std::string&>().size() > kMaxName) {
      return bad(absl::StrCat("entry ", i, ": device must be a name of 1 to ", kMaxName,
                              " characters"));
    }
    const std::string& device = entry["device"].get_ref<const std::string&>();
    if (!entry.contains("used_bytes") || !entry["used_bytes"].is_object()) {
      return bad(absl::StrCat("entry ", i, " (", device, "): used_bytes must be an object"));
    }
    for (int kind = 0; kind < runtime::kMemoryKinds; ++kind) {
      const char* name = runtime::MemoryKindName(static_cast<runtime::MemoryKind>(kind));
      const json& used = entry["used_bytes"].value(name, json());
      if (!used.is_number_unsigned()) {
        return bad(absl::StrCat("entry ", i, " (", device, "): used_bytes.", name,
                                " must be a non-negative integer"));
      }
      uses.push_back({device, name, used.get<uint64_t>()});
    }
  }
  return uses;
}

std::string StageMemoryKey(int rank) { return absl::StrCat("rank/", rank, "/memory"); }

}  // namespace placer::server
