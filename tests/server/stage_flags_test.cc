// The flags of a pipeline group, and LeaderWorkerSet's variables standing in for them.
#include "server/stage_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace placer::server {
namespace {

using ::testing::HasSubstr;

struct Env {
  std::map<std::string, std::string> values;
  std::function<const char*(const char*)> get() const {
    return [this](const char* name) -> const char* {
      auto it = values.find(name);
      return it == values.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(StageFlagsTest, OneProcessWithoutFlagsOrVariables) {
  auto options = ResolveStageOptions({}, Env{}.get());
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->enabled());
}

TEST(StageFlagsTest, FlagsGiveTheGroup) {
  StageFlags flags;
  flags.stages = 3;
  flags.rank = 2;
  flags.rendezvous = "10.0.0.1:29500";
  flags.listen = "10.0.0.3";
  flags.timeout = "1500ms";
  auto options = ResolveStageOptions(flags, Env{}.get());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->enabled());
  EXPECT_EQ(options->rank, 2);
  EXPECT_EQ(options->rendezvous, "10.0.0.1:29500");
  EXPECT_EQ(options->timeout, std::chrono::milliseconds(1500));
}

TEST(StageFlagsTest, LeaderWorkerSetVariablesStandInForTheFlags) {
  StageFlags flags;
  flags.listen = "10.0.0.7";
  Env env{{{"LWS_GROUP_SIZE", "2"}, {"LWS_WORKER_INDEX", "1"},
           {"LWS_LEADER_ADDRESS", "placer-0.placer.default"}}};
  auto options = ResolveStageOptions(flags, env.get());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->stages, 2);
  EXPECT_EQ(options->rank, 1);
  EXPECT_EQ(options->rendezvous, "placer-0.placer.default:29500");
  // A flag wins over its variable.
  flags.rank = 0;
  EXPECT_EQ(ResolveStageOptions(flags, env.get())->rank, 0);
}

TEST(StageFlagsTest, ErrorsNameTheFlagOrVariable) {
  StageFlags flags;
  flags.stages = 2;
  flags.rank = 0;
  EXPECT_THAT(ResolveStageOptions(flags, Env{}.get()).status().message(), HasSubstr("--rendezvous"));
  flags.rendezvous = "127.0.0.1:29500";
  EXPECT_THAT(ResolveStageOptions(flags, Env{}.get()).status().message(), HasSubstr("--stage-listen"));
  flags.listen = "127.0.0.1";
  flags.rank = 2;
  EXPECT_THAT(ResolveStageOptions(flags, Env{}.get()).status().message(),
              HasSubstr("--stage-rank 2: must be below --stages 2"));
  flags.rank = 1;
  flags.timeout = "soon";
  EXPECT_THAT(ResolveStageOptions(flags, Env{}.get()).status().message(), HasSubstr("--stage-timeout 'soon'"));
  flags.timeout = "5s";
  flags.rendezvous = "nohost";
  EXPECT_THAT(ResolveStageOptions(flags, Env{}.get()).status().message(), HasSubstr("--rendezvous"));
  EXPECT_THAT(ResolveStageOptions({}, Env{{{"LWS_GROUP_SIZE", "two"}}}.get()).status().message(),
              HasSubstr("LWS_GROUP_SIZE='two'"));
}

}  // namespace
}  // namespace placer::server
