// See fault_plan.h.
#include "agent/faults/fault_plan.h"

#include <fmt/format.h>

#include <cctype>

namespace capsule::agent::faults {
namespace {

// An hour: longer is a typo, and a hang says "forever" better.
constexpr uint64_t kMaxDelayMs = 3600 * 1000;

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

bool IsRpcName(std::string_view s) {
  if (s.empty() || !std::isupper(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::optional<uint64_t> Millis(std::string_view s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

Result<FaultRule> ParseRule(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        fmt::format("capsule.fault rule '{}': {} (want RPC:hang or RPC:delay=MS, then :once and/or :skip=N)", text,
                    why));
  };
  const auto parts = Split(text, ':');
  if (parts.size() < 2 || parts.size() > 4) return bad("wrong number of ':' fields");
  FaultRule r;
  if (!IsRpcName(parts[0])) return bad("not an RPC name");
  r.rpc = std::string(parts[0]);
  if (parts[1] == "hang") {
    r.action = FaultRule::Action::kHang;
  } else if (parts[1].rfind("delay=", 0) == 0) {
    auto ms = Millis(parts[1].substr(6));
    if (!ms || *ms == 0 || *ms > kMaxDelayMs) return bad("delay must be 1 to 3600000 milliseconds");
    r.action = FaultRule::Action::kDelay;
    r.delay = std::chrono::milliseconds(*ms);
  } else {
    return bad("unknown action");
  }
  bool seen_skip = false;
  for (size_t i = 2; i < parts.size(); ++i) {
    if (parts[i] == "once" && !r.once) {
      r.once = true;
    } else if (parts[i].rfind("skip=", 0) == 0 && !seen_skip) {
      auto n = Millis(parts[i].substr(5));  // a plain count
      if (!n || *n > 1000) return bad("skip must be 0 to 1000 calls");
      r.skip = static_cast<uint32_t>(*n);
      seen_skip = true;
    } else {
      return bad("after the action only 'once' and 'skip=N', each at most once");
    }
  }
  return r;
}

}  // namespace

std::string FaultRule::ToString() const {
  std::string s = rpc + (action == Action::kHang ? ":hang" : fmt::format(":delay={}", delay.count()));
  if (once) s += ":once";
  if (skip != 0) s += fmt::format(":skip={}", skip);
  return s;
}

Result<FaultPlan> FaultPlan::Parse(std::string_view spec) {
  FaultPlan plan;
  if (spec.empty()) return plan;
  for (std::string_view text : Split(spec, ',')) {
    ASSIGN_OR_RETURN(FaultRule r, ParseRule(text));
    plan.rules_.push_back(std::move(r));
  }
  plan.spent_.assign(plan.rules_.size(), false);
  plan.passed_.assign(plan.rules_.size(), 0);
  return plan;
}

std::optional<FaultRule> FaultPlan::Take(std::string_view rpc) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].rpc != rpc || spent_[i]) continue;
    if (passed_[i] < rules_[i].skip) {
      ++passed_[i];
      return std::nullopt;  // this call runs normally
    }
    if (rules_[i].once) spent_[i] = true;
    return rules_[i];
  }
  return std::nullopt;
}

std::string FaultPlan::ToString() const {
  std::string out;
  for (const auto& r : rules_) out += (out.empty() ? "" : ",") + r.ToString();
  return out;
}

}  // namespace capsule::agent::faults
