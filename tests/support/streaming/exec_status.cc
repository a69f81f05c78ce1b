// metav1.Status JSON -> ExecStatus, with nlohmann_json.
#include "tests/support/streaming/exec_status.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

namespace capsule::testing::streaming {
namespace {

// The quote of a bad status in an error.
constexpr size_t kStatusQuoteBytes = 300;

std::string StringField(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The ExitCode cause's message, if there is one.
std::optional<std::string> ExitCodeCause(const nlohmann::json& status) {
  auto details = status.find("details");
  if (details == status.end() || !details->is_object()) return std::nullopt;
  auto causes = details->find("causes");
  if (causes == details->end() || !causes->is_array()) return std::nullopt;
  for (const auto& cause : *causes) {
    if (cause.is_object() && StringField(cause, "reason") == "ExitCode") return StringField(cause, "message");
  }
  return std::nullopt;
}

}  // namespace

Result<ExecStatus> ParseExecStatus(std::string_view json) {
  const std::string quote(json.substr(0, kStatusQuoteBytes));
  if (json.empty()) return InvalidArgument("exec status: nothing on the error channel");
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument(fmt::format("exec status: not a JSON object: {:?}", quote));
  ExecStatus out;
  const std::string status = StringField(j, "status");
  out.reason = StringField(j, "reason");
  out.message = StringField(j, "message");
  if (status == "Success") {
    out.success = true;
    out.exit_code = 0;
    return out;
  }
  if (status != "Failure")
    return InvalidArgument(fmt::format("exec status: status {:?} is neither Success nor Failure: {:?}", status, quote));
  if (auto code = ExitCodeCause(j)) {
    int value = 0;
    auto [end, ec] = std::from_chars(code->data(), code->data() + code->size(), value);
    if (ec != std::errc() || end != code->data() + code->size())
      return InvalidArgument(fmt::format("exec status: ExitCode cause {:?} is not a number: {:?}", *code, quote));
    out.exit_code = value;
  }
  return out;
}

}  // namespace capsule::testing::streaming
