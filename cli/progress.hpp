#pragma once
// Progress reporting for long CLI runs: a redrawn bar with ETA on a terminal, plain lines
// ("frame 3/20 (15%), elapsed 1.2 s, eta 6.8 s") when stderr is a pipe or file.
#include <chrono>
#include <string>

namespace xpd::cli {

class Progress {
 public:
  Progress(std::string label, int total);
  /// Reports that `done` of `total` units are complete; `detail` is appended (e.g. "12 it").
  void update(int done, const std::string& detail = {});
  /// Ends the bar (newline on a terminal).
  void finish();

 private:
  std::string label_;
  int total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace xpd::cli
