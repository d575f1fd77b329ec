#pragma once
// Typed errors of xpd. Every user-facing failure (bad file, bad scene, singular matrix, NaN in a
// step) is one of these, with a message that names the cause and where it was found. xpd never
// aborts on bad input; callers (CLI, Python) catch xpd::Error and report what().
#include <cstddef>
#include <stdexcept>
#include <string>

namespace xpd {

/// Base of every xpd error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A file could not be read or parsed. `file` is the path (or a name for in-memory data);
/// `line` is 1-based, 0 when the position is not a line (binary data, whole-file checks).
/// what() reads "FILE:LINE: MESSAGE" (or "FILE: MESSAGE" without a line).
class IoError : public Error {
 public:
  IoError(std::string file, std::size_t line, std::string message);
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  std::size_t line_;
  std::string message_;
};

/// A mesh is geometrically or topologically invalid (inverted or degenerate tet, NaN coordinate,
/// index out of range, duplicate vertex). what() names the source, the element and the cause.
class MeshError : public Error {
 public:
  using Error::Error;
};

/// A scene file is invalid. `path` is the JSON pointer of the offending value ("/materials/0/mu").
class SceneError : public Error {
 public:
  SceneError(std::string file, std::string json_path, std::string message);
  const std::string& json_path() const { return json_path_; }

 private:
  std::string json_path_;
};

/// A solve failed: non-SPD or singular matrix, non-finite values, unconstrained body.
class SolverError : public Error {
 public:
  using Error::Error;
};

/// A collision handler was given a state it must not start from (an intersecting surface), with
/// the two triangles named in what().
class CollisionError : public Error {
 public:
  using Error::Error;
};

/// The CUDA backend cannot run: not compiled in, no driver or device, not enough device memory, a
/// kernel image that does not match the device, or a failed CUDA call (what() quotes CUDA's message).
class GpuError : public Error {
 public:
  using Error::Error;
};

}  // namespace xpd
