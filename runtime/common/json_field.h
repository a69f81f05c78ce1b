// JsonField: a JSON value together with the path it was reached by
// ("process.args[1]"), so every type or range error names the exact field.
// Absent keys are null fields: optional readers leave the output untouched,
// required readers report "<path>: required". The one reader of JSON from
// outside a function's trust: OCI specs, and the records the runtime keeps
// on disk (vm.json, pool.json, pod.json, a template's meta), which a reader
// prefixes with the file's name (WithContext).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

class JsonField {
 public:
  JsonField(const nlohmann::json* value, std::string path) : value_(value), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  // Absent or JSON null.
  bool null() const { return value_ == nullptr || value_->is_null(); }
  const nlohmann::json& json() const { return *value_; }

  // Member `key` of an object (null field if absent). Call only on objects.
  JsonField operator[](std::string_view key) const;

  // "<path>: <what>" as INVALID_ARGUMENT.
  Status Error(std::string_view what) const;

  Status ExpectObject() const;
  Status ExpectArray() const;

  // Typed reads of this field; the field must not be null.
  Status Read(std::string* out) const;
  Status Read(bool* out) const;
  Status Read(int64_t* out) const;
  Status Read(uint64_t* out) const;
  Status Read(uint32_t* out) const;
  Status Read(uint16_t* out) const;
  Status Read(int* out) const;
  // An integer in [min, max]; anything outside is refused, not wrapped.
  Status Read(int64_t* out, int64_t min, int64_t max) const;
  // Any JSON number.
  Status Read(double* out) const;
  Status Read(std::vector<std::string>* out) const;
  Status Read(std::vector<uint32_t>* out) const;
  Status Read(std::map<std::string, std::string>* out) const;

  // Calls fn(element) for each array element; a null field is an empty array.
  Status ForEach(const std::function<Status(const JsonField&)>& fn) const;

 private:
  Status ReadInteger(int64_t min, uint64_t max, int64_t* as_signed, uint64_t* as_unsigned) const;

  const nlohmann::json* value_;
  std::string path_;
};

// Reads parent[key] into *out when present and not null.
template <typename T>
Status Optional(const JsonField& parent, std::string_view key, T* out) {
  JsonField f = parent[key];
  if (f.null()) return Status::Ok();
  return f.Read(out);
}

template <typename T>
Status Optional(const JsonField& parent, std::string_view key, std::optional<T>* out) {
  JsonField f = parent[key];
  if (f.null()) return Status::Ok();
  T v{};
  RETURN_IF_ERROR(f.Read(&v));
  *out = std::move(v);
  return Status::Ok();
}

// Like Optional, but absence is an error naming the field.
template <typename T>
Status Required(const JsonField& parent, std::string_view key, T* out) {
  JsonField f = parent[key];
  if (f.null()) return f.Error("required");
  return f.Read(out);
}

// Required integer parent[key] in [min, max].
Status RequiredInRange(const JsonField& parent, std::string_view key, int64_t min, int64_t max, int64_t* out);

// Parses text as JSON; syntax errors become INVALID_ARGUMENT with the offset.
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what);

}  // namespace capsule
