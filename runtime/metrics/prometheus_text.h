// Prometheus' text exposition format (version 0.0.4), written: one family
// (# HELP, # TYPE) then its samples, label values escaped. Only writing;
// the HTTP side is cpp-httplib's (metrics_server.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace capsule::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  // `type`: gauge | counter. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*.
  void Family(const std::string& name, const char* type, const std::string& help);
  void Sample(const std::string& name, const Labels& labels, double value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// A label value with \, " and newlines escaped as the format asks.
std::string EscapeLabelValue(const std::string& v);
bool ValidMetricName(const std::string& name);

}  // namespace capsule::metrics
