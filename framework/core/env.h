// framework/core/env.h
//
// Env is tandem's window on the filesystem: whole-file reads, atomic writes (temporary
// file, fsync, rename, directory fsync), directory listing and creation. Every error
// names the path and the failing call.
//
// Thread safety: all functions are safe to call concurrently; concurrent writers of
// the same path leave one complete version (last rename wins).
#ifndef TANDEM_FRAMEWORK_CORE_ENV_H_
#define TANDEM_FRAMEWORK_CORE_ENV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::env {

// The bytes this process may allocate: physical memory, or less under RLIMIT_AS.
double MemoryLimitBytes();
// The CPUs this process may run on at once: those of its affinity mask, or fewer under
// a cgroup v2 CPU quota (cpu.max, rounded up). At least 1.
int UsableCpus();
// Appends `data` to `out` unless `out` would then hold more than `max_bytes` (false,
// nothing appended). The buffer grows by half at most and never past `max_bytes`, so
// growing it never holds more than twice `max_bytes` at once.
bool AppendBounded(std::string* out, absl::string_view data, size_t max_bytes);
// The whole file. RESOURCE_EXHAUSTED naming it when it holds more than `max_bytes`
// (default: a quarter of MemoryLimitBytes(), read once), so an endless file (a
// device, a pipe) or a huge one ends in an error, not in std::bad_alloc.
absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes = 0);
// Writes `contents` to `path` so that readers see either the old file or the whole
// new one, never a prefix: writes "path.tmp.<random>", fsyncs it, renames it over
// `path` and fsyncs the directory.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents);
bool FileExists(const std::string& path);
bool IsDirectory(const std::string& path);
absl::StatusOr<int64_t> FileSize(const std::string& path);
// Creates `path` and its missing parents; OK if it already exists.
absl::Status MakeDirs(const std::string& path);
absl::Status DeleteFile(const std::string& path);
// Renames `from` to `to` (same filesystem), replacing `to`.
absl::Status RenameFile(const std::string& from, const std::string& to);
// Removes `path` recursively; OK if it does not exist.
absl::Status DeleteRecursively(const std::string& path);
// Names (not paths) of the entries of directory `path`, sorted.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);
std::string JoinPath(absl::string_view a, absl::string_view b);
// What follows the last '/' of `path` (all of it when there is none).
absl::string_view Basename(absl::string_view path);
// What precedes the last '/' of `path`: "." when there is none, "/" for a root entry.
std::string Dirname(absl::string_view path);
// A fresh directory under $TMPDIR (or /tmp) named after `prefix`.
absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix);
int64_t NowMicros();

}  // namespace tandem::env

#endif  // TANDEM_FRAMEWORK_CORE_ENV_H_
