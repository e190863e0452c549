// tests/util/free_port.h
//
// PickFreePort: an ephemeral TCP port on 127.0.0.1 that was free a moment ago (the
// kernel picks it for a socket bound to port 0, which is then closed). Tests use it
// to write cluster specs before starting the servers that bind them.
#ifndef TANDEM_TESTS_UTIL_FREE_PORT_H_
#define TANDEM_TESTS_UTIL_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "glog/logging.h"

namespace tandem::testing {

inline int PickFreePort() {
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
  return ntohs(addr.sin_port);
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_FREE_PORT_H_
