#include "scene/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xpd::io::detail {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // Accept up to a third of the longer word's length in edits, at least 2 (so "mew" -> "mu").
  std::size_t best = std::numeric_limits<std::size_t>::max();
  const std::string* pick = nullptr;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    const std::size_t limit = std::max<std::size_t>(2, std::max(word.size(), c.size()) / 3);
    if (d <= limit && d < best) {
      best = d;
      pick = &c;
    }
  }
  return pick ? "; did you mean '" + *pick + "'?" : std::string();
}

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string describe_type(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

void JsonReader::fail_type(const std::string& expected) const {
  std::string shown = value_->dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  fail("expected " + expected + ", found " + describe_type(*value_) + " " + shown);
}

void JsonReader::expect_object() const {
  if (!value_->is_object()) fail_type("an object");
}
void JsonReader::expect_array() const {
  if (!value_->is_array()) fail_type("an array");
}

void JsonReader::allow_keys(std::initializer_list<std::string_view> keys, const std::string& note) const {
  allow_keys(std::vector<std::string>(keys.begin(), keys.end()), note);
}

void JsonReader::allow_keys(const std::vector<std::string>& keys, const std::string& note) const {
  expect_object();
  for (const auto& item : value_->items())
    if (std::find(keys.begin(), keys.end(), item.key()) == keys.end())
      fail_at(item.key(), "unknown key '" + item.key() + "'" + note + did_you_mean(item.key(), keys));
}

bool JsonReader::has(std::string_view key) const {
  expect_object();
  return value_->contains(key);
}

JsonReader JsonReader::child(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end()) fail("missing required key '" + std::string(key) + "'");
  return JsonReader(*it, pointer_of(key), *file_);
}

std::optional<JsonReader> JsonReader::optional_child(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end()) return std::nullopt;
  return JsonReader(*it, pointer_of(key), *file_);
}

std::size_t JsonReader::size() const {
  expect_array();
  return value_->size();
}

JsonReader JsonReader::element(std::size_t index) const {
  expect_array();
  return JsonReader((*value_)[index], pointer_of(index), *file_);
}

std::string JsonReader::one_of(const std::vector<std::string>& choices) const {
  const std::string s = as<std::string>();
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "'" : ", '") + c + "'";
  fail("unknown value '" + s + "' (expected one of " + list + ")" + did_you_mean(s, choices));
}

template <>
double JsonReader::as<double>() const {
  if (!value_->is_number()) fail_type("a number");
  const double v = value_->get<double>();
  if (!std::isfinite(v)) fail("expected a finite number");
  return v;
}

template <>
int JsonReader::as<int>() const {
  // Integral floats (3.0) are accepted; the range is that of int.
  if (!value_->is_number()) fail_type("an integer");
  double v = 0;
  if (value_->is_number_unsigned())
    v = static_cast<double>(value_->get<std::uint64_t>());
  else if (value_->is_number_integer())
    v = static_cast<double>(value_->get<std::int64_t>());
  else
    v = value_->get<double>();
  if (!std::isfinite(v) || v != std::floor(v)) fail_type("an integer");
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    fail("integer " + value_->dump() + " out of range");
  return static_cast<int>(v);
}

template <>
bool JsonReader::as<bool>() const {
  if (!value_->is_boolean()) fail_type("a boolean");
  return value_->get<bool>();
}

template <>
std::string JsonReader::as<std::string>() const {
  if (!value_->is_string()) fail_type("a string");
  return value_->get<std::string>();
}

template <>
Vec3 JsonReader::as<Vec3>() const {
  if (!value_->is_array() || value_->size() != 3) fail_type("an array of 3 numbers");
  Vec3 v;
  for (std::size_t k = 0; k < 3; ++k) v[static_cast<Eigen::Index>(k)] = element(k).as<double>();
  return v;
}

template <>
std::vector<double> JsonReader::as<std::vector<double>>() const {
  if (!value_->is_array()) fail_type("an array of numbers");
  std::vector<double> v(value_->size());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = element(k).as<double>();
  return v;
}

template <>
std::vector<int> JsonReader::as<std::vector<int>>() const {
  if (!value_->is_array()) fail_type("an array of integers");
  std::vector<int> v(value_->size());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = element(k).as<int>();
  return v;
}

template <>
std::vector<std::string> JsonReader::as<std::vector<std::string>>() const {
  if (!value_->is_array()) fail_type("an array of strings");
  std::vector<std::string> v(value_->size());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = element(k).as<std::string>();
  return v;
}

}  // namespace xpd::io::detail
