#include "framework/core/env.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"

namespace tandem::env {
namespace {

absl::Status ErrnoError(absl::string_view call, const std::string& path, int err) {
  std::string msg = absl::StrCat(call, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case ENOSPC:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string DirName(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

double MemoryLimitBytes() {
  double limit =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    limit = std::min(limit, static_cast<double>(as.rlim_cur));
  }
  return limit;
}

int UsableCpus() {
  int cpus = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  // cgroup v2: "max 100000" (no quota) or "<quota> <period>" in microseconds.
  std::ifstream max_file("/sys/fs/cgroup/cpu.max");
  std::string quota;
  int64_t period = 0;
  if (max_file >> quota >> period && quota != "max" && period > 0) {
    char* end = nullptr;
    const long long q = std::strtoll(quota.c_str(), &end, 10);
    if (end != quota.c_str() && q > 0) {
      cpus = std::min<int64_t>(cpus, (q + period - 1) / period);
    }
  }
  return std::max(1, cpus);
}

bool AppendBounded(std::string* out, absl::string_view data, size_t max_bytes) {
  const size_t need = out->size() + data.size();
  if (need > max_bytes) return false;
  if (need > out->capacity()) {
    out->reserve(std::min(max_bytes, std::max(need, out->capacity() + out->capacity() / 2)));
  }
  out->append(data.data(), data.size());
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) {
  static const uint64_t default_max = static_cast<uint64_t>(MemoryLimitBytes() / 4);
  if (max_bytes == 0) max_bytes = default_max;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) <= max_bytes) {
    out.reserve(static_cast<size_t>(st.st_size));
  }
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError("read", path, err);
    }
    if (n == 0) break;
    if (!AppendBounded(&out, absl::string_view(buf, static_cast<size_t>(n)), max_bytes)) {
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": the file holds more than ", max_bytes >> 20,
                       " MiB (a quarter of the memory this process may use), or never ends"));
    }
  }
  ::close(fd);
  return out;
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::string tmp = absl::StrCat(path, ".tmp.", rng());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", tmp, errno);
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoError("write", tmp, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoError("fsync", tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError("rename", path, err);
  }
  int dfd = ::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<int64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("stat", path, errno);
  return static_cast<int64_t>(st.st_size);
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec && !IsDirectory(path)) return ErrnoError("mkdir", path, ec.value());
  return absl::OkStatus();
}

absl::Status RenameFile(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("rename(", from, ", ", to, ") failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status DeleteFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return ErrnoError("unlink", path, errno);
  return absl::OkStatus();
}

absl::Status DeleteRecursively(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return ErrnoError("remove_all", path, ec.value());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  std::error_code ec;
  std::vector<std::string> names;
  for (auto it = std::filesystem::directory_iterator(path, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return ErrnoError("opendir", path, ec.value());
  std::sort(names.begin(), names.end());
  return names;
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  if (a.back() == '/') return absl::StrCat(a, b);
  return absl::StrCat(a, "/", b);
}

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

std::string Dirname(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = JoinPath(base && *base ? base : "/tmp", absl::StrCat(prefix, ".XXXXXX"));
  if (::mkdtemp(templ.data()) == nullptr) return ErrnoError("mkdtemp", templ, errno);
  return templ;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tandem::env
