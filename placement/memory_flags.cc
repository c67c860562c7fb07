#include "placement/memory_flags.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "placement/byte_size.h"
#include "base/status_macros.h"

namespace placer::placement {
namespace {

struct Entry {
  std::string text;
  Device device;
  std::uint64_t bytes = 0;
};

// Splits "a=1,b=2" into parsed entries; `flag` names the flag in errors.
absl::StatusOr<std::vector<Entry>> ParseEntries(absl::string_view text,
                                                absl::string_view flag) {
  std::vector<Entry> entries;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": empty; expected DEVICE=SIZE[,DEVICE=SIZE...]"));
  }
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    auto error = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " entry '", item, "': ", why));
    };
    if (item.empty()) return error("empty entry (stray comma?)");
    const std::size_t eq = item.find('=');
    if (eq == absl::string_view::npos) return error("expected DEVICE=SIZE");
    absl::StatusOr<Device> device = ParseDevice(item.substr(0, eq));
    if (!device.ok()) return error(device.status().message());
    absl::StatusOr<std::uint64_t> bytes = ParseByteSize(item.substr(eq + 1));
    if (!bytes.ok()) return error(bytes.status().message());
    for (const Entry& earlier : entries) {
      if (earlier.device == *device) {
        return error(absl::StrCat(device->Name(), " already given by '",
                                  earlier.text, "'"));
      }
    }
    entries.push_back({std::string(item), *device, *bytes});
  }
  return entries;
}

}  // namespace

absl::StatusOr<std::map<Device, std::uint64_t>> ParseMaxMemory(absl::string_view text) {
  PLACER_ASSIGN_OR_RETURN(std::vector<Entry> entries, ParseEntries(text, "--max-memory"));
  std::map<Device, std::uint64_t> limits;
  for (const Entry& entry : entries) limits[entry.device] = entry.bytes;
  return limits;
}

absl::StatusOr<VirtualDevices> ParseVirtualDevices(absl::string_view text) {
  PLACER_ASSIGN_OR_RETURN(std::vector<Entry> entries, ParseEntries(text, "--devices"));
  VirtualDevices out;
  std::map<int, std::uint64_t> gpus;
  for (const Entry& entry : entries) {
    auto error = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("--devices entry '", entry.text, "': ", why));
    };
    const absl::string_view device_text =
        absl::StripAsciiWhitespace(absl::string_view(entry.text).substr(0, entry.text.find('=')));
    switch (entry.device.kind) {
      case DeviceKind::kCuda:
        if (!absl::StartsWith(device_text, "cuda:")) {
          return error("write virtual GPUs as cuda:N");
        }
        if (entry.bytes == 0) return error("a virtual GPU needs a non-zero size");
        gpus[entry.device.index] = entry.bytes;
        break;
      case DeviceKind::kCpu:
        out.cpu_bytes = entry.bytes;
        break;
      case DeviceKind::kDisk:
        out.disk_bytes = entry.bytes;
        break;
    }
  }
  int expected = 0;
  for (const auto& [ordinal, bytes] : gpus) {
    if (ordinal != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: cuda:", ordinal, " given without cuda:", expected,
          "; virtual GPUs are numbered from 0 without gaps"));
    }
    out.gpu_bytes.push_back(bytes);
    ++expected;
  }
  return out;
}

}  // namespace placer::placement
