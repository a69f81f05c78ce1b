// See prometheus_text.h.
#include "runtime/metrics/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>

namespace capsule::metrics {

bool ValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void PrometheusText::Family(const std::string& name, const char* type, const std::string& help) {
  std::string h;
  for (char c : help) h += c == '\n' ? ' ' : c;
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, h, name, type);
}

void PrometheusText::Sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    out_ += '}';
  }
  if (std::isnan(value)) {
    out_ += " NaN\n";
  } else if (std::isinf(value)) {
    out_ += value > 0 ? " +Inf\n" : " -Inf\n";
  } else {
    out_ += fmt::format(" {}\n", value);
  }
}

}  // namespace capsule::metrics
