// `placer`: talk to a running placerd from a shell or a script.
// Exit codes: 0 success (health: SERVING), 1 NOT_SERVING, 2 unreachable or an error.
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <iostream>
#include <sstream>

#include "client/generate_command.h"
#include "client/placer_client.h"
#include "placement/byte_size.h"
#include "placement/plan_command.h"
#include "placement/plan_flags.h"
#include "placement/stage_plan.h"

namespace {

constexpr int kUnreachableOrError = 2;

int Fail(const absl::Status& status) {
  std::cerr << "placer: " << status.message() << std::endl;
  return kUnreachableOrError;
}

using placer::placement::FormatBytes;

void PrintModelInfo(const placer::v1::ModelInfo& info) {
  std::cout << "state:        " << info.state() << "\n";
  if (!info.model_path().empty()) std::cout << "model:        " << info.model_path() << "\n";
  if (!info.error().empty()) std::cout << "error:        " << info.error() << "\n";
  if (!info.architecture().empty()) {
    std::cout << "architecture: " << info.architecture() << "\n"
              << "parameters:   " << info.parameter_count() << "\n"
              << "dtype:        " << info.dtype() << "\n";
    if (!info.compute_dtype().empty()) std::cout << "compute:      " << info.compute_dtype() << "\n";
  }
  if (info.has_quantization()) {
    // The summary names its source ("--quantize int4 ...", "checkpoint GPTQ ...").
    std::cout << "quantized:    " << info.quantization().summary() << " (activations "
              << info.quantization().activations() << ")\n";
  }
  std::cout << "server:       placerd " << info.server_version() << "\n";
  if (info.devices_size() > 0) {
    std::cout << "devices:\n";
    for (const auto& device : info.devices()) {
      std::cout << "  " << std::left << std::setw(8) << device.name()
                << " weights " << FormatBytes(device.weights_bytes()) << ", kv cache "
                << FormatBytes(device.kv_cache_bytes()) << ", reserved "
                << FormatBytes(device.reserved_bytes()) << ", free at load "
                << FormatBytes(device.free_bytes()) << " of " << FormatBytes(device.total_bytes())
                << "\n";
    }
  }
  std::cout << std::flush;
}

// The last row of the logits as "token logit probability", most likely first.
void PrintTopCandidates(const placer::v1::Tensor& logits, int top) {
  const size_t vocab = static_cast<size_t>(logits.shape(logits.shape_size() - 1));
  std::vector<float> row(vocab);
  std::memcpy(row.data(), logits.data().data() + logits.data().size() - vocab * sizeof(float),
              vocab * sizeof(float));
  const float largest = *std::max_element(row.begin(), row.end());
  double normalizer = 0;
  for (float logit : row) normalizer += std::exp(static_cast<double>(logit - largest));
  std::vector<size_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  const size_t shown = std::min(vocab, static_cast<size_t>(top));
  std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                    [&](size_t a, size_t b) { return row[a] > row[b]; });
  std::cout << "token      logit  probability\n";
  for (size_t i = 0; i < shown; ++i) {
    const size_t token = order[i];
    std::cout << std::left << std::setw(8) << token << std::right << std::fixed
              << std::setprecision(4) << std::setw(9) << row[token] << std::setw(13)
              << std::exp(static_cast<double>(row[token] - largest)) / normalizer << "\n";
  }
  std::cout << std::flush;
}

// A token as a JSON-style quoted string, so spaces, "Ġ" and control characters are visible.
std::string Quoted(const std::string& token) {
  std::ostringstream out;
  out << '"';
  for (const char c : token) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c == '\n') {
      out << "\\n";
    } else if (c == '\t') {
      out << "\\t";
    } else if (byte < 0x20) {
      out << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int{byte} << std::dec;
    } else {
      out << c;
    }
  }
  out << '"';
  return out.str();
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
  placer::client::ClientCredentialFiles credential_files;
  app.add_option("--token-file", credential_files.token_file,
                 "file whose first line is the bearer token placerd expects")
      ->group("Access");
  app.add_flag("--tls", credential_files.tls, "connect with TLS, trusting the system's CAs")
      ->group("Access");
  app.add_option("--tls-ca", credential_files.ca,
                 "PEM CA to verify placerd's certificate with (implies --tls)")
      ->group("Access");
  app.add_option("--tls-cert", credential_files.cert,
                 "PEM client certificate, for a placerd with --tls-client-ca")
      ->group("Access");
  app.add_option("--tls-key", credential_files.key, "PEM private key of --tls-cert")
      ->group("Access");
  app.require_subcommand(1);
  placer::placement::PlanCommandArgs plan_args;
  CLI::App* plan = app.add_subcommand(
      "plan", "plan the device map of a checkpoint (or a hypothetical --module-tree) without "
              "reading any weight byte or contacting placerd");
  plan->add_option("checkpoint_dir", plan_args.checkpoint_dir, "Hugging Face checkpoint directory");
  plan->add_option("--module-tree", plan_args.module_tree_path,
                   "plan a hypothetical model from a module-tree JSON instead");
  placer::placement::AddPlacementFlags(*plan, plan_args.placement);
  std::string plan_nodes;
  plan->add_option("--nodes", plan_nodes,
                   "plan a pipeline group instead: a JSON array with one --devices string per "
                   "node, in rank order (each node's share planned over its devices)");
  plan->add_option("--dtype", plan_args.placement.dtype, "compute dtype (default: the checkpoint's)");
  plan->add_option("--format", plan_args.format, "output format")
      ->check(CLI::IsMember({"table", "json"}));
  CLI::App* health = app.add_subcommand(
      "health", "exit 0 when placerd is SERVING, 1 when NOT_SERVING, 2 when unreachable");
  CLI::App* info = app.add_subcommand("info", "show the served model and its devices");
  info->add_flag("--json", as_json, "print ModelInfo as JSON");
  std::vector<int32_t> forward_tokens;
  int top = 5;
  placer::client::GenerateArgs generate_args;
  CLI::App* generate = placer::client::AddGenerateCommand(app, generate_args);
  std::string tokenize_text;
  bool tokenize_special = false;
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "show the token ids and tokens the served model's tokenizer gives TEXT");
  tokenize->add_option("text", tokenize_text, "text to tokenize")->required();
  tokenize->add_flag("--add-special-tokens", tokenize_special,
                     "add the model's bos/template tokens, as a text prompt gets them");
  CLI::App* forward = app.add_subcommand(
      "forward", "run one forward pass on token ids; print the most likely next tokens");
  forward->add_option("token_ids", forward_tokens, "prompt token ids")->required();
  forward->add_option("--top", top, "how many candidates to print")->check(CLI::Range(1, 100));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kUnreachableOrError;
  }
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  if (!plan->parsed()) {
    auto credentials = placer::client::LoadClientCredentials(credential_files);
    if (!credentials.ok()) return Fail(credentials.status());
    options.credentials = *std::move(credentials);
  }
  placer::client::PlacerClient client(options);

  if (health->parsed()) {
    auto status = client.CheckHealth();
    if (!status.ok()) return Fail(status.status());
    const bool serving = *status == placer::client::Health::kServing;
    std::cout << (serving ? "SERVING" : "NOT_SERVING") << std::endl;
    return serving ? 0 : 1;
  }
  if (plan->parsed()) {
    if (plan_args.checkpoint_dir.empty() == plan_args.module_tree_path.empty()) {
      return Fail(absl::InvalidArgumentError(
          "plan: give exactly one of CHECKPOINT_DIR and --module-tree TREE.json"));
    }
    const absl::Status planned =
        plan_nodes.empty()
            ? placer::placement::RunPlanCommand(plan_args, std::cout)
            : placer::placement::RunGroupPlanCommand(plan_args, plan_nodes, std::cout);
    return planned.ok() ? 0 : Fail(planned);
  }
  if (generate->parsed()) return placer::client::RunGenerate(client, generate_args);
  if (tokenize->parsed()) {
    placer::v1::TokenizeRequest request;
    request.set_text(tokenize_text);
    request.set_add_special_tokens(tokenize_special);
    auto response = client.Tokenize(request);
    if (!response.ok()) return Fail(response.status());
    for (int i = 0; i < response->token_ids_size(); ++i) {
      std::cout << response->token_ids(i) << "\t" << Quoted(response->tokens(i)) << "\n";
    }
    std::cout << std::flush;
    return 0;
  }
  if (forward->parsed()) {
    placer::v1::ForwardRequest request;
    for (int32_t token : forward_tokens) request.add_token_ids(token);
    auto response = client.Forward(request);
    if (!response.ok()) return Fail(response.status());
    PrintTopCandidates(response->logits(), top);
    return 0;
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
