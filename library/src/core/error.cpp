#include <xpd/core/error.hpp>

namespace xpd {
namespace {
std::string io_what(const std::string& file, std::size_t line, const std::string& message) {
  return line > 0 ? file + ":" + std::to_string(line) + ": " + message : file + ": " + message;
}
}  // namespace

IoError::IoError(std::string file, std::size_t line, std::string message)
    : Error(io_what(file, line, message)), file_(std::move(file)), line_(line), message_(std::move(message)) {}

SceneError::SceneError(std::string file, std::string json_path, std::string message)
    : Error(file + ": at " + (json_path.empty() ? std::string("/") : json_path) + ": " + message),
      json_path_(std::move(json_path)) {}

}  // namespace xpd
