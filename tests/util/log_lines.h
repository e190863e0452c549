// tests/util/log_lines.h
//
// LogLines: a glog sink that keeps every line logged, from any thread, while it lives,
// with its severity, so a test can check what a component reported and how loudly.
// Within: polls a condition (such as a line having been logged by another thread)
// until it holds or a bound passes.
#ifndef TANDEM_TESTS_UTIL_LOG_LINES_H_
#define TANDEM_TESTS_UTIL_LOG_LINES_H_

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace tandem::testing {

class LogLines : public google::LogSink {
 public:
  LogLines() { google::AddLogSink(this); }
  ~LogLines() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char*, const char*, int,
            const google::LogMessageTime&, const char* message, size_t length) override {
    absl::MutexLock lock(&mu_);
    lines_.emplace_back(severity, std::string(message, length));
  }
  // Lines containing `part`; with `severity` >= 0, only lines logged at that severity.
  int Count(const std::string& part, int severity = -1) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [s, l] : lines_) {
      n += absl::StrContains(l, part) && (severity < 0 || s == severity) ? 1 : 0;
    }
    return n;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<int, std::string>> lines_;
};

// True once done() is, checked every 50 ms for at most `secs` seconds.
template <typename F>
bool Within(double secs, F done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_LOG_LINES_H_
