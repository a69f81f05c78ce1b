#include "runtime/metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace capsule::metrics {
namespace {

TEST(PrometheusTextTest, FamiliesAndSamplesInTheExpositionFormat) {
  PrometheusText t;
  t.Family("capsule_vm_start_seconds", "gauge", "how long\nthe VM took");
  t.Sample("capsule_vm_start_seconds", {{"pod", "web"}, {"namespace", "shop"}}, 0.25);
  t.Sample("capsule_vm_start_seconds", {}, 3);
  EXPECT_EQ(t.text(),
            "# HELP capsule_vm_start_seconds how long the VM took\n"
            "# TYPE capsule_vm_start_seconds gauge\n"
            "capsule_vm_start_seconds{pod=\"web\",namespace=\"shop\"} 0.25\n"
            "capsule_vm_start_seconds 3\n");
}

TEST(PrometheusTextTest, LabelValuesFromPodsCannotBreakTheFormat) {
  // A pod name is the user's; a hostile one must stay one label value.
  PrometheusText t;
  t.Sample("m", {{"pod", "a\"b\\c\nd} 1\nevil 2"}}, 1);
  EXPECT_EQ(t.text(), "m{pod=\"a\\\"b\\\\c\\nd} 1\\nevil 2\"} 1\n");
  EXPECT_EQ(t.text().find('\n'), t.text().size() - 1) << "one sample, one line";
}

TEST(PrometheusTextTest, SpecialValuesAndNames) {
  PrometheusText t;
  t.Sample("m", {}, std::numeric_limits<double>::quiet_NaN());
  t.Sample("m", {}, std::numeric_limits<double>::infinity());
  t.Sample("m", {}, 1e20);
  EXPECT_EQ(t.text(), "m NaN\nm +Inf\nm 1e+20\n");
  EXPECT_TRUE(ValidMetricName("capsule_pool_ready"));
  EXPECT_TRUE(ValidMetricName("a:b_c9"));
  EXPECT_FALSE(ValidMetricName("9lives"));
  EXPECT_FALSE(ValidMetricName("has-dash"));
  EXPECT_FALSE(ValidMetricName(""));
}

}  // namespace
}  // namespace capsule::metrics
