// `placer`: talk to a running placerd from a shell or a script.
// Exit codes: 0 success (health: SERVING), 1 NOT_SERVING, 2 unreachable or an error.
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>

#include "client/placer_client.h"

namespace {

constexpr int kUnreachableOrError = 2;

int Fail(const absl::Status& status) {
  std::cerr << "placer: " << status.message() << std::endl;
  return kUnreachableOrError;
}

std::string Bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(unit == 0 ? 0 : 1) << value << " " << units[unit];
  return out.str();
}

void PrintModelInfo(const placer::v1::ModelInfo& info) {
  std::cout << "state:        " << info.state() << "\n";
  if (!info.model_path().empty()) std::cout << "model:        " << info.model_path() << "\n";
  if (!info.error().empty()) std::cout << "error:        " << info.error() << "\n";
  if (!info.architecture().empty()) {
    std::cout << "architecture: " << info.architecture() << "\n"
              << "parameters:   " << info.parameter_count() << "\n"
              << "dtype:        " << info.dtype() << "\n";
  }
  std::cout << "server:       placerd " << info.server_version() << "\n";
  if (info.devices_size() > 0) {
    std::cout << "devices:\n";
    for (const auto& device : info.devices()) {
      std::cout << "  " << std::left << std::setw(8) << device.name()
                << " weights " << Bytes(device.weights_bytes()) << ", kv cache "
                << Bytes(device.kv_cache_bytes()) << ", reserved " << Bytes(device.reserved_bytes())
                << ", free " << Bytes(device.free_bytes()) << " of " << Bytes(device.total_bytes())
                << "\n";
    }
  }
  std::cout << std::flush;
}

}  // namespace

int main(int argc, char** argv) {
  placer::client::ClientOptions options;
  double timeout_seconds = 5;
  bool as_json = false;
  CLI::App app{"placer: command-line client for placerd"};
  app.option_defaults()->always_capture_default();
  app.add_option("--target", options.target, "placerd address (host:port)");
  app.add_option("--timeout", timeout_seconds, "seconds to wait for an answer")
      ->check(CLI::PositiveNumber);
  app.require_subcommand(1);
  CLI::App* health = app.add_subcommand(
      "health", "exit 0 when placerd is SERVING, 1 when NOT_SERVING, 2 when unreachable");
  CLI::App* info = app.add_subcommand("info", "show the served model and its devices");
  info->add_flag("--json", as_json, "print ModelInfo as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kUnreachableOrError;
  }
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  placer::client::PlacerClient client(options);

  if (health->parsed()) {
    auto status = client.CheckHealth();
    if (!status.ok()) return Fail(status.status());
    const bool serving = *status == placer::client::Health::kServing;
    std::cout << (serving ? "SERVING" : "NOT_SERVING") << std::endl;
    return serving ? 0 : 1;
  }
  auto model_info = client.GetModelInfo();
  if (!model_info.ok()) return Fail(model_info.status());
  if (as_json) {
    std::string json;
    google::protobuf::util::JsonPrintOptions print;
    print.add_whitespace = true;
    print.always_print_primitive_fields = true;
    print.preserve_proto_field_names = true;
    if (!google::protobuf::util::MessageToJsonString(*model_info, &json, print).ok()) {
      return Fail(absl::InternalError("cannot print ModelInfo as JSON"));
    }
    std::cout << json << std::flush;
  } else {
    PrintModelInfo(*model_info);
  }
  return 0;
}
