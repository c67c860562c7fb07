#include "loader/safetensors_header.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "loader/file_util.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
}

absl::Status BadTensor(absl::string_view file, absl::string_view tensor,
                       absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": tensor \"", tensor, "\": ", what));
}

// nlohmann keeps the last of two equal keys silently; a safetensors header
// with a duplicated tensor name is ambiguous, so it is refused.
absl::StatusOr<json> ParseRejectingDuplicateKeys(absl::string_view text,
                                                 absl::string_view file) {
  std::vector<std::set<std::string>> keys_per_depth;
  std::string duplicate;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event,
                                         json& parsed) {
    const auto d = static_cast<std::size_t>(depth);
    if (event == json::parse_event_t::object_start) {
      if (keys_per_depth.size() <= d + 1) keys_per_depth.resize(d + 2);
      keys_per_depth[d + 1].clear();
    } else if (event == json::parse_event_t::key && d == 1 &&
               duplicate.empty()) {
      if (keys_per_depth.size() <= d) keys_per_depth.resize(d + 1);
      const std::string key = parsed.get<std::string>();
      if (!keys_per_depth[d].insert(key).second) duplicate = key;
    }
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    return Bad(file, absl::StrCat("header is not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return Bad(file, absl::StrCat("header names tensor \"", duplicate,
                                  "\" twice"));
  }
  return parsed;
}

absl::StatusOr<std::uint64_t> ToU64(const json& value, absl::string_view file,
                                    absl::string_view tensor,
                                    absl::string_view field) {
  if (!value.is_number_integer()) {
    return BadTensor(file, tensor,
                     absl::StrCat(field, " must hold integers, got ",
                                  value.type_name()));
  }
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  const std::int64_t signed_value = value.get<std::int64_t>();
  if (signed_value < 0) {
    return BadTensor(file, tensor, absl::StrCat(field, " has a negative value"));
  }
  return static_cast<std::uint64_t>(signed_value);
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name,
                                            const json& spec,
                                            std::uint64_t data_start,
                                            std::uint64_t data_size,
                                            absl::string_view file) {
  if (name.empty()) return Bad(file, "header has a tensor with an empty name");
  if (!spec.is_object()) {
    return BadTensor(file, name, absl::StrCat("entry must be an object, got ",
                                              spec.type_name()));
  }
  for (const auto& [key, unused] : spec.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return BadTensor(file, name, absl::StrCat("unexpected field \"", key, "\""));
    }
  }
  SafetensorsEntry entry;
  entry.name = name;

  const auto dtype_it = spec.find("dtype");
  if (dtype_it == spec.end() || !dtype_it->is_string()) {
    return BadTensor(file, name, "\"dtype\" missing or not a string");
  }
  absl::StatusOr<DType> dtype = ParseDType(dtype_it->get<std::string>());
  if (!dtype.ok()) return BadTensor(file, name, dtype.status().message());
  entry.dtype = *dtype;

  const auto shape_it = spec.find("shape");
  if (shape_it == spec.end() || !shape_it->is_array()) {
    return BadTensor(file, name, "\"shape\" missing or not an array");
  }
  std::uint64_t elements = 1;
  for (const json& dim : *shape_it) {
    PLACER_ASSIGN_OR_RETURN(std::uint64_t size, ToU64(dim, file, name, "\"shape\""));
    if (size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return BadTensor(file, name, "a dimension of \"shape\" is too large");
    }
    if (size != 0 && elements > std::numeric_limits<std::uint64_t>::max() / size) {
      return BadTensor(file, name, "shape product overflows 64 bits");
    }
    elements *= size;
    entry.shape.push_back(static_cast<std::int64_t>(size));
  }
  entry.num_elements = elements;
  const std::uint64_t element_size = DTypeSize(entry.dtype);
  if (elements > std::numeric_limits<std::uint64_t>::max() / element_size) {
    return BadTensor(file, name, "shape x dtype size overflows 64 bits");
  }
  const std::uint64_t expected_bytes = elements * element_size;

  const auto offsets_it = spec.find("data_offsets");
  if (offsets_it == spec.end() || !offsets_it->is_array() ||
      offsets_it->size() != 2) {
    return BadTensor(file, name,
                     "\"data_offsets\" missing or not an array of two integers");
  }
  absl::StatusOr<std::uint64_t> begin =
      ToU64((*offsets_it)[0], file, name, "\"data_offsets\"");
  if (!begin.ok()) return begin.status();
  absl::StatusOr<std::uint64_t> end =
      ToU64((*offsets_it)[1], file, name, "\"data_offsets\"");
  if (!end.ok()) return end.status();
  if (*begin > *end) {
    return BadTensor(file, name,
                     absl::StrCat("data_offsets [", *begin, ", ", *end,
                                  "] end before they begin"));
  }
  if (*end > data_size) {
    return BadTensor(file, name,
                     absl::StrCat("data_offsets [", *begin, ", ", *end,
                                  "] run past the end of the data section (",
                                  data_size, " bytes; file truncated?)"));
  }
  if (*end - *begin != expected_bytes) {
    return BadTensor(file, name,
                     absl::StrCat("data_offsets span ", *end - *begin,
                                  " bytes but shape x dtype (", DTypeName(entry.dtype),
                                  ") needs ", expected_bytes));
  }
  entry.begin = data_start + *begin;
  entry.end = data_start + *end;
  return entry;
}

absl::Status CheckNoOverlap(const SafetensorsHeader& header, absl::string_view file) {
  std::vector<const SafetensorsEntry*> by_offset;
  by_offset.reserve(header.tensors.size());
  for (const auto& [name, entry] : header.tensors) by_offset.push_back(&entry);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
              return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
            });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry& previous = *by_offset[i - 1];
    const SafetensorsEntry& current = *by_offset[i];
    // Empty tensors occupy no bytes and cannot overlap anything.
    if (current.nbytes() == 0 || previous.nbytes() == 0) continue;
    if (current.begin < previous.end) {
      return Bad(file, absl::StrCat("tensors \"", previous.name, "\" and \"",
                                    current.name, "\" overlap in the data section"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::uint64_t> ParseSafetensorsHeaderLength(
    absl::string_view prefix, std::uint64_t file_size, absl::string_view file) {
  if (prefix.size() < 8 || file_size < 8) {
    return Bad(file, absl::StrCat("file is ", file_size,
                                  " bytes, too short for a safetensors header "
                                  "(truncated or not safetensors)"));
  }
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) {
    length = (length << 8) | static_cast<unsigned char>(prefix[static_cast<std::size_t>(i)]);
  }
  if (length > kMaxSafetensorsHeaderBytes) {
    return Bad(file, absl::StrCat("header length ", length, " bytes exceeds the ",
                                  kMaxSafetensorsHeaderBytes,
                                  "-byte limit (corrupt or not safetensors)"));
  }
  if (length > file_size - 8) {
    return Bad(file, absl::StrCat("header length ", length,
                                  " bytes runs past the end of the ", file_size,
                                  "-byte file (truncated?)"));
  }
  if (length < 2) return Bad(file, "header is empty");
  return length;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeaderJson(
    absl::string_view json_text, std::uint64_t file_size, absl::string_view file) {
  SafetensorsHeader header;
  header.header_json_bytes = json_text.size();
  header.data_start = 8 + json_text.size();
  header.file_size = file_size;
  header.header_fnv1a64 = Fnv1a64(json_text);
  if (header.data_start > file_size) {
    return Bad(file, "header runs past the end of the file");
  }
  const std::uint64_t data_size = file_size - header.data_start;

  PLACER_ASSIGN_OR_RETURN(json parsed, ParseRejectingDuplicateKeys(json_text, file));
  if (!parsed.is_object()) {
    return Bad(file, absl::StrCat("header must be a JSON object, got ",
                                  parsed.type_name()));
  }
  for (const auto& [key, value] : parsed.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Bad(file, "\"__metadata__\" must be an object");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return Bad(file, absl::StrCat("\"__metadata__\".\"", meta_key,
                                        "\" must be a string"));
        }
        header.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    PLACER_ASSIGN_OR_RETURN(SafetensorsEntry entry,
                            ParseEntry(key, value, header.data_start, data_size, file));
    header.tensors.emplace(key, std::move(entry));
  }
  PLACER_RETURN_IF_ERROR(CheckNoOverlap(header, file));
  return header;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsBuffer(absl::string_view bytes,
                                                         absl::string_view file) {
  PLACER_ASSIGN_OR_RETURN(std::uint64_t length,
                          ParseSafetensorsHeaderLength(bytes, bytes.size(), file));
  return ParseSafetensorsHeaderJson(bytes.substr(8, length), bytes.size(), file);
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  PLACER_ASSIGN_OR_RETURN(std::uint64_t file_size, FileSize(path));
  std::string prefix(8, '\0');
  in.read(prefix.data(), 8);
  prefix.resize(static_cast<std::size_t>(in.gcount()));
  PLACER_ASSIGN_OR_RETURN(std::uint64_t length,
                          ParseSafetensorsHeaderLength(prefix, file_size, path));
  std::string text(static_cast<std::size_t>(length), '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  if (static_cast<std::uint64_t>(in.gcount()) != length) {
    return absl::DataLossError(absl::StrCat(path, ": could not read the ", length,
                                            "-byte header (file shrank?)"));
  }
  return ParseSafetensorsHeaderJson(text, file_size, path);
}

}  // namespace placer::loader
