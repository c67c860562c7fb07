// placerd's metrics on a model spread over virtual GPUs, CPU and disk, read from a real
// scrape: every device of the plan has its memory by kind, KV blocks and totals; Generate
// records time to first token, inter-token latency, tokens and sequences; `promtool check
// metrics` accepts the output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "client/placer_client.h"
#include "placement/cuda_probe.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"
#include "tests/e2e/spread_model.h"

namespace placer::testing {
namespace {

using std::chrono::seconds;

Exposition Scrape(int metrics_port) {
  const std::optional<std::string> body = HttpGet(metrics_port, "/metrics");
  EXPECT_TRUE(body.has_value());
  std::string error;
  std::optional<Exposition> parsed = ParseExposition(body.value_or(""), &error);
  EXPECT_TRUE(parsed.has_value()) << error;
  return parsed.value_or(Exposition{});
}

class DeviceMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(model_.ok()) << model_.error();
    daemon_ = std::make_unique<DaemonProcess>(DaemonArgs(ports_, model_.DaemonFlags()));
    ASSERT_TRUE(WaitServing(ports_, seconds(60))) << daemon_->Log();
  }

  SpreadModel model_{"metrics"};
  StartedDaemon ports_ = PickPorts();
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DeviceMetrics, EveryDeviceOfThePlanHasMemoryByKindBlocksAndTotals) {
  client::PlacerClient client({ports_.target(), seconds(5)});
  const auto info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  std::vector<std::string> devices;
  for (const v1::DeviceInfo& device : info->devices()) devices.push_back(device.name());
  ASSERT_EQ(devices, SpreadModel::Devices());

  const Exposition scrape = Scrape(ports_.metrics_port);
  std::set<std::string> scraped_devices;
  for (const Sample& sample : scrape.Find("placer_device_memory_total_bytes")) {
    scraped_devices.insert(sample.labels.at("device"));
  }
  EXPECT_EQ(scraped_devices, std::set<std::string>(devices.begin(), devices.end()));

  for (const v1::DeviceInfo& device : info->devices()) {
    SCOPED_TRACE(device.name());
    const std::map<std::string, std::string> on_device = {{"device", device.name()}};
    EXPECT_EQ(scrape.Value("placer_device_memory_total_bytes", on_device),
              static_cast<double>(device.total_bytes()));
    EXPECT_EQ(scrape.Value("placer_device_memory_used_bytes",
                           {{"device", device.name()}, {"kind", "weights"}}),
              static_cast<double>(device.weights_bytes()));
    EXPECT_GT(device.weights_bytes(), 0u) << "the model should use every device";
    double held = 0;
    for (const char* kind : {"weights", "kv_cache", "staging"}) {
      const auto used =
          scrape.Value("placer_device_memory_used_bytes", {{"device", device.name()}, {"kind", kind}});
      ASSERT_TRUE(used.has_value()) << kind;
      held += *used;
    }
    // No kind that would always read 0: a block's intermediates are not counted at run time.
    EXPECT_FALSE(scrape.Value("placer_device_memory_used_bytes",
                              {{"device", device.name()}, {"kind", "activations"}})
                     .has_value());
    // Virtual devices have no other user: what is free is what placer does not hold.
    EXPECT_EQ(scrape.Value("placer_device_memory_free_bytes", on_device),
              static_cast<double>(device.total_bytes()) - held);
    for (const char* state : {"used", "free"}) {
      EXPECT_TRUE(scrape.Value("placer_device_kv_cache_blocks",
                               {{"device", device.name()}, {"state", state}})
                      .has_value())
          << state;
    }
  }

  EXPECT_EQ(scrape.Value("placer_model_info", {{"architecture", "LlamaForCausalLM"}, {"dtype", "F32"}}),
            1);
  const auto load_seconds = scrape.Value("placer_model_load_seconds");
  ASSERT_TRUE(load_seconds.has_value());
  EXPECT_GT(*load_seconds, 0);
  EXPECT_LT(*load_seconds, 60);
  EXPECT_EQ(scrape.Value("placer_offload_wait_seconds_total"), 0);
  EXPECT_EQ(scrape.types.at("placer_offload_transferred_bytes_total"), "counter");
  EXPECT_EQ(scrape.Value("placer_queue_depth"), 0);
  EXPECT_EQ(scrape.Value("placer_running_sequences"), 0);

  // Triton's names only for real CUDA devices, one series per GPU.
  const auto gpus = placement::ReadCudaGpuMemory();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(scrape.Find("nv_gpu_memory_total_bytes").size(), gpus->size());
  EXPECT_EQ(scrape.Find("nv_gpu_memory_used_bytes").size(), gpus->size());
}

TEST_F(DeviceMetrics, GenerateRecordsTokensLatenciesAndDuration) {
  client::PlacerClient client({ports_.target(), seconds(30)});
  v1::GenerateRequest request;
  for (int32_t id : {1, 17, 300}) request.add_prompt_token_ids(id);
  request.mutable_params()->set_max_new_tokens(6);
  request.mutable_params()->set_ignore_eos(true);
  uint32_t generated = 0;
  const absl::Status status = client.Generate(request, [&](const v1::GenerateResponse& response) {
    generated += response.token_ids_size();
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(generated, 6u);

  // The stream's last token reaches the client while the engine thread may still be reporting
  // that step (batch size, running sequences, set together): scrape once it has.
  EXPECT_TRUE(WaitUntil(
      [&] { return Scrape(ports_.metrics_port).Value("placer_running_sequences") == 0; },
      seconds(10)));
  const Exposition scrape = Scrape(ports_.metrics_port);
  EXPECT_EQ(scrape.Value("placer_prompt_tokens_total"), 3);
  EXPECT_EQ(scrape.Value("placer_generated_tokens_total"), 6);
  EXPECT_EQ(scrape.Value("placer_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(scrape.Value("placer_inter_token_latency_seconds_count"), 5);
  EXPECT_GT(scrape.Value("placer_inter_token_latency_seconds_sum").value_or(0), 0);
  EXPECT_EQ(scrape.Value("placer_batch_size_count"), 6);
  EXPECT_EQ(scrape.Value("placer_batch_size_sum"), 6);  // one sequence a step: no batching yet
  EXPECT_EQ(scrape.Value("placer_request_duration_seconds_count", {{"rpc", "Generate"}}), 1);
  EXPECT_EQ(scrape.Value("placer_request_duration_seconds_bucket", {{"rpc", "Generate"}, {"le", "+Inf"}}),
            1);
  // The whole stream took at least as long as its first token.
  EXPECT_GE(scrape.Value("placer_request_duration_seconds_sum", {{"rpc", "Generate"}}).value_or(0),
            scrape.Value("placer_time_to_first_token_seconds_sum").value_or(1));
  EXPECT_EQ(scrape.Value("placer_requests_total", {{"rpc", "Generate"}, {"code", "OK"}}), 1);
  EXPECT_EQ(scrape.Value("placer_running_sequences"), 0);
}

TEST(RequestMetrics, RunningSequencesCountsOpenStreams) {
  SpreadModel model("running");
  ASSERT_TRUE(model.ok()) << model.error();
  const StartedDaemon ports = PickPorts();
  // Unspread, with the model's full context: a 500-token stream runs long enough to be seen.
  DaemonProcess daemon(DaemonArgs(ports, {"--model", model.dir()}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(60)});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(60));
  v1::GenerateRequest request;
  request.add_prompt_token_ids(1);
  request.mutable_params()->set_max_new_tokens(500);
  request.mutable_params()->set_ignore_eos(true);
  auto reader = client.placer_stub().Generate(&context, request);
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  const Exposition during = Scrape(ports.metrics_port);
  // Fewer tokens than asked for at the scrape: the stream was still running then.
  ASSERT_LT(during.Value("placer_generated_tokens_total").value_or(500), 500);
  EXPECT_EQ(during.Value("placer_running_sequences"), 1);
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitUntil(
      [&] { return Scrape(ports.metrics_port).Value("placer_running_sequences") == 0; },
      seconds(10)));
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Scrape(ports.metrics_port)
                   .Value("placer_requests_total", {{"rpc", "Generate"}, {"code", "CANCELLED"}}) == 1;
      },
      seconds(10)));
  // The stream's forward passes ran every block: each has compute time.
  const Exposition after = Scrape(ports.metrics_port);
  EXPECT_EQ(after.types.at("placer_block_compute_seconds_total"), "counter");
  for (const char* block : {"model.embed_tokens", "model.layers.0", "model.norm", "lm_head"}) {
    EXPECT_GT(after.Value("placer_block_compute_seconds_total", {{"block", block}}).value_or(0), 0)
        << block;
  }
}

TEST_F(DeviceMetrics, PromtoolAcceptsTheScrape) {
  client::PlacerClient client({ports_.target(), seconds(30)});
  ASSERT_TRUE(client.GetModelInfo().ok());
  v1::GenerateRequest request;
  request.add_prompt_token_ids(1);
  request.mutable_params()->set_max_new_tokens(2);
  ASSERT_TRUE(client.Generate(request, [](const v1::GenerateResponse&) {}).ok());
  const std::optional<std::string> body = HttpGet(ports_.metrics_port, "/metrics");
  ASSERT_TRUE(body.has_value());
  const std::string path = "/tmp/placer-scrape-" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << *body;
  const CommandResult check = RunCommand(std::string(PROMTOOL_PATH) + " check metrics < " + path);
  std::remove(path.c_str());
  EXPECT_EQ(check.exit_code, 0) << check.output << "\n" << *body;
}

}  // namespace
}  // namespace placer::testing
