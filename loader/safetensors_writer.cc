#include "loader/safetensors_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace placer::loader {

SafetensorsWriter::SafetensorsWriter(std::map<std::string, std::string> metadata)
    : metadata_(std::move(metadata)) {}

absl::Status SafetensorsWriter::Add(std::string name, DType dtype,
                                    std::vector<std::int64_t> shape, FillFn fill) {
  if (name.empty() || name == "__metadata__") {
    return absl::InvalidArgumentError(absl::StrCat("invalid tensor name \"", name, "\""));
  }
  if (index_by_name_.count(name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("tensor \"", name, "\" added twice"));
  }
  std::uint64_t nbytes = DTypeSize(dtype);
  for (const std::int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\": negative dimension"));
    }
    const auto udim = static_cast<std::uint64_t>(dim);
    if (udim != 0 && nbytes > std::numeric_limits<std::uint64_t>::max() / udim) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\": size overflows 64 bits"));
    }
    nbytes *= udim;
  }
  index_by_name_[name] = tensors_.size();
  tensors_.push_back(
      Pending{std::move(name), dtype, std::move(shape), nbytes, data_bytes_, std::move(fill)});
  data_bytes_ += nbytes;
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::AddBytes(std::string name, DType dtype,
                                         std::vector<std::int64_t> shape,
                                         absl::string_view bytes) {
  const std::string label = name;
  return Add(std::move(name), dtype, std::move(shape),
             [bytes, label](std::uint8_t* destination, std::size_t nbytes) {
               if (bytes.size() != nbytes) {
                 return absl::InvalidArgumentError(
                     absl::StrCat("tensor \"", label, "\": ", bytes.size(),
                                  " bytes given, shape x dtype needs ", nbytes));
               }
               if (nbytes != 0) std::memcpy(destination, bytes.data(), nbytes);
               return absl::OkStatus();
             });
}

std::string SafetensorsWriter::HeaderJson() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata_) metadata[key] = value;
    header["__metadata__"] = metadata;
  }
  for (const Pending& tensor : tensors_) {
    header[tensor.name] = {{"dtype", std::string(DTypeName(tensor.dtype))},
                           {"shape", tensor.shape},
                           {"data_offsets", {tensor.offset, tensor.offset + tensor.nbytes}}};
  }
  std::string text = header.dump();
  // The reference writer pads so the data section starts 8-byte aligned,
  // which lets readers map tensors without copying to realign them.
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  return text;
}

absl::Status SafetensorsWriter::Write(const std::string& path) const {
  const std::string temporary = path + ".tmp";
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::UnavailableError(
        absl::StrCat(temporary, ": cannot create: ", std::strerror(errno)));
  }
  const std::string header = HeaderJson();
  std::uint64_t length = header.size();
  char prefix[8];
  for (int i = 0; i < 8; ++i) {
    prefix[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  }
  out.write(prefix, 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<std::uint8_t> buffer;
  for (const Pending& tensor : tensors_) {
    buffer.assign(static_cast<std::size_t>(tensor.nbytes), 0);
    if (absl::Status status = tensor.fill(buffer.data(), buffer.size()); !status.ok()) {
      out.close();
      std::remove(temporary.c_str());
      return status;
    }
    out.write(reinterpret_cast<const char*>(buffer.data()),
              static_cast<std::streamsize>(buffer.size()));
  }
  out.flush();
  if (!out) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat(temporary, ": write failed"));
  }
  out.close();
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot rename into place: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace placer::loader
