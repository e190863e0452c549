// estimator/internal/toml_limits.h
//
// Bounds that a TOML document (a job config, a --set override) must respect before
// toml++ parses it. toml++ bounds nested arrays and inline tables itself (256 levels)
// but follows dotted keys and table headers ("a.b.c = 1", "[a.b.c]") recursively, so a
// key of a hundred thousand segments overflows the stack. A document whose keys have
// more than kMaxTomlKeySegments segments is refused with its line and column.
//
// The check is lexical: outside strings and comments, no run of more than
// kMaxTomlKeySegments - 1 dots may stand between two of "=", ",", "[", "]", "{", "}"
// or a line end. A value holds at most one dot there (a float or a time), so valid
// documents with sane keys always pass.
//
// Thread safety: pure functions.
#ifndef TANDEM_ESTIMATOR_INTERNAL_TOML_LIMITS_H_
#define TANDEM_ESTIMATOR_INTERNAL_TOML_LIMITS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::internal {

inline constexpr int kMaxTomlKeySegments = 32;

// INVALID_ARGUMENT "<source>:<line>:<column>: a key has more than 32 dotted
// segments" when `text` breaks the bound; OK otherwise (also for text that is not
// valid TOML: the parser reports that).
absl::Status CheckTomlKeyDepth(absl::string_view text, absl::string_view source_name);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_TOML_LIMITS_H_
