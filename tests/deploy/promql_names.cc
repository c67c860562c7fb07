#include "tests/deploy/promql_names.h"

#include <cctype>
#include <regex>

namespace placer::testing {
namespace {

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Blanks quoted strings and the insides of {...} and [...].
std::string BlankLiteralsAndMatchers(const std::string& expr) {
  std::string out = expr;
  char quote = 0;
  int braces = 0, brackets = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (quote != 0) {
      if (c == '\\' && i + 1 < out.size()) out[i++] = ' ';
      else if (c == quote) quote = 0;
      out[i] = ' ';
      continue;
    }
    if (c == '"' || c == '\'' || c == '`') {
      quote = c;
      out[i] = ' ';
    } else if (c == '{') {
      ++braces, out[i] = ' ';
    } else if (c == '}') {
      --braces, out[i] = ' ';
    } else if (c == '[') {
      ++brackets, out[i] = ' ';
    } else if (c == ']') {
      --brackets, out[i] = ' ';
    } else if (braces > 0 || brackets > 0) {
      out[i] = ' ';
    }
  }
  return out;
}

const std::set<std::string> kKeywords = {"by",  "without", "on",     "ignoring", "group_left",
                                         "group_right", "bool", "and", "or", "unless",
                                         "offset", "inf", "nan", "atan2", "start", "end"};

}  // namespace

std::set<std::string> MetricNamesInPromQL(const std::string& expr) {
  std::string text = BlankLiteralsAndMatchers(expr);
  // Grafana variables: $name, ${name}, ${name:format}.
  text = std::regex_replace(text, std::regex(R"(\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*)"), " ");
  // Grouping modifiers with their label lists go, so that `sum by (x) (...)` reads as the
  // call `sum (...)`.
  text = std::regex_replace(
      text, std::regex(R"(\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))"), " ");
  std::set<std::string> names;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      // Numbers and durations (1e3, 0.99, 5m) are not names.
      while (i < text.size() && (IsNameChar(text[i]) || text[i] == '.')) ++i;
      continue;
    }
    if (!IsNameStart(c)) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && IsNameChar(text[i])) ++i;
    const std::string word = text.substr(start, i - start);
    size_t next = i;
    while (next < text.size() && std::isspace(static_cast<unsigned char>(text[next]))) ++next;
    const bool call = next < text.size() && text[next] == '(';
    if (!call && kKeywords.count(word) == 0) names.insert(word);
  }
  return names;
}

std::vector<std::string> DashboardQueries(const nlohmann::json& dashboard) {
  std::vector<std::string> queries;
  for (const nlohmann::json& panel : dashboard.value("panels", nlohmann::json::array())) {
    for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array())) {
      if (target.contains("expr")) queries.push_back(target.at("expr").get<std::string>());
    }
  }
  const std::regex label_values(R"(^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$)");
  for (const nlohmann::json& variable :
       dashboard.value("templating", nlohmann::json::object()).value("list", nlohmann::json::array())) {
    if (variable.value("type", "") != "query") continue;
    const nlohmann::json& query = variable.at("query");
    const std::string text =
        query.is_string() ? query.get<std::string>() : query.value("query", std::string());
    std::smatch match;
    if (std::regex_match(text, match, label_values)) queries.push_back(match[1]);
  }
  return queries;
}

std::string ForPrometheus(const std::string& expr) {
  std::string out = std::regex_replace(
      expr, std::regex(R"(\$__(rate_interval|interval|range))"), "1m");
  return std::regex_replace(out, std::regex(R"(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)"), ".*");
}

}  // namespace placer::testing
