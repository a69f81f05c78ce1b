// Percentiles of a bench's samples, as `make bench` prints them.
#pragma once

#include <algorithm>
#include <vector>

namespace capsule::testing {

struct Summary {
  double p50 = 0, p90 = 0, max = 0;
};

// Nearest-rank percentiles; `samples` must not be empty.
inline Summary Summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1, static_cast<size_t>(q * static_cast<double>(samples.size())))];
  };
  return {at(0.5), at(0.9), samples.back()};
}

}  // namespace capsule::testing
