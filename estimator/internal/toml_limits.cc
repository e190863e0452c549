// estimator/internal/toml_limits.cc
#include "estimator/internal/toml_limits.h"

#include "absl/strings/str_cat.h"

namespace tandem::internal {

absl::Status CheckTomlKeyDepth(absl::string_view text, absl::string_view source_name) {
  int line = 1, column = 0, dots = 0;
  size_t i = 0;
  const auto starts = [&](absl::string_view s) { return text.substr(i, s.size()) == s; };
  // Skips a string starting at i (after its opening quote(s)) up to its end.
  const auto skip_string = [&](absl::string_view close, bool escapes) {
    while (i < text.size() && !starts(close)) {
      if (text[i] == '\n') ++line;
      if (escapes && text[i] == '\\') ++i;
      ++i;
    }
    i += close.size();
  };
  while (i < text.size()) {
    const char c = text[i];
    ++column;
    if (starts("\"\"\"") || starts("'''")) {
      const absl::string_view close = text.substr(i, 3);
      i += 3;
      skip_string(close, close[0] == '"');
      continue;
    }
    if (c == '"' || c == '\'') {
      ++i;
      skip_string(absl::string_view(&text[i - 1], 1), c == '"');
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '\n') {
      ++line;
      column = 0;
      dots = 0;
    } else if (c == '=' || c == ',' || c == '[' || c == ']' || c == '{' || c == '}') {
      dots = 0;
    } else if (c == '.' && ++dots >= kMaxTomlKeySegments) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ":", line, ":", column,
                                                     ": a key has more than ", kMaxTomlKeySegments,
                                                     " dotted segments"));
    }
    ++i;
  }
  return absl::OkStatus();
}

}  // namespace tandem::internal
