// tests/util/free_port.h
//
// PickFreePort: a TCP port on 127.0.0.1 that was free a moment ago, below the kernel's
// ephemeral range (tandem::PickFreePorts; never one this process picked before). Tests
// use it to write cluster specs before starting the servers that bind them.
// ListenOnLoopback: a listening socket on a port the kernel picks, for raw TCP peers.
#ifndef TANDEM_TESTS_UTIL_FREE_PORT_H_
#define TANDEM_TESTS_UTIL_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "framework/core/free_port.h"
#include "glog/logging.h"

namespace tandem::testing {

inline int PickFreePort() {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1);
  CHECK(ports.ok()) << ports.status();
  return ports->front();
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
