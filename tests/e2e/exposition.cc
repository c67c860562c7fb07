#include "tests/e2e/exposition.h"

#include "tests/e2e/daemon_process.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace placer::testing {
namespace {

// `{a="x",b="y\"z"}` starting at text[at] == '{'; returns the index after '}'.
std::optional<size_t> ParseLabels(const std::string& text, size_t at,
                                  std::map<std::string, std::string>* labels) {
  size_t i = at + 1;
  while (i < text.size() && text[i] != '}') {
    const size_t eq = text.find('=', i);
    if (eq == std::string::npos || eq + 1 >= text.size() || text[eq + 1] != '"') {
      return std::nullopt;
    }
    const std::string name = text.substr(i, eq - i);
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        value += text[j] == 'n' ? '\n' : text[j];
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) return std::nullopt;
    (*labels)[name] = value;
    i = j + 1;
    if (i < text.size() && text[i] == ',') ++i;
  }
  if (i >= text.size()) return std::nullopt;
  return i + 1;
}

}  // namespace

std::optional<Exposition> ParseExposition(const std::string& text, std::string* error) {
  Exposition exposition;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream fields(line.substr(7));
      std::string name, type;
      fields >> name >> type;
      exposition.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    Sample sample;
    size_t end = line.find_first_of("{ ");
    if (end == std::string::npos) {
      *error = "no value: " + line;
      return std::nullopt;
    }
    sample.name = line.substr(0, end);
    if (line[end] == '{') {
      const std::optional<size_t> after = ParseLabels(line, end, &sample.labels);
      if (!after) {
        *error = "bad labels: " + line;
        return std::nullopt;
      }
      end = *after;
    }
    std::istringstream rest(line.substr(end));
    std::string value;
    rest >> value;
    char* parsed_end = nullptr;
    sample.value = std::strtod(value.c_str(), &parsed_end);
    if (value.empty() || *parsed_end != '\0') {
      if (value == "Nan" || value == "NaN") {
        sample.value = std::nan("");
      } else {
        *error = "bad value: " + line;
        return std::nullopt;
      }
    }
    exposition.sample_names.insert(sample.name);
    exposition.samples.push_back(std::move(sample));
  }
  return exposition;
}

std::vector<Sample> Exposition::Find(const std::string& name,
                                     const std::map<std::string, std::string>& match) const {
  std::vector<Sample> found;
  for (const Sample& sample : samples) {
    if (sample.name != name) continue;
    bool all = true;
    for (const auto& [key, value] : match) {
      const auto label = sample.labels.find(key);
      all = all && label != sample.labels.end() && label->second == value;
    }
    if (all) found.push_back(sample);
  }
  return found;
}

std::optional<double> Exposition::Value(const std::string& name,
                                        const std::map<std::string, std::string>& match) const {
  const std::vector<Sample> found = Find(name, match);
  if (found.size() != 1) return std::nullopt;
  return found.front().value;
}

std::optional<double> ScrapeValue(int port, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  const std::optional<std::string> body = HttpGet(port, "/metrics");
  if (!body) return std::nullopt;
  std::string error;
  const std::optional<Exposition> parsed = ParseExposition(*body, &error);
  if (!parsed) return std::nullopt;
  return parsed->Value(name, labels);
}

}  // namespace placer::testing
