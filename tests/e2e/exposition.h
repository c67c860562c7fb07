// Reads the Prometheus text exposition format as placerd serves it at /metrics, for tests
// that check names, labels and values.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace placer::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> "counter", "gauge", ...
  std::set<std::string> sample_names;        // names of the sample lines (histogram _bucket...)

  // Samples named `name` whose labels include every pair of `match`.
  std::vector<Sample> Find(const std::string& name,
                           const std::map<std::string, std::string>& match = {}) const;
  // The value of the one sample matching; nullopt when none or several match.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& match = {}) const;
};

// Parses the whole text; a line it cannot read is an error naming the line.
std::optional<Exposition> ParseExposition(const std::string& text, std::string* error);

// One value from a live scrape of http://127.0.0.1:port/metrics (Exposition::Value); nullopt
// when nothing answered, the text did not parse, or not exactly one sample matched.
std::optional<double> ScrapeValue(int port, const std::string& name,
                                  const std::map<std::string, std::string>& labels = {});

}  // namespace placer::testing
