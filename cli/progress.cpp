#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace xpd::cli {

Progress::Progress(std::string label, int total)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

void Progress::update(int done, const std::string& detail) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double frac = static_cast<double>(done) / total_;
  const double eta = done > 0 ? elapsed * (total_ - done) / done : 0.0;
  if (tty_) {
    constexpr int width = 30;
    const int filled = static_cast<int>(frac * width + 0.5);
    std::fprintf(stderr, "\r%s [%s%s] %d/%d %3.0f%% elapsed %.1fs eta %.1fs %s\x1b[K", label_.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done, total_, 100 * frac,
                 elapsed, eta, detail.c_str());
  } else {
    // Plain lines: at most one every 2 s, plus the last one, to keep logs short.
    if (done < total_ && std::chrono::duration<double>(now - last_print_).count() < 2.0 && done > 1) return;
    std::fprintf(stderr, "%s %d/%d (%.0f%%), elapsed %.1f s, eta %.1f s %s\n", label_.c_str(), done, total_, 100 * frac,
                 elapsed, eta, detail.c_str());
  }
  last_print_ = now;
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace xpd::cli
