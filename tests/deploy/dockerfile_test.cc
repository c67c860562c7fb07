// deploy/Dockerfile: its build stage runs the same commands the README tells people to run,
// and its runtime stage is Debian 12, non-root, and installs a package for every shared
// library placerd links (asked of dpkg and apt on this Debian machine, as the image would).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

struct Stage {
  std::string from;
  std::vector<std::string> runs;  // RUN commands, continuation lines joined
  std::string user;
  std::vector<std::string> env;  // ENV NAME=value pairs, one per entry
};

std::vector<Stage> ParseDockerfile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Stage> stages;
  std::string instruction;
  auto finish = [&] {
    std::istringstream words(instruction);
    std::string keyword;
    words >> keyword;
    std::string rest;
    std::getline(words, rest);
    rest = std::regex_replace(rest, std::regex(R"(^\s+|\s+$)"), "");
    rest = std::regex_replace(rest, std::regex(R"(\s+)"), " ");
    if (keyword == "FROM") stages.push_back({rest, {}, "", {}});
    if (!stages.empty() && keyword == "RUN") stages.back().runs.push_back(rest);
    if (!stages.empty() && keyword == "USER") stages.back().user = rest;
    if (!stages.empty() && keyword == "ENV") {
      std::istringstream pairs(rest);
      for (std::string pair; pairs >> pair;) stages.back().env.push_back(pair);
    }
    instruction.clear();
  };
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) == 0) continue;
    if (!line.empty() && line.back() == '\\') {
      instruction += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    instruction += line;
    finish();
  }
  if (!instruction.empty()) finish();
  return stages;
}

// Commands of the ```sh blocks, without comments and surrounding blanks.
std::set<std::string> ReadmeCommands(const std::string& path) {
  std::ifstream in(path);
  std::set<std::string> commands;
  bool in_block = false;
  for (std::string line; std::getline(in, line);) {
    const std::string trimmed = std::regex_replace(line, std::regex(R"(^\s+|\s+$)"), "");
    if (trimmed.rfind("```", 0) == 0) {
      in_block = !in_block && trimmed == "```sh";
      continue;
    }
    if (!in_block) continue;
    line = std::regex_replace(line, std::regex(R"(\s+#.*$)"), "");
    line = std::regex_replace(line, std::regex(R"(^\s+|\s+$)"), "");
    if (!line.empty()) commands.insert(line);
  }
  return commands;
}

namespace fs = std::filesystem;

const std::string kSource = PLACER_SOURCE_DIR;

TEST(Dockerfile, BuildStageRunsTheReadmeCommands) {
  const std::vector<Stage> stages = ParseDockerfile(kSource + "/deploy/Dockerfile");
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].from, "debian:12 AS build");
  const std::set<std::string> readme = ReadmeCommands(kSource + "/README.md");
  ASSERT_FALSE(stages[0].runs.empty());
  for (const std::string& run : stages[0].runs) {
    EXPECT_TRUE(readme.count(run)) << "RUN " << run << " is not a command of README.md";
  }
  // Installing and building, nothing skipped.
  EXPECT_EQ(stages[0].runs, (std::vector<std::string>{"bash scripts/install-deps.sh", "make build"}));
}

// placerd adds these itself when they are unset, by re-executing itself once (a second load
// of libtorch, ~0.5 s of every start): the image sets them so that a pod starts once. The
// values are placerd's own defaults (server/thread_wait_defaults.cc).
TEST(Dockerfile, RuntimeStageSetsTheThreadWaitDefaultsSoPlacerdStartsOnce) {
  const std::vector<Stage> stages = ParseDockerfile(kSource + "/deploy/Dockerfile");
  ASSERT_EQ(stages.size(), 2u);
  const std::vector<std::string>& env = stages[1].env;
  for (const char* pair : {"OMP_WAIT_POLICY=passive", "OPENBLAS_THREAD_TIMEOUT=4"}) {
    EXPECT_NE(std::find(env.begin(), env.end(), pair), env.end()) << pair;
  }
  std::ifstream defaults(kSource + "/server/thread_wait_defaults.cc");
  const std::string source((std::istreambuf_iterator<char>(defaults)), {});
  for (const char* pair : {"\"OMP_WAIT_POLICY=passive\"", "\"OPENBLAS_THREAD_TIMEOUT=4\""}) {
    EXPECT_NE(source.find(pair), std::string::npos) << "placerd's own default is no longer " << pair;
  }
}

TEST(Dockerfile, RuntimeStageIsNonRootDebian12WithEveryLibraryPlacerdLinks) {
  const std::vector<Stage> stages = ParseDockerfile(kSource + "/deploy/Dockerfile");
  ASSERT_EQ(stages.size(), 2u);
  const Stage& runtime = stages[1];
  EXPECT_EQ(runtime.from.rfind("debian:12", 0), 0u) << runtime.from;
  ASSERT_FALSE(runtime.user.empty());
  EXPECT_NE(runtime.user.substr(0, runtime.user.find(':')), "0");
  EXPECT_NE(runtime.user.substr(0, runtime.user.find(':')), "root");

  std::set<std::string> installed;
  for (const std::string& run : runtime.runs) {
    const size_t install = run.find("--no-install-recommends");
    if (install == std::string::npos) continue;
    std::istringstream words(run.substr(install + std::string("--no-install-recommends").size()));
    for (std::string word; words >> word && word != "&&";) installed.insert(word);
  }
  ASSERT_FALSE(installed.empty()) << "the runtime stage installs no packages";
  std::string listed;
  for (const std::string& package : installed) listed += package + " ";
  // What apt brings along with them.
  const CommandResult closure = RunCommand(
      "apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks "
      "--no-replaces --no-enhances " + listed + " | grep -v '^ '");
  ASSERT_EQ(closure.exit_code, 0) << closure.output;
  std::set<std::string> available;
  std::istringstream closure_lines(closure.output);
  for (std::string line; std::getline(closure_lines, line);) {
    available.insert(line.substr(0, line.find(':')));
  }

  // Every file those packages put on a machine (those installed here, as they are for the build).
  std::string closure_packages;
  for (const std::string& package : available) {
    // apt-cache also lists virtual packages as <name>.
    if (std::regex_match(package, std::regex("[a-z0-9][a-z0-9.+-]+"))) closure_packages += package + " ";
  }
  const CommandResult files = RunCommand("dpkg-query -L " + closure_packages + " 2>/dev/null");
  std::set<std::string> shipped;
  std::istringstream file_lines(files.output);
  for (std::string line; std::getline(file_lines, line);) shipped.insert(line);

  const CommandResult ldd = RunCommand(std::string("ldd ") + PLACERD_PATH);
  ASSERT_EQ(ldd.exit_code, 0) << ldd.output;
  std::istringstream lines(ldd.output);
  int libraries = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, std::regex(R"(=> (/\S+))"))) continue;
    ++libraries;
    // A package ships the file under one spelling: the alternatives target for libblas.so.3,
    // /lib or /usr/lib for the same file (merged /usr).
    const std::string path = match[1].str();
    const std::string real = fs::canonical(path).string();
    bool found = false;
    for (const std::string& candidate :
         {path, real, std::regex_replace(real, std::regex("^/usr/lib/"), "/lib/"),
          std::regex_replace(path, std::regex("^/lib/"), "/usr/lib/")}) {
      found = found || shipped.count(candidate) > 0;
    }
    EXPECT_TRUE(found) << path << " (" << real
                       << ") is in no package the runtime stage installs (or their dependencies)";
  }
  EXPECT_GT(libraries, 10) << ldd.output;
}

}  // namespace
}  // namespace placer::testing
