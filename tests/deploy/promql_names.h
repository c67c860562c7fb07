// The metric names a PromQL expression (as Grafana stores it) reads, so a test can check a
// dashboard against what placerd really exports. Functions, aggregations, keywords, label
// names, strings, durations and Grafana variables are not metric names.
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>
#include <vector>

namespace placer::testing {

std::set<std::string> MetricNamesInPromQL(const std::string& expr);

// Every PromQL expression of a Grafana dashboard: panel targets' expr, and the selectors of
// label_values(...) template variables.
std::vector<std::string> DashboardQueries(const nlohmann::json& dashboard);

// The expression with Grafana's variables replaced so Prometheus can evaluate it:
// $__rate_interval and friends by 1m, template variables by ".*" (they sit in =~ matchers).
std::string ForPrometheus(const std::string& expr);

}  // namespace placer::testing
