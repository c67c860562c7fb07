#include "loader/offload_store.h"

#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/file_util.h"
#include "loader/safetensors_header.h"
#include "loader/safetensors_writer.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

constexpr int kManifestVersion = 1;

nlohmann::json SourcesJson(const Checkpoint& checkpoint) {
  nlohmann::json sources = nlohmann::json::array();
  for (const ShardInfo& shard : checkpoint.shards()) {
    sources.push_back({{"path", shard.path},
                       {"size", shard.file_size},
                       {"mtime_ns", shard.mtime_ns},
                       {"header_fnv1a64", shard.header_fnv1a64}});
  }
  return sources;
}

}  // namespace

absl::StatusOr<std::shared_ptr<OffloadStore>> OffloadStore::Open(
    std::shared_ptr<const Checkpoint> checkpoint, const std::string& dir,
    const std::vector<std::string>& names, at::ScalarType dtype, const PackedOffload& packed) {
  PLACER_ASSIGN_OR_RETURN(DType wanted, FromScalarType(dtype));
  std::shared_ptr<OffloadStore> store(new OffloadStore());
  store->checkpoint_ = std::move(checkpoint);
  store->dir_ = dir;
  store->dtype_ = dtype;
  for (const std::string& name : names) {
    const TensorInfo* info = store->checkpoint_->Find(name);
    if (info == nullptr) {
      return absl::NotFoundError(absl::StrCat(store->checkpoint_->dir(), ": no tensor \"",
                                              name, "\" to offload"));
    }
    (info->dtype == wanted ? store->direct_ : store->converted_).insert(name);
  }
  for (const PackedOffload::Tensor& tensor : packed.tensors) {
    if (!store->checkpoint_->HasSlot(tensor.name)) {
      return absl::NotFoundError(absl::StrCat(store->checkpoint_->dir(), ": no tensor \"",
                                              tensor.name, "\" to offload packed"));
    }
    store->direct_.erase(tensor.name);
    store->converted_.insert(tensor.name);
    store->packed_[tensor.name] = tensor;
  }
  store->packed_scheme_ = packed.scheme;
  store->pack_ = packed.pack;
  if (store->converted_.empty()) return store;

  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot create offload dir: ",
                                               error.message()));
  }
  const std::string manifest_path = absl::StrCat(dir, "/", kManifestName);
  const std::string store_path = absl::StrCat(dir, "/", kStoreName);
  store->rebuild_reason_ = store->CheckReusable(manifest_path, store_path);
  if (store->rebuild_reason_.empty()) {
    store->reused_ = true;
  } else if (absl::Status status = store->Build(manifest_path, store_path); !status.ok()) {
    return status;
  }
  PLACER_ASSIGN_OR_RETURN(std::shared_ptr<SafetensorsFile> file, SafetensorsFile::Open(store_path));
  store->store_file_ = std::move(file);
  return store;
}

// Returns why the store on disk cannot be reused, or "" when it can.
std::string OffloadStore::CheckReusable(const std::string& manifest_path,
                                        const std::string& store_path) const {
  absl::StatusOr<std::string> text = ReadSmallFile(manifest_path);
  if (!text.ok()) return absl::StrCat("no usable manifest (", text.status().message(), ")");
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(*text);
    if (manifest.value("version", 0) != kManifestVersion) return "manifest version differs";
    if (manifest.value("dtype", "") != std::string(DTypeName(*FromScalarType(dtype_)))) {
      return "manifest dtype differs";
    }
    if (manifest.value("quantize", "") != packed_scheme_) return "manifest quantization differs";
    if (manifest.at("sources") != SourcesJson(*checkpoint_)) {
      return "source checkpoint changed since the store was written";
    }
    if (manifest.at("tensors").get<std::set<std::string>>() != converted_) {
      return "the set of offloaded tensors changed";
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::StrCat("manifest is corrupt (", e.what(), ")");
  }
  absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(store_path);
  if (!header.ok()) return absl::StrCat("store is corrupt (", header.status().message(), ")");
  try {
    if (manifest.at("store_size").get<std::uint64_t>() != header->file_size ||
        manifest.at("store_header_fnv1a64").get<std::uint64_t>() != header->header_fnv1a64) {
      return "store file does not match its manifest";
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::StrCat("manifest is corrupt (", e.what(), ")");
  }
  const DType wanted = *FromScalarType(dtype_);
  for (const std::string& name : converted_) {
    const auto it = header->tensors.find(name);
    const auto packed = packed_.find(name);
    const bool is_packed = packed != packed_.end();
    if (it == header->tensors.end() ||
        it->second.dtype != (is_packed ? packed->second.dtype : wanted) ||
        it->second.shape != (is_packed ? packed->second.shape : checkpoint_->Find(name)->shape)) {
      return absl::StrCat("store lacks tensor \"", name, "\" as needed");
    }
  }
  return "";
}

absl::Status OffloadStore::Build(const std::string& manifest_path,
                                 const std::string& store_path) {
  // Without a manifest a half-rebuilt store can never be taken for valid.
  std::filesystem::remove(manifest_path);
  const DType wanted = *FromScalarType(dtype_);
  SafetensorsWriter writer({{"format", "pt"}, {"placer", "offload store"}});
  for (const std::string& name : converted_) {
    const TensorInfo* info = checkpoint_->Find(name);
    if (const auto packed = packed_.find(name); packed != packed_.end()) {
      const auto pack = pack_;
      PLACER_RETURN_IF_ERROR(writer.Add(
          name, packed->second.dtype, packed->second.shape,
          [pack, name](std::uint8_t* destination, std::size_t nbytes) {
            PLACER_ASSIGN_OR_RETURN(at::Tensor tensor, pack(name));
            if (static_cast<std::size_t>(tensor.nbytes()) != nbytes || !tensor.is_contiguous()) {
              return absl::InternalError(absl::StrCat("packed offload of \"", name, "\": size mismatch"));
            }
            std::memcpy(destination, tensor.data_ptr(), nbytes);
            return absl::OkStatus();
          }));
      continue;
    }
    std::shared_ptr<const Checkpoint> checkpoint = checkpoint_;
    const at::ScalarType dtype = dtype_;
    absl::Status added = writer.Add(
        name, wanted, info->shape,
        [checkpoint, name, dtype](std::uint8_t* destination, std::size_t nbytes) {
          PLACER_ASSIGN_OR_RETURN(at::Tensor tensor, checkpoint->ReadTensor(name, dtype, at::kCPU));
          const at::Tensor contiguous = tensor.contiguous();
          if (static_cast<std::size_t>(contiguous.nbytes()) != nbytes) {
            return absl::InternalError(absl::StrCat("offload of \"", name, "\": size mismatch"));
          }
          if (nbytes != 0) std::memcpy(destination, contiguous.data_ptr(), nbytes);
          return absl::OkStatus();
        });
    if (!added.ok()) return added;
  }
  PLACER_RETURN_IF_ERROR(writer.Write(store_path));
  PLACER_ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(store_path));
  nlohmann::json manifest = {
      {"version", kManifestVersion},
      {"dtype", std::string(DTypeName(wanted))},
      {"checkpoint_dir", checkpoint_->dir()},
      {"sources", SourcesJson(*checkpoint_)},
      {"tensors", converted_},
      {"quantize", packed_scheme_},
      {"store_size", header.file_size},
      {"store_header_fnv1a64", header.header_fnv1a64}};
  return WriteFileAtomically(manifest_path, manifest.dump(2) + "\n");
}

absl::StatusOr<at::Tensor> OffloadStore::Read(absl::string_view name) const {
  const std::string key(name);
  if (direct_.count(key) != 0) return checkpoint_->ReadTensor(name, dtype_, at::kCPU);
  if (converted_.count(key) == 0) {
    return absl::NotFoundError(absl::StrCat(dir_, ": tensor \"", name, "\" is not offloaded"));
  }
  if (const auto packed = packed_.find(key); packed != packed_.end()) {
    PLACER_ASSIGN_OR_RETURN(at::ScalarType type, ToScalarType(packed->second.dtype));
    return store_file_->Read(name, type, at::kCPU);
  }
  return store_file_->Read(name, dtype_, at::kCPU);
}

}  // namespace placer::loader
