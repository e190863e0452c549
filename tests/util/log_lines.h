// tests/util/log_lines.h
//
// LogLines: a glog sink that keeps every line logged, from any thread, while it lives,
// with its severity, so a test can check what a component reported and how loudly.
#ifndef TANDEM_TESTS_UTIL_LOG_LINES_H_
#define TANDEM_TESTS_UTIL_LOG_LINES_H_

#include <string>
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

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_LOG_LINES_H_
