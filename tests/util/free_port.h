// tests/util/free_port.h
//
// PickFreePort: an ephemeral TCP port on 127.0.0.1 that was free a moment ago (the
// kernel picks it for a socket bound to port 0, which is then closed; never one this
// process picked before). Tests use it
// to write cluster specs before starting the servers that bind them.
// ListenOnLoopback: a listening socket on such a port, for raw TCP peers.
#ifndef TANDEM_TESTS_UTIL_FREE_PORT_H_
#define TANDEM_TESTS_UTIL_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <set>

#include "glog/logging.h"

namespace tandem::testing {

// Never the same port twice in one process: the kernel may hand a port it just got
// back to the next bind, and two tasks of one cluster spec on one port made a ps fail
// to listen while the chief found the other ps twice.
inline int PickFreePort() {
  static std::mutex mu;
  static std::set<int> picked;
  std::lock_guard<std::mutex> lock(mu);
  for (int attempt = 0;; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    CHECK_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    CHECK_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    close(fd);
    const int port = ntohs(addr.sin_port);
    if (picked.insert(port).second) return port;
    CHECK_LT(attempt, 1000) << "no ephemeral port left that this process has not used";
  }
}

// A TCP listener on 127.0.0.1 at an ephemeral port; connect to `addr` (benchmarks'
// raw-socket peers).
struct LoopbackListener {
  int fd = -1;
  sockaddr_in addr{};
};

inline LoopbackListener ListenOnLoopback(int backlog) {
  LoopbackListener l;
  l.fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK_GE(l.fd, 0);
  l.addr.sin_family = AF_INET;
  l.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(bind(l.fd, reinterpret_cast<sockaddr*>(&l.addr), sizeof(l.addr)), 0);
  socklen_t len = sizeof(l.addr);
  CHECK_EQ(getsockname(l.fd, reinterpret_cast<sockaddr*>(&l.addr), &len), 0);
  CHECK_EQ(listen(l.fd, backlog), 0);
  return l;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_FREE_PORT_H_
