#pragma once
// Internal: a bounds-checked cursor over an in-memory file, shared by every reader. It tracks the
// 1-based line number so that every parse error names FILE:LINE, and it refuses header counts that
// the remaining bytes cannot possibly hold, before anything is allocated.
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>
#include <xpd/core/error.hpp>

namespace xpd::io::detail {

class TextCursor {
 public:
  TextCursor(std::string_view data, std::string name) : data_(data), name_(std::move(name)) {}
  /// A cursor over a slice of a larger file whose first byte lies on line `first_line`.
  TextCursor(std::string_view data, std::string name, std::size_t first_line)
      : data_(data), name_(std::move(name)), line_(first_line) {}

  /// Makes every whitespace skip also skip the rest of a line at `comment` ('\0': no comments).
  /// Comments may then start a line or follow the data on it ("1 0 0 0  # node 1").
  void set_comment(char comment) { comment_ = comment; }

  const std::string& name() const { return name_; }
  std::size_t line() const { return line_; }
  std::size_t offset() const { return pos_; }
  std::size_t remaining() const { return data_.size() - pos_; }
  std::string_view data() const { return data_; }

  [[noreturn]] void fail(const std::string& message) const { throw IoError(name_, line_, message); }
  /// Failure inside binary data: names the line where the binary block started and the byte offset.
  [[noreturn]] void fail_binary(const std::string& message) const {
    throw IoError(name_, line_, message + " (at byte offset " + std::to_string(pos_) + ")");
  }

  /// Skips spaces, tabs, CR and newlines (counting lines).
  void skip_whitespace() {
    while (pos_ < data_.size()) {
      const char c = data_[pos_];
      if (c == '\n')
        ++line_;
      else if (c == comment_ && comment_ != '\0') {
        while (pos_ < data_.size() && data_[pos_] != '\n') ++pos_;
        continue;
      } else if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v')
        break;
      ++pos_;
    }
  }
  /// Skips whitespace and lines whose first non-blank character is `comment`.
  void skip_whitespace_and_comments(char comment) {
    while (true) {
      skip_whitespace();
      if (pos_ < data_.size() && data_[pos_] == comment)
        skip_line();
      else
        return;
    }
  }
  bool at_end() {
    skip_whitespace();
    return pos_ >= data_.size();
  }
  /// Next whitespace-separated token; fails with "unexpected end of file (expected WHAT)".
  std::string_view next_token(const char* what = "a token") {
    skip_whitespace();
    if (pos_ >= data_.size()) fail(std::string("unexpected end of file (expected ") + what + ")");
    const std::size_t start = pos_;
    while (pos_ < data_.size() && !is_space(data_[pos_])) ++pos_;
    return data_.substr(start, pos_ - start);
  }
  /// The next token without consuming it (empty at the end); skips whitespace (and comments).
  std::string_view peek_token() {
    skip_whitespace();
    std::size_t end = pos_;
    while (end < data_.size() && !is_space(data_[end])) ++end;
    return data_.substr(pos_, end - pos_);
  }
  /// Next token on the current line only; empty if the line has no more tokens.
  std::string_view next_token_on_line() {
    while (pos_ < data_.size() && (data_[pos_] == ' ' || data_[pos_] == '\t' || data_[pos_] == '\r')) ++pos_;
    const std::size_t start = pos_;
    while (pos_ < data_.size() && !is_space(data_[pos_])) ++pos_;
    return data_.substr(start, pos_ - start);
  }
  std::int64_t next_int(const char* what = "an integer") {
    const std::string_view t = next_token(what);
    std::int64_t v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size())
      fail(std::string("expected ") + what + ", found '" + printable(t) + "'");
    return v;
  }
  double next_double(const char* what = "a number") {
    std::string_view t = next_token(what);
    if (!t.empty() && t.front() == '+') t.remove_prefix(1);
    double v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc::result_out_of_range)
      fail(std::string("number out of range for ") + what + ": '" + printable(t) + "'");
    if (ec != std::errc() || p != t.data() + t.size())
      fail(std::string("expected ") + what + ", found '" + printable(t) + "'");
    return v;
  }
  /// Rest of the current line (without the newline); moves to the next line.
  std::string_view rest_of_line() {
    const std::size_t start = pos_;
    while (pos_ < data_.size() && data_[pos_] != '\n') ++pos_;
    std::string_view s = data_.substr(start, pos_ - start);
    if (pos_ < data_.size()) {
      ++pos_;
      ++line_;
    }
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  }
  void skip_line() { (void)rest_of_line(); }
  /// Fails unless the next token equals `keyword`.
  void expect(std::string_view keyword) {
    const std::string_view t = next_token(std::string(keyword).c_str());
    if (t != keyword) fail("expected '" + std::string(keyword) + "', found '" + printable(t) + "'");
  }

  /// Refuses a header count that cannot fit in the remaining bytes when each item takes at least
  /// `min_bytes_each` bytes; also refuses negative counts and counts above `max_count`.
  std::size_t check_count(std::int64_t count, std::size_t min_bytes_each, const char* what,
                          std::int64_t max_count = (std::int64_t{1} << 31) - 1) const {
    if (count < 0) fail(std::string("negative ") + what + " count " + std::to_string(count));
    if (count > max_count)
      fail(std::string("absurd ") + what + " count " + std::to_string(count) + " (limit " + std::to_string(max_count) +
           ")");
    if (min_bytes_each > 0 && static_cast<std::uint64_t>(count) > remaining() / min_bytes_each)
      fail("header claims " + std::to_string(count) + " " + what + " but only " + std::to_string(remaining()) +
           " bytes remain (truncated file or corrupt count)");
    return static_cast<std::size_t>(count);
  }

  /// Next token as an integer in [lo, hi]; fails naming `what` and the bounds otherwise.
  std::int64_t next_int_in(std::int64_t lo, std::int64_t hi, const char* what) {
    const std::int64_t v = next_int(what);
    if (v < lo || v > hi)
      fail(std::string(what) + " " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]");
    return v;
  }

  /// Current character without consuming it ('\0' at the end).
  char peek() const { return pos_ < data_.size() ? data_[pos_] : '\0'; }
  /// Consumes one character (counting lines); fails at the end.
  char get(const char* what = "a character") {
    if (pos_ >= data_.size()) fail(std::string("unexpected end of file (expected ") + what + ")");
    const char c = data_[pos_++];
    if (c == '\n') ++line_;
    return c;
  }
  /// Moves to the next occurrence of `c` (not consuming it); false (at the end) if there is none.
  bool skip_to(char c) {
    const std::size_t at = data_.find(c, pos_);
    if (at == std::string_view::npos) {
      advance(remaining());
      return false;
    }
    advance(at - pos_);
    return true;
  }
  /// Moves just past the next occurrence of `marker`; fails naming `what` if there is none.
  void skip_past(std::string_view marker, const std::string& what) {
    const std::size_t at = data_.find(marker, pos_);
    if (at == std::string_view::npos) fail("unexpected end of file: missing " + what);
    advance(at + marker.size() - pos_);
  }
  /// Position of the next occurrence of `marker` from the cursor (npos if none); does not move.
  std::size_t find(std::string_view marker) const { return data_.find(marker, pos_); }

  /// Binary read of one value; `swap` reverses the byte order (foreign-endian files).
  template <class T>
  T read_binary(bool swap, const char* what = "binary data") {
    if (remaining() < sizeof(T)) fail_binary(std::string("unexpected end of file in ") + what);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    if (swap) v = byteswap_value(v);
    return v;
  }
  std::string_view read_bytes(std::size_t n, const char* what = "binary data") {
    if (remaining() < n) fail_binary(std::string("unexpected end of file in ") + what);
    const std::string_view s = data_.substr(pos_, n);
    pos_ += n;  // binary bytes: newlines in them are not lines
    return s;
  }
  /// Moves forward `n` bytes, counting newlines passed.
  void advance(std::size_t n) {
    if (remaining() < n) fail("unexpected end of file");
    const char* p = data_.data() + pos_;
    for (std::size_t i = 0; i < n; ++i) line_ += p[i] == '\n';
    pos_ += n;
  }
  bool starts_with(std::string_view s) const { return data_.substr(pos_).starts_with(s); }

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
  /// Shortened, printable form of a token for error messages.
  static std::string printable(std::string_view t) {
    std::string s;
    for (char c : t.substr(0, 40))
      s += (static_cast<unsigned char>(c) >= 32 && static_cast<unsigned char>(c) < 127) ? c : '?';
    if (t.size() > 40) s += "...";
    return s;
  }
  template <class T>
  static T byteswap_value(T v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(b[i], b[sizeof(T) - 1 - i]);
    std::memcpy(&v, b, sizeof(T));
    return v;
  }

 private:
  std::string_view data_;
  std::string name_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
  char comment_ = '\0';
};

/// Splits one line into its whitespace-separated tokens (views into `line`).
inline std::vector<std::string_view> split_tokens(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && TextCursor::is_space(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !TextCursor::is_space(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

}  // namespace xpd::io::detail
