// CCD query files (ccd_queries.hpp). The numbers are parsed as 128-bit integers because the
// benchmark's numerators reach 112 bits; a value is converted only when it is exactly a double, so
// that a conservative CCD is judged on the very configuration the truth was computed for.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/ccd_queries.hpp>
#include <xpd/io/file.hpp>

namespace xpd::io {

namespace {

__extension__ typedef unsigned __int128 u128;  // GCC/Clang extension: the files need 112 bits

struct Cursor {
  const std::string& path;
  std::size_t line;
  [[noreturn]] void fail(const std::string& message) const { throw IoError(path, line, message); }
};

// Parses an optionally signed decimal integer at s[pos...] up to ',' or the end of the field.
// Returns the magnitude and sets `negative`.
u128 parse_integer(const Cursor& at, const std::string& field, bool& negative) {
  std::size_t i = 0;
  while (i < field.size() && (field[i] == ' ' || field[i] == '\t')) ++i;
  negative = false;
  if (i < field.size() && (field[i] == '-' || field[i] == '+')) negative = field[i++] == '-';
  if (i >= field.size() || field[i] < '0' || field[i] > '9') at.fail("expected an integer, got '" + field + "'");
  u128 value = 0;
  constexpr u128 kLimit = (~u128{0}) >> 1;  // 2¹²⁷ − 1
  for (; i < field.size() && field[i] >= '0' && field[i] <= '9'; ++i) {
    const unsigned digit = static_cast<unsigned>(field[i] - '0');
    if (value > (kLimit - digit) / 10) at.fail("integer '" + field + "' needs more than 127 bits");
    value = value * 10 + digit;
  }
  while (i < field.size() && (field[i] == ' ' || field[i] == '\t' || field[i] == '\r')) ++i;
  if (i != field.size()) at.fail("expected an integer, got '" + field + "'");
  return value;
}

int bit_length(u128 v) {
  int n = 0;
  while (v != 0) {
    v >>= 1;
    ++n;
  }
  return n;
}

double exact_ratio(const Cursor& at, const std::string& num_field, const std::string& den_field) {
  bool num_negative = false, den_negative = false;
  u128 num = parse_integer(at, num_field, num_negative);
  const u128 den = parse_integer(at, den_field, den_negative);
  if (den == 0 || den_negative) at.fail("denominator '" + den_field + "' is not positive");
  if ((den & (den - 1)) != 0)
    at.fail("denominator '" + den_field + "' is not a power of two: the value is not exactly a double");
  const int den_exponent = bit_length(den) - 1;
  if (num == 0) return 0.0;
  int shift = 0;
  while ((num & 1) == 0) {
    num >>= 1;
    ++shift;
  }
  if (bit_length(num) > 53) at.fail("value " + num_field + "/" + den_field + " is not exactly a double");
  const double magnitude = std::ldexp(static_cast<double>(static_cast<std::uint64_t>(num)), shift - den_exponent);
  return num_negative ? -magnitude : magnitude;
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

// File name without ".gz" and ".csv" ("227vf" for "queries/227vf.csv.gz").
std::string query_stem(const std::filesystem::path& p) {
  std::string stem = p.filename().string();
  for (const char* suffix : {".gz", ".csv"}) {
    const std::string s(suffix);
    if (stem.size() > s.size() && stem.compare(stem.size() - s.size(), s.size(), s) == 0)
      stem.resize(stem.size() - s.size());
  }
  return stem;
}

}  // namespace

std::vector<CcdQuery> read_ccd_queries(const std::string& path) {
  const std::string data = read_file_bytes(path);
  std::vector<CcdQuery> queries;
  std::size_t line_number = 0, row = 0, pos = 0;
  int columns = 0;
  while (pos < data.size()) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    std::string line = data.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const Cursor at{path, line_number};
    const std::vector<std::string> fields = split_fields(line);
    const int n = static_cast<int>(fields.size());
    if (n != 6 && n != 7) at.fail("expected 6 or 7 comma-separated integers, got " + std::to_string(n));
    if (columns == 0) columns = n;
    if (n != columns) at.fail("row has " + std::to_string(n) + " columns, earlier rows " + std::to_string(columns));
    if (row % 8 == 0) queries.emplace_back();
    CcdQuery& q = queries.back();
    for (int axis = 0; axis < 3; ++axis)
      q.points[row % 8][axis] = exact_ratio(at, fields[2 * axis], fields[2 * axis + 1]);
    if (n == 7) {
      bool negative = false;
      const u128 t = parse_integer(at, fields[6], negative);
      if (negative || t > 1) at.fail("truth must be 0 or 1, got '" + fields[6] + "'");
      if (row % 8 == 0) {
        q.truth = static_cast<int>(t);
      } else if (q.truth != static_cast<int>(t)) {
        at.fail("truth differs from the query's first row");
      }
    }
    ++row;
  }
  if (row % 8 != 0) throw IoError(path, 0, std::to_string(row) + " rows: a query file has 8 rows per query");
  return queries;
}

CcdQueryKind ccd_query_kind_from_path(const std::string& path) {
  const std::filesystem::path p(path);
  for (const auto& part : p.parent_path()) {
    if (part == "edge-edge") return CcdQueryKind::edge_edge;
    if (part == "vertex-face") return CcdQueryKind::vertex_face;
  }
  const std::string stem = query_stem(p);
  if (stem.size() >= 2 && stem.compare(stem.size() - 2, 2, "ee") == 0) return CcdQueryKind::edge_edge;
  if (stem.size() >= 2 && stem.compare(stem.size() - 2, 2, "vf") == 0) return CcdQueryKind::vertex_face;
  throw Error(path + ": cannot tell vertex-face from edge-edge queries by the path; name the kind");
}

std::vector<int> read_ccd_truth_json(const std::string& path) {
  const std::string data = read_file_bytes(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data);
  } catch (const nlohmann::json::parse_error& e) {
    throw IoError(path, 0, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_array()) throw IoError(path, 0, "expected a JSON array of booleans");
  std::vector<int> truth;
  truth.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_boolean()) throw IoError(path, 0, "entry " + std::to_string(i) + " is not a boolean");
    truth.push_back(j[i].get<bool>() ? 1 : 0);
  }
  return truth;
}

std::string ccd_truth_path_for(const std::string& query_path) {
  const std::filesystem::path p(query_path);
  if (p.parent_path().filename() != "queries") return "";
  const std::string stem = query_stem(p);
  return (p.parent_path().parent_path() / "mma_bool" / (stem + "_mma_bool.json")).string();
}

}  // namespace xpd::io
