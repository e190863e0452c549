// framework/core/free_port.h
//
// PickFreePorts: TCP ports on 127.0.0.1 that were free a moment ago, for cluster specs
// written before the servers that bind them start (`trainer launch`, the multi-process
// tests). The ports come from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), chosen at random and checked by binding
// them: the kernel never hands those ports to another socket bound to port 0 or to an
// outgoing connection, so a port picked here stays free until its task binds it unless
// another picker chooses the same one (random over thousands of ports). A port picked
// from inside the ephemeral range was taken, under load, by a client connection of a
// neighbouring job between the pick and the task's bind. Where the range leaves too
// little room below it, ports above it are used, and failing that, the kernel's choice.
//
// Thread safety: safe; a process never gets the same port twice.
#ifndef TANDEM_FRAMEWORK_CORE_FREE_PORT_H_
#define TANDEM_FRAMEWORK_CORE_FREE_PORT_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

// `n` distinct ports (0 <= n <= 1024), each bindable on 127.0.0.1 when returned.
absl::StatusOr<std::vector<int>> PickFreePorts(int n);

// The kernel's ephemeral port range [first, last] (32768-60999 where it cannot be read).
std::pair<int, int> EphemeralPortRange();

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_CORE_FREE_PORT_H_
