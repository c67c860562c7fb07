#include "server/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/request_timer.h"

namespace placer::server {
namespace {

// spdlog's %v writes the message raw; a quote or newline in it would break the JSON line.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted =
        nlohmann::json(std::string(msg.payload.data(), msg.payload.size()))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

// Lines written while a thread serves an RPC carry its request id, so one request's lines
// can be found among concurrent ones (and matched with the client's x-request-id).
// RequestTimer only admits ids without quotes or backslashes, so they need no escaping.
class RequestIdField final : public spdlog::custom_flag_formatter {
 public:
  explicit RequestIdField(bool json) : json_(json) {}
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string& id = RequestTimer::CurrentRequestId();
    if (id.empty()) return;
    const std::string field =
        json_ ? absl::StrCat("\"request_id\":\"", id, "\",") : absl::StrCat("[", id, "] ");
    dest.append(field.data(), field.data() + field.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<RequestIdField>(json_);
  }

 private:
  bool json_;
};

}  // namespace

absl::Status ConfigureLogging(const std::string& format, const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--log-level: unknown level '", level, "'"));
  }
  auto logger = std::make_shared<spdlog::logger>(
      "placer", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonEscapedMessage>('*');
    formatter->add_flag<RequestIdField>('q', true)
        .set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","thread":%t,%q"msg":%*})");
    logger->set_formatter(std::move(formatter));
  } else if (format == "text") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<RequestIdField>('q', false)
        .set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %q%v");
    logger->set_formatter(std::move(formatter));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: '", format, "' is not one of text, json"));
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace placer::server
