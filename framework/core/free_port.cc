// framework/core/free_port.cc: see free_port.h.
#include "framework/core/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace {

// Binds 127.0.0.1:`port` (0: the kernel's choice) and returns the bound port, or -1.
int TryBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  close(fd);
  return bound;
}

constexpr int kLowestPort = 10000;  // Above the ports services are commonly given.
constexpr int kMinRoom = 2000;      // A band narrower than this is not used.

}  // namespace

std::pair<int, int> EphemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0, last = 0;
  if (in >> first >> last && first >= 1 && last <= 65535 && first <= last) {
    return {first, last};
  }
  return {32768, 60999};
}

absl::StatusOr<std::vector<int>> PickFreePorts(int n) {
  if (n < 0 || n > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("PickFreePorts: n = ", n, " not in [0, 1024]"));
  }
  struct Picker {
    absl::Mutex mu;
    std::set<int> given ABSL_GUARDED_BY(mu);  // Every port this process handed out.
    std::mt19937 rng ABSL_GUARDED_BY(mu){std::random_device{}()};
  };
  static Picker* picker = new Picker;  // Never destroyed.
  absl::MutexLock lock(&picker->mu);
  std::set<int>* given = &picker->given;
  std::mt19937* rng = &picker->rng;

  const auto [first, last] = EphemeralPortRange();
  int lo = 0, hi = -1;  // The band to draw from; empty: the kernel's choice.
  if (first - kLowestPort >= kMinRoom) {
    lo = kLowestPort;
    hi = first - 1;
  } else if (65535 - last >= kMinRoom) {
    lo = last + 1;
    hi = 65535;
  }
  std::vector<int> ports;
  std::uniform_int_distribution<int> draw(lo, std::max(lo, hi));
  for (int attempt = 0; static_cast<int>(ports.size()) < n; ++attempt) {
    if (attempt > 100 * n + 1000) {
      return absl::UnavailableError(absl::StrCat("picking ", n, " free ports on 127.0.0.1: only ",
                                                 ports.size(), " found: ", std::strerror(errno)));
    }
    const int port = TryBind(hi >= lo ? draw(*rng) : 0);
    if (port > 0 && given->insert(port).second) ports.push_back(port);
  }
  return ports;
}

}  // namespace tandem
