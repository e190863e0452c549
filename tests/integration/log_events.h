// tests/integration/log_events.h
//
// The facts tandem's processes log in a stable form, "event=NAME key=value ...", one
// per line after glog's prefix (e.g. "event=training_finished global_step=6000
// local_steps=2011"). Tests read these instead of matching sentences, so rewording a
// message breaks no test. Values hold no spaces.
#ifndef TANDEM_TESTS_INTEGRATION_LOG_EVENTS_H_
#define TANDEM_TESTS_INTEGRATION_LOG_EVENTS_H_

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tandem::testing {

struct LogEvent {
  std::map<std::string, std::string> fields;  // Without "event".

  // The field's value, or "" when absent.
  std::string Str(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
  // The field's value as an integer, or -1 when absent or not a number.
  int64_t Int(const std::string& key) const {
    const std::string v = Str(key);
    if (v.empty() || v.find_first_not_of("-0123456789") != std::string::npos) return -1;
    return std::stoll(v);
  }
};

// Every "event=`name`" line of `log`, in order.
inline std::vector<LogEvent> Events(const std::string& log, const std::string& name) {
  std::vector<LogEvent> events;
  const std::string tag = "event=" + name;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(tag);
    if (at == std::string::npos || (at > 0 && line[at - 1] != ' ')) continue;
    const size_t end = at + tag.size();
    if (end < line.size() && line[end] != ' ') continue;  // Another event's longer name.
    LogEvent e;
    std::istringstream words(line.substr(end));
    for (std::string word; words >> word;) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) e.fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_LOG_EVENTS_H_
