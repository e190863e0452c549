// estimator/internal/job_keys.h
//
// The typed keys of a job config (estimator/job_config.h): [model] name, [data], [run],
// [train], [eval], [export], [distribute] and [security], as one table of fields bound
// to a JobConfig's members, each with its type, bounds and allowed values. The parser
// decodes with it, ToToml prints from it, and the config reference
// (JobConfigReference, docs/config-reference.md) is generated from it, so a key
// cannot be parsed without being documented. [cluster], [task], [model.params] and
// [features] are decoded separately.
//
// Thread safety: pure functions.
#ifndef TANDEM_ESTIMATOR_INTERNAL_JOB_KEYS_H_
#define TANDEM_ESTIMATOR_INTERNAL_JOB_KEYS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "estimator/job_config.h"

namespace tandem::internal {

inline constexpr int64_t kNoMin = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
// Rows in one batch: beyond this a batch of even small rows needs gigabytes.
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 20;

// Threads a pool may ask for: two per core of this machine, at least 8. Every inter-op
// thread may run an OpenMP team of intra-op threads, each reserving a stack and a
// malloc arena, so thousands of them end in an uncaught std::system_error or a libgomp
// abort; 64 x 64 already failed under a 6 GiB address-space limit.
int64_t MaxThreads();

// One typed key of a section.
struct Field {
  const char* key;
  std::variant<int64_t*, std::optional<int64_t>*, double*, bool*, std::string*,
               std::map<std::string, std::string>*, std::vector<std::string>*,
               std::vector<ParamValue>*>
      target;
  int64_t min = kNoMin;              // Integers: smallest allowed value.
  std::vector<const char*> choices;  // Strings: allowed values; empty = any.
  int64_t max = kNoMax;              // Integers: largest allowed value.
};
struct Section {
  const char* name;
  std::vector<Field> fields;
};

// The sections with typed fields, bound to `c`.
std::vector<Section> Sections(JobConfig& c);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_JOB_KEYS_H_
