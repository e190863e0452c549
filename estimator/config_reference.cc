// estimator/config_reference.cc: JobConfigReference (job_config.h), the job config's
// keys as Markdown, from the parser's own table (internal/job_keys.h).
#include <string>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/job_keys.h"
#include "estimator/job_config.h"

namespace tandem {
namespace {

using internal::Field;

std::string Quoted(const std::string& s) { return absl::StrCat("`\"", s, "\"`"); }

// The type and the default value (as a default JobConfig holds it) of `f`.
std::pair<std::string, std::string> TypeAndDefault(const Field& f) {
  return std::visit(
      [](auto* p) -> std::pair<std::string, std::string> {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return {"integer", absl::StrCat("`", *p, "`")};
        } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
          return {"integer", p->has_value() ? absl::StrCat("`", **p, "`") : "unset"};
        } else if constexpr (std::is_same_v<T, double>) {
          return {"float", absl::StrCat("`", *p, "`")};
        } else if constexpr (std::is_same_v<T, bool>) {
          return {"boolean", *p ? "`true`" : "`false`"};
        } else if constexpr (std::is_same_v<T, std::string>) {
          return {"string", Quoted(*p)};
        } else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) {
          return {"table of strings", p->empty() ? "`{}`" : "(set)"};
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return {"array of strings", p->empty() ? "`[]`" : "(set)"};
        } else {
          return {"array", p->empty() ? "`[]`" : "(set)"};
        }
      },
      f.target);
}

// What values `f` accepts beyond its type.
std::string Allowed(const Field& f) {
  if (!f.choices.empty()) {
    std::vector<std::string> quoted;
    for (const char* c : f.choices) quoted.push_back(Quoted(c));
    return absl::StrJoin(quoted, ", ");
  }
  const bool has_min = f.min != internal::kNoMin;
  const bool has_max = f.max != internal::kNoMax;
  // The thread bound depends on the machine: say the rule, not this machine's value.
  const std::string max =
      f.max == internal::MaxThreads() ? "2 per core (at least 8)" : absl::StrCat(f.max);
  if (has_min && has_max) return absl::StrCat(f.min, " to ", max);
  if (has_min) return absl::StrCat(">= ", f.min);
  if (has_max) return absl::StrCat("<= ", max);
  return "";
}

}  // namespace

std::string JobConfigReference() {
  JobConfig defaults;
  std::string out =
      "# Job config reference\n\n"
      "Every key of a job config's typed sections, with its type, its default and the values "
      "it accepts. Generated from the parser's own key table "
      "(`estimator/internal/job_keys.cc`) by `trainer config_reference`; the test "
      "`config_reference_test` fails when this file and the parser differ. What each key "
      "does: `estimator/job_config.h` and [config.md](config.md); [distribute] in "
      "[clusters.md](clusters.md). An unknown key, a wrong type or a value outside these "
      "bounds is a config error naming the key and where its value came from.\n\n"
      "Decoded by their own rules, not listed here: `[model.params]` (the model's keys; "
      "a key no model reads is an error), `[features.<name>]` (feature columns, "
      "[config.md](config.md)), `[cluster]` and `[task]` (TF_CONFIG's `cluster` and "
      "`task` in TOML, [clusters.md](clusters.md)).\n";
  for (const internal::Section& s : internal::Sections(defaults)) {
    absl::StrAppend(&out, "\n## [", s.name,
                    "]\n\n| key | type | default | accepts |\n|---|---|---|---|\n");
    for (const Field& f : s.fields) {
      auto [type, value] = TypeAndDefault(f);
      absl::StrAppend(&out, "| `", f.key, "` | ", type, " | ", value, " | ", Allowed(f), " |\n");
    }
  }
  return out;
}

}  // namespace tandem
