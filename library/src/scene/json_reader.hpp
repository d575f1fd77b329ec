#pragma once
// Internal: strict reading of a JSON document into structs. A JsonReader wraps one JSON value and
// its JSON pointer; every error it raises is a SceneError naming that pointer (or the pointer of a
// key inside it). Struct parsers first declare their keys (allow_keys: anything else is an
// "unknown key" error with a did-you-mean suggestion), then read them with required/optional.
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::io::detail {

using nlohmann::json;

/// Levenshtein distance (insertions, deletions, substitutions).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// "; did you mean 'x'?" for the closest candidate within a small edit distance, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// Escapes one reference token of a JSON pointer ("~" -> "~0", "/" -> "~1").
std::string escape_pointer_token(std::string_view token);

/// Short description of a JSON value's type for messages: "object", "array", "string", "boolean",
/// "integer", "number", "null".
std::string describe_type(const json& value);

class JsonReader {
 public:
  JsonReader(const json& value, std::string pointer, const std::string& file)
      : value_(&value), pointer_(std::move(pointer)), file_(&file) {}

  const json& value() const { return *value_; }
  const std::string& pointer() const { return pointer_; }
  const std::string& file() const { return *file_; }
  std::string pointer_of(std::string_view key) const { return pointer_ + "/" + escape_pointer_token(key); }
  std::string pointer_of(std::size_t index) const { return pointer_ + "/" + std::to_string(index); }

  [[noreturn]] void fail(const std::string& message) const { throw SceneError(*file_, pointer_, message); }
  [[noreturn]] void fail_at(std::string_view key, const std::string& message) const {
    throw SceneError(*file_, pointer_of(key), message);
  }
  /// "expected WHAT, found TYPE VALUE".
  [[noreturn]] void fail_type(const std::string& expected) const;

  bool is_object() const { return value_->is_object(); }
  bool is_string() const { return value_->is_string(); }
  bool is_array() const { return value_->is_array(); }
  void expect_object() const;
  void expect_array() const;

  /// Every key of this object must be one of `keys`; otherwise "unknown key 'k'" (+ `note`, + a
  /// suggestion) at the key's pointer. Also checks that the value is an object.
  void allow_keys(std::initializer_list<std::string_view> keys, const std::string& note = "") const;
  void allow_keys(const std::vector<std::string>& keys, const std::string& note = "") const;

  bool has(std::string_view key) const;
  /// Reader of a required key's value ("missing required key 'k'" at this pointer otherwise).
  JsonReader child(std::string_view key) const;
  std::optional<JsonReader> optional_child(std::string_view key) const;
  /// Array access.
  std::size_t size() const;
  JsonReader element(std::size_t index) const;

  /// The value converted to T (double, int, bool, std::string, Vec3, std::vector<double|int|std::string>).
  template <class T>
  T as() const;
  template <class T>
  T required(std::string_view key) const {
    return child(key).as<T>();
  }
  template <class T>
  T optional(std::string_view key, T fallback) const {
    const auto c = optional_child(key);
    return c ? c->as<T>() : std::move(fallback);
  }
  template <class T>
  std::optional<T> maybe(std::string_view key) const {
    const auto c = optional_child(key);
    if (!c) return std::nullopt;
    return c->as<T>();
  }
  /// Reads a string that must be one of `choices` (error lists them, with a suggestion).
  std::string one_of(const std::vector<std::string>& choices) const;

 private:
  const json* value_;
  std::string pointer_;
  const std::string* file_;
};

template <>
double JsonReader::as<double>() const;
template <>
int JsonReader::as<int>() const;
template <>
bool JsonReader::as<bool>() const;
template <>
std::string JsonReader::as<std::string>() const;
template <>
Vec3 JsonReader::as<Vec3>() const;
template <>
std::vector<double> JsonReader::as<std::vector<double>>() const;
template <>
std::vector<int> JsonReader::as<std::vector<int>>() const;
template <>
std::vector<std::string> JsonReader::as<std::vector<std::string>>() const;

}  // namespace xpd::io::detail
