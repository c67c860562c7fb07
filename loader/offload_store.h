// The disk offload store (--offload-dir). Tensors a plan puts on `disk` are
// served from mmapped files: straight from the checkpoint's own shards when
// their stored dtype is the one wanted, otherwise from a safetensors file in
// the offload dir holding converted copies. That file is written once, with a
// manifest tying it to the source shards (size, mtime, header checksum); a
// later Open reuses it, and a stale or corrupt store is rebuilt.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "loader/checkpoint.h"
#include "loader/safetensors_file.h"

namespace placer::loader {

// Tensors kept in the store packed (--quantize, loader/quantized_weight.h) rather than
// converted: made once by `pack` and reused while the sources and the scheme stay the same.
struct PackedOffload {
  std::string scheme;  // DescribeQuantizeOptions: in the manifest, so another scheme rebuilds
  struct Tensor {
    std::string name;
    DType dtype = DType::kU8;  // I8 (8 bits) or U8 (4 bits)
    std::vector<std::int64_t> shape;  // [out, groups, block bytes]
  };
  std::vector<Tensor> tensors;
  std::function<absl::StatusOr<at::Tensor>(const std::string& name)> pack;
};

class OffloadStore {
 public:
  static constexpr absl::string_view kManifestName = "placer-offload-manifest.json";
  static constexpr absl::string_view kStoreName = "placer-offload.safetensors";

  // Prepares `dir` (created if missing) to serve `names` in `dtype`, and `packed`'s tensors
  // packed.
  static absl::StatusOr<std::shared_ptr<OffloadStore>> Open(
      std::shared_ptr<const Checkpoint> checkpoint, const std::string& dir,
      const std::vector<std::string>& names, at::ScalarType dtype,
      const PackedOffload& packed = {});

  // A CPU tensor in the store's dtype (a packed one as packed), a zero-copy view over a mapping.
  absl::StatusOr<at::Tensor> Read(absl::string_view name) const;

  // True when an existing store was valid and reused without writing.
  bool reused() const { return reused_; }
  // Why the store was (re)built; empty when reused or nothing to convert.
  const std::string& rebuild_reason() const { return rebuild_reason_; }
  // Tensors served from the converted file rather than the checkpoint.
  const std::set<std::string>& converted() const { return converted_; }

 private:
  OffloadStore() = default;
  absl::Status Build(const std::string& manifest_path, const std::string& store_path);
  std::string CheckReusable(const std::string& manifest_path, const std::string& store_path) const;

  std::shared_ptr<const Checkpoint> checkpoint_;
  std::string dir_;
  at::ScalarType dtype_ = at::kFloat;
  std::set<std::string> direct_;
  std::set<std::string> converted_;  // packed ones included
  std::map<std::string, PackedOffload::Tensor> packed_;
  std::string packed_scheme_;
  std::function<absl::StatusOr<at::Tensor>(const std::string& name)> pack_;
  std::shared_ptr<SafetensorsFile> store_file_;
  bool reused_ = false;
  std::string rebuild_reason_;
};

}  // namespace placer::loader
