// tests/integration/logged_losses.h
//
// The losses a trainer's LoggingTensorHook wrote to its log ("loss = 0.0381, step =
// 100"), for tests that read a task's progress from the outside.
#ifndef TANDEM_TESTS_INTEGRATION_LOGGED_LOSSES_H_
#define TANDEM_TESTS_INTEGRATION_LOGGED_LOSSES_H_

#include <cstdint>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace tandem::testing {

// Every {global step, loss} in `log`, in the order logged; nan and inf included.
inline std::vector<std::pair<int64_t, double>> LoggedLosses(const std::string& log) {
  static const std::regex re(R"(loss = (-?nan|-?inf|[-+0-9.eE]+), step = (\d+))");
  std::vector<std::pair<int64_t, double>> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    out.emplace_back(std::stoll((*it)[2]), std::stod((*it)[1]));
  }
  return out;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_LOGGED_LOSSES_H_
