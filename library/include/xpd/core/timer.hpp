#pragma once
// Wall-clock timers for per-frame statistics (the phases of Wang et al. 2021, Figure 4).
#include <chrono>

namespace xpd {

/// Monotonic stopwatch, milliseconds.
class Timer {
 public:
  Timer() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  /// Milliseconds since construction or the last restart().
  double elapsed_ms() const { return std::chrono::duration<double, std::milli>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

/// Accumulates the time between successive lap(slot) calls into `slot`:
/// `PhaseTimer t; ...local...; t.lap(local_ms); ...solve...; t.lap(solve_ms);`.
class PhaseTimer {
 public:
  /// Adds the time since the previous lap (or construction) to `slot` and restarts.
  void lap(double& slot) {
    slot += timer_.elapsed_ms();
    timer_.restart();
  }
  /// Restarts without charging anything.
  void skip() { timer_.restart(); }

 private:
  Timer timer_;
};

}  // namespace xpd
