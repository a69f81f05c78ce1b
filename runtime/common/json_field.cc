// Typed, path-tracking reads over nlohmann::json values.
#include "runtime/common/json_field.h"

#include <limits>

namespace capsule {

JsonField JsonField::operator[](std::string_view key) const {
  std::string path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (null() || !value_->is_object()) return JsonField(nullptr, std::move(path));
  auto it = value_->find(key);
  if (it == value_->end()) return JsonField(nullptr, std::move(path));
  return JsonField(&*it, std::move(path));
}

Status JsonField::Error(std::string_view what) const {
  return InvalidArgument((path_.empty() ? std::string("(root)") : path_) + ": " + std::string(what));
}

Status JsonField::ExpectObject() const {
  if (null() || !value_->is_object()) return Error("must be an object");
  return Status::Ok();
}

Status JsonField::ExpectArray() const {
  if (null() || !value_->is_array()) return Error("must be an array");
  return Status::Ok();
}

Status JsonField::Read(std::string* out) const {
  if (null() || !value_->is_string()) return Error("must be a string");
  *out = value_->get<std::string>();
  return Status::Ok();
}

Status JsonField::Read(bool* out) const {
  if (null() || !value_->is_boolean()) return Error("must be true or false");
  *out = value_->get<bool>();
  return Status::Ok();
}

// Accepts JSON integers (never floats) within [min, max].
Status JsonField::ReadInteger(int64_t min, uint64_t max, int64_t* as_signed,
                              uint64_t* as_unsigned) const {
  if (null() || !value_->is_number_integer()) return Error("must be an integer");
  const std::string range = "must be between " + std::to_string(min) + " and " + std::to_string(max);
  if (value_->is_number_unsigned()) {
    // nlohmann reads every non-negative literal (0 too) as unsigned: the
    // lower bound applies here as well.
    uint64_t v = value_->get<uint64_t>();
    if (v > max || (min > 0 && v < static_cast<uint64_t>(min))) return Error(range + ", got " + std::to_string(v));
    if (as_unsigned) *as_unsigned = v;
    if (as_signed) *as_signed = static_cast<int64_t>(v);
    return Status::Ok();
  }
  int64_t v = value_->get<int64_t>();
  if (v < min || (v >= 0 && static_cast<uint64_t>(v) > max))
    return Error(range + ", got " + std::to_string(v));
  if (as_signed) *as_signed = v;
  if (as_unsigned) *as_unsigned = static_cast<uint64_t>(v);
  return Status::Ok();
}

Status JsonField::Read(int64_t* out) const {
  return ReadInteger(std::numeric_limits<int64_t>::min(),
                     static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), out, nullptr);
}

Status JsonField::Read(uint64_t* out) const {
  return ReadInteger(0, std::numeric_limits<uint64_t>::max(), nullptr, out);
}

Status JsonField::Read(uint32_t* out) const {
  uint64_t v = 0;
  RETURN_IF_ERROR(ReadInteger(0, std::numeric_limits<uint32_t>::max(), nullptr, &v));
  *out = static_cast<uint32_t>(v);
  return Status::Ok();
}

Status JsonField::Read(uint16_t* out) const {
  uint64_t v = 0;
  RETURN_IF_ERROR(ReadInteger(0, std::numeric_limits<uint16_t>::max(), nullptr, &v));
  *out = static_cast<uint16_t>(v);
  return Status::Ok();
}

Status JsonField::Read(int* out) const {
  int64_t v = 0;
  RETURN_IF_ERROR(ReadInteger(std::numeric_limits<int>::min(),
                              static_cast<uint64_t>(std::numeric_limits<int>::max()), &v, nullptr));
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status JsonField::Read(int64_t* out, int64_t min, int64_t max) const {
  const uint64_t hi = max < 0 ? 0 : static_cast<uint64_t>(max);
  int64_t v = 0;
  RETURN_IF_ERROR(ReadInteger(min, hi, &v, nullptr));
  if (v > max) return Error("must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + std::to_string(v));
  *out = v;
  return Status::Ok();
}

Status JsonField::Read(double* out) const {
  if (null() || !value_->is_number()) return Error("must be a number");
  *out = value_->get<double>();
  return Status::Ok();
}

Status JsonField::ForEach(const std::function<Status(const JsonField&)>& fn) const {
  if (null()) return Status::Ok();
  RETURN_IF_ERROR(ExpectArray());
  for (size_t i = 0; i < value_->size(); ++i) {
    RETURN_IF_ERROR(fn(JsonField(&(*value_)[i], path_ + "[" + std::to_string(i) + "]")));
  }
  return Status::Ok();
}

Status JsonField::Read(std::vector<std::string>* out) const {
  std::vector<std::string> v;
  RETURN_IF_ERROR(ExpectArray());
  Status st = ForEach([&](const JsonField& e) {
    std::string s;
    RETURN_IF_ERROR(e.Read(&s));
    v.push_back(std::move(s));
    return Status::Ok();
  });
  RETURN_IF_ERROR(st);
  *out = std::move(v);
  return Status::Ok();
}

Status JsonField::Read(std::vector<uint32_t>* out) const {
  std::vector<uint32_t> v;
  RETURN_IF_ERROR(ExpectArray());
  Status st = ForEach([&](const JsonField& e) {
    uint32_t x = 0;
    RETURN_IF_ERROR(e.Read(&x));
    v.push_back(x);
    return Status::Ok();
  });
  RETURN_IF_ERROR(st);
  *out = std::move(v);
  return Status::Ok();
}

Status JsonField::Read(std::map<std::string, std::string>* out) const {
  RETURN_IF_ERROR(ExpectObject());
  std::map<std::string, std::string> m;
  for (const auto& [key, value] : value_->items()) {
    std::string s;
    RETURN_IF_ERROR(JsonField(&value, path_ + "." + key).Read(&s));
    m.emplace(key, std::move(s));
  }
  *out = std::move(m);
  return Status::Ok();
}

Status RequiredInRange(const JsonField& parent, std::string_view key, int64_t min, int64_t max, int64_t* out) {
  JsonField f = parent[key];
  if (f.null()) return f.Error("required");
  return f.Read(out, min, max);
}

Result<nlohmann::json> ParseJson(std::string_view text, std::string_view what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidArgument(std::string(what) + ": invalid JSON at byte " + std::to_string(e.byte) +
                           ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // Not only syntax: a number too large for a double ("1e400") is
    // out_of_range.406, which escaped here and ended the shim (found by
    // guest_spec_fuzzer).
    return InvalidArgument(std::string(what) + ": invalid JSON: " + e.what());
  }
}

}  // namespace capsule
