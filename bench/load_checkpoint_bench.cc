// placer-bench-load: loads every tensor of a checkpoint into CPU tensors and
// prints one JSON object with the time it took, the bytes loaded and the peak
// resident set size. bench/load_vs_cat.sh runs it against `cat` of the same
// files; see bench/README.md.
//
//   placer-bench-load DIR [--mode clone|view|clone-thp]
//
// clone (default): Checkpoint::Open, then for every tensor the zero-copy view
//   is cloned into a fresh tensor (one copy out of the mapping): what a user
//   means by "loading the weights into RAM". All clones stay alive until the
//   end, so the peak RSS covers all of them.
// clone-thp: like clone, but each destination buffer is 2 MiB aligned and
//   madvise(MADV_HUGEPAGE)d before the copy (an experiment: where 4 KiB page
//   faults on fresh memory dominate, transparent huge pages remove most).
// view: the zero-copy views only, with one byte of every 4 KiB page read so
//   that every page is really mapped in; all views stay alive until the end.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "base/status_macros.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Fields of /proc/self/status in bytes (VmHWM, VmRSS, RssAnon, RssFile, ...).
std::map<std::string, std::int64_t> ProcStatus() {
  std::map<std::string, std::int64_t> fields;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key.rfind("Vm", 0) != 0 && key.rfind("Rss", 0) != 0) continue;
    std::string rest = line.substr(colon + 1);
    const std::size_t kb = rest.find(" kB");
    if (kb == std::string::npos) continue;
    rest = rest.substr(0, kb);
    std::int64_t value = 0;
    if (absl::SimpleAtoi(rest, &value)) fields[key] = value * 1024;
  }
  return fields;
}

struct Options {
  std::string dir;
  std::string mode = "clone";
};

absl::StatusOr<Options> ParseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mode" && i + 1 < argc) {
      options.mode = argv[++i];
    } else if (arg.rfind("--mode=", 0) == 0) {
      options.mode = arg.substr(7);
    } else if (arg == "-h" || arg == "--help") {
      return absl::InvalidArgumentError("usage: placer-bench-load DIR [--mode clone|view|clone-thp]");
    } else if (!arg.empty() && arg[0] != '-' && options.dir.empty()) {
      options.dir = arg;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg,
                       "'; usage: placer-bench-load DIR [--mode clone|view]"));
    }
  }
  if (options.dir.empty()) {
    return absl::InvalidArgumentError("usage: placer-bench-load DIR [--mode clone|view|clone-thp]");
  }
  if (options.mode != "clone" && options.mode != "view" && options.mode != "clone-thp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode must be clone, view or clone-thp, not '", options.mode, "'"));
  }
  return options;
}

// Reads one byte of every page of the tensor's bytes; returns their sum so
// the reads cannot be optimised away.
std::uint64_t TouchPages(const at::Tensor& tensor) {
  const auto* bytes = static_cast<const volatile unsigned char*>(tensor.data_ptr());
  const std::size_t size = tensor.numel() * tensor.element_size();
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t sum = 0;
  for (std::size_t offset = 0; offset < size; offset += page) sum += bytes[offset];
  if (size > 0) sum += bytes[size - 1];
  return sum;
}

// A copy of `view` in a fresh 2 MiB-aligned buffer advised as huge pages.
absl::StatusOr<at::Tensor> CloneHugePages(const at::Tensor& view) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t size = view.numel() * view.element_size();
  const std::size_t rounded = (size + kHuge - 1) / kHuge * kHuge;
  void* buffer = std::aligned_alloc(kHuge, rounded == 0 ? kHuge : rounded);
  if (buffer == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", rounded, " bytes"));
  }
  // Advice only: where THP is off the copy simply takes 4 KiB pages.
  (void)::madvise(buffer, rounded == 0 ? kHuge : rounded, MADV_HUGEPAGE);
  at::Tensor out = at::from_blob(
      buffer, view.sizes(), [](void* data) { std::free(data); },
      at::TensorOptions().dtype(view.scalar_type()).device(at::kCPU));
  out.copy_(view);
  return out;
}

absl::StatusOr<nlohmann::json> Run(const Options& options) {
  const std::map<std::string, std::int64_t> before = ProcStatus();
  const Clock::time_point start = Clock::now();
  PLACER_ASSIGN_OR_RETURN(std::shared_ptr<placer::loader::Checkpoint> opened,
                          placer::loader::Checkpoint::Open(options.dir));
  const std::shared_ptr<placer::loader::Checkpoint>& checkpoint = opened;
  const Clock::time_point headers_read = Clock::now();

  std::vector<at::Tensor> kept;
  kept.reserve(checkpoint->tensors().size());
  std::uint64_t bytes = 0;
  std::uint64_t touched = 0;
  try {
    for (const auto& [name, info] : checkpoint->tensors()) {
      PLACER_ASSIGN_OR_RETURN(at::Tensor view, checkpoint->ReadTensor(name));
      if (options.mode == "clone") {
        kept.push_back(view.clone());
      } else if (options.mode == "clone-thp") {
        PLACER_ASSIGN_OR_RETURN(at::Tensor copy, CloneHugePages(view));
        kept.push_back(std::move(copy));
      } else {
        touched += TouchPages(view);
        kept.push_back(std::move(view));
      }
      bytes += info.nbytes();
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("libtorch: ", error.what_without_backtrace()));
  }
  const Clock::time_point done = Clock::now();
  const std::map<std::string, std::int64_t> after = ProcStatus();

  auto field = [](const std::map<std::string, std::int64_t>& fields, const char* key) {
    const auto it = fields.find(key);
    return it == fields.end() ? std::int64_t{-1} : it->second;
  };
  nlohmann::json out = {
      {"dir", options.dir},
      {"mode", options.mode},
      {"tensors", kept.size()},
      {"shards", checkpoint->shards().size()},
      {"bytes", bytes},
      {"checkpoint_total_bytes", checkpoint->total_bytes()},
      {"open_seconds", Seconds(start, headers_read)},
      {"load_seconds", Seconds(start, done)},
      {"torch_threads", at::get_num_threads()},
      {"peak_rss_bytes", field(after, "VmHWM")},
      {"rss_before_bytes", field(before, "VmRSS")},
      {"rss_after_bytes", field(after, "VmRSS")},
      {"rss_anon_after_bytes", field(after, "RssAnon")},
      {"rss_file_after_bytes", field(after, "RssFile")},
      {"touch_checksum", touched},
  };
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Options> options = ParseArgs(argc, argv);
  if (!options.ok()) {
    std::cerr << "placer-bench-load: " << options.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<nlohmann::json> result = Run(*options);
  if (!result.ok()) {
    std::cerr << "placer-bench-load: " << result.status().message() << "\n";
    return 1;
  }
  std::cout << result->dump() << "\n";
  return 0;
}
