#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/skeleton.hpp>

#include "io/text_cursor.hpp"

namespace xpd::io {
namespace {

using detail::split_tokens;
using detail::TextCursor;

// Parses one whole token of a line as an integer / double; false when it is not one.
bool parse_int(std::string_view t, long long& v) {
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return ec == std::errc() && p == t.data() + t.size();
}
bool parse_double(std::string_view t, double& v) {
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return ec == std::errc() && p == t.data() + t.size();
}

}  // namespace

Skeleton parse_tgf(std::string_view data, const std::string& name) {
  TextCursor in(data, name);
  std::vector<Vec3> joints;
  std::vector<std::array<int, 2>> bones;
  int section = 0;  // 0 joints, 1 bones, 2 ignored trailing sections
  while (in.remaining() > 0 && section < 2) {
    const std::size_t line = in.line();
    const std::vector<std::string_view> t = split_tokens(in.rest_of_line());
    if (t.empty()) continue;
    const auto fail = [&](const std::string& msg) { throw IoError(name, line, msg); };
    if (t[0] == "#") {
      ++section;
      continue;
    }
    if (section == 0) {
      long long index = 0;
      Vec3 x;
      if (t.size() < 4 || !parse_int(t[0], index))
        fail("expected a joint line 'index x y z', found '" + TextCursor::printable(t[0]) + "...'");
      if (index != static_cast<long long>(joints.size()) + 1)
        fail("joint index " + std::to_string(index) + " out of sequence (expected " +
             std::to_string(joints.size() + 1) + "; .tgf joints are numbered 1, 2, ...)");
      for (int k = 0; k < 3; ++k)
        if (!parse_double(t[static_cast<std::size_t>(k) + 1], x[k]) || !std::isfinite(x[k]))
          fail("joint " + std::to_string(index) + ": bad coordinate '" +
               TextCursor::printable(t[static_cast<std::size_t>(k) + 1]) + "'");
      joints.push_back(x);
    } else {
      long long a = 0, b = 0;
      if (t.size() < 2 || !parse_int(t[0], a) || !parse_int(t[1], b))
        fail("expected a bone line 'joint_a joint_b', found '" + TextCursor::printable(t[0]) + "...'");
      const auto n = static_cast<long long>(joints.size());
      if (a < 1 || a > n || b < 1 || b > n)
        fail("bone " + std::to_string(bones.size() + 1) + " references joint " +
             std::to_string(a < 1 || a > n ? a : b) + ", outside 1.." + std::to_string(n));
      if (a == b)
        fail("bone " + std::to_string(bones.size() + 1) + " connects joint " + std::to_string(a) + " to itself");
      bones.push_back({static_cast<int>(a - 1), static_cast<int>(b - 1)});
    }
  }
  if (joints.empty()) throw IoError(name, 0, "no joints in .tgf file");
  if (section == 0) throw IoError(name, 0, "missing '#' line after the joints of the .tgf file");
  Skeleton s;
  s.joints.resize(static_cast<Eigen::Index>(joints.size()), 3);
  for (std::size_t i = 0; i < joints.size(); ++i) s.joints.row(static_cast<Eigen::Index>(i)) = joints[i].transpose();
  s.bones.resize(static_cast<Eigen::Index>(bones.size()), 2);
  for (std::size_t b = 0; b < bones.size(); ++b) {
    s.bones(static_cast<Eigen::Index>(b), 0) = bones[b][0];
    s.bones(static_cast<Eigen::Index>(b), 1) = bones[b][1];
  }
  return s;
}

Skeleton read_tgf(const std::string& path) { return parse_tgf(read_file_bytes(path), path); }

Eigen::MatrixXd parse_dmat(std::string_view data, const std::string& name) {
  TextCursor in(data, name);
  std::int64_t cols = in.next_int("the column count");
  std::int64_t rows = in.next_int("the row count");
  const bool binary = cols == 0 && rows == 0;
  if (binary) {
    cols = in.next_int("the column count of the binary header");
    rows = in.next_int("the row count of the binary header");
  }
  if (cols < 0 || rows < 0)
    in.fail("negative matrix size " + std::to_string(cols) + " x " + std::to_string(rows) + " (header is 'cols rows')");
  if (cols > 0 && rows > (std::int64_t{1} << 40) / cols) in.fail("absurd matrix size in header");
  const std::int64_t count = cols * rows;
  Eigen::MatrixXd m(rows, cols);
  if (binary) {
    // The header's line ends with one newline; the doubles follow it directly.
    (void)in.rest_of_line();
    const std::size_t n = in.check_count(count, sizeof(double), "matrix value", std::int64_t{1} << 40);
    const bool swap = std::endian::native == std::endian::big;
    for (std::size_t k = 0; k < n; ++k) m.data()[k] = in.read_binary<double>(swap, "binary .dmat values");
    if (in.remaining() != 0)
      in.fail(std::to_string(in.remaining()) + " unexpected bytes after the " + std::to_string(n) +
              " values of a binary .dmat");
  } else {
    const std::size_t n = in.check_count(count, 2, "matrix value", std::int64_t{1} << 40);
    // Eigen's default storage is column-major, matching the file order.
    for (std::size_t k = 0; k < n; ++k) m.data()[k] = in.next_double("a matrix value");
    if (!in.at_end())
      in.fail("more values than the header's " + std::to_string(cols) + " x " + std::to_string(rows) + " (cols rows)");
  }
  return m;
}

Eigen::MatrixXd read_dmat(const std::string& path) { return parse_dmat(read_file_bytes(path), path); }

}  // namespace xpd::io
