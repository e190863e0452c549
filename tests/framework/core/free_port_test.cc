// PickFreePorts: distinct, bindable ports from outside the kernel's ephemeral range.
#include "framework/core/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(FreePortTest, DistinctBindablePortsOutsideTheEphemeralRange) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(64);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 64u);
  const auto [first, last] = EphemeralPortRange();
  const bool room_outside = first - 10000 >= 2000 || 65535 - last >= 2000;
  std::set<int> seen;
  for (int port : *ports) {
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " given twice";
    if (room_outside) {
      EXPECT_TRUE(port < first || port > last)
          << port << " is inside the ephemeral range " << first << "-" << last;
    }
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << port;
    close(fd);
  }
  // A second call never repeats a port of the first.
  absl::StatusOr<std::vector<int>> more = PickFreePorts(8);
  ASSERT_TRUE(more.ok());
  for (int port : *more) EXPECT_EQ(seen.count(port), 0u) << port;
}

TEST(FreePortTest, CountOutOfRangeIsRefused) {
  EXPECT_EQ(PickFreePorts(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PickFreePorts(1025).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PickFreePorts(0).ok());
}

}  // namespace
}  // namespace tandem
