#include "server/stage_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/flags.h"

namespace placer::server {

void AddStageFlags(CLI::App& app, StageFlags& flags) {
  const std::string group = "Pipeline stages";
  app.add_option("--stages", flags.stages,
                 "placerd processes serving the model together, one per node (default: "
                 "LWS_GROUP_SIZE, else 1)")
      ->check(CLI::Range(1, 64))
      ->group(group);
  app.add_option("--stage-rank", flags.rank,
                 "this process's rank: 0 is the leader, which serves the APIs (default: "
                 "LWS_WORKER_INDEX)")
      ->check(CLI::Range(0, 63))
      ->group(group);
  app.add_option("--rendezvous", flags.rendezvous,
                 "HOST:PORT of the leader's rendezvous store (default: LWS_LEADER_ADDRESS:29500)")
      ->group(group);
  app.add_option("--stage-listen", flags.listen,
                 "address this rank's Gloo connections use; required: "
                 "Gloo's default is whatever the hostname resolves to")
      ->group(group);
  app.add_option("--stage-timeout", flags.timeout,
                 "deadline of every send and receive between stages; a stage silent for this "
                 "long fails the group")
      ->group(group);
  app.add_option("--rendezvous-timeout", flags.rendezvous_timeout,
                 "how long every rank may take to join and load")
      ->group(group);
}

absl::StatusOr<StageOptions> ResolveStageOptions(
    const StageFlags& flags, const std::function<const char*(const char*)>& env) {
  StageOptions options;
  auto from_env = [&](const char* name, int* value) -> absl::Status {
    const char* text = env(name);
    if (text == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtoi(text, value) || *value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, "='", text, "': not a number"));
    }
    return absl::OkStatus();
  };
  options.stages = flags.stages;
  if (options.stages == 0) {
    options.stages = 1;
    if (absl::Status status = from_env("LWS_GROUP_SIZE", &options.stages); !status.ok()) return status;
  }
  if (options.stages <= 1) {
    options.stages = 1;
    return options;
  }
  options.rank = flags.rank;
  if (options.rank < 0) {
    options.rank = 0;
    if (absl::Status status = from_env("LWS_WORKER_INDEX", &options.rank); !status.ok()) return status;
  }
  if (options.rank >= options.stages) {
    return absl::InvalidArgumentError(absl::StrCat("--stage-rank ", options.rank,
                                                   ": must be below --stages ", options.stages));
  }
  options.rendezvous = flags.rendezvous;
  if (options.rendezvous.empty()) {
    const char* leader = env("LWS_LEADER_ADDRESS");
    if (leader == nullptr || *leader == '\0') {
      return absl::InvalidArgumentError(
          "--stages > 1 needs --rendezvous HOST:PORT (or LWS_LEADER_ADDRESS)");
    }
    options.rendezvous = absl::StrCat(leader, ":", kDefaultRendezvousPort);
  }
  if (absl::Status status = ValidateListenAddress("--rendezvous", options.rendezvous); !status.ok()) {
    return status;
  }
  options.listen = flags.listen;
  if (options.listen.empty()) {
    return absl::InvalidArgumentError(
        "--stages > 1 needs --stage-listen ADDR: the address other stages reach this one at "
        "(Gloo's default, the hostname's address, is loopback in many pods)");
  }
  auto timeout = ParseDuration(flags.timeout);
  if (!timeout.ok() || timeout->count() < 10) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stage-timeout '", flags.timeout, "': ",
        timeout.ok() ? "must be at least 10ms" : timeout.status().message()));
  }
  options.timeout = *timeout;
  auto rendezvous_timeout = ParseDuration(flags.rendezvous_timeout);
  if (!rendezvous_timeout.ok() || rendezvous_timeout->count() < 10) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rendezvous-timeout '", flags.rendezvous_timeout, "': ",
        rendezvous_timeout.ok() ? "must be at least 10ms" : rendezvous_timeout.status().message()));
  }
  options.rendezvous_timeout = *rendezvous_timeout;
  return options;
}

}  // namespace placer::server
