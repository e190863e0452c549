// framework/distributed/transport_security.cc
#include "framework/distributed/transport_security.h"

#include <cstdlib>

namespace tandem {

TransportSecurity SecurityFromEnvironment() {
  TransportSecurity security;
  if (const char* token = std::getenv("TANDEM_CLUSTER_TOKEN"); token != nullptr) {
    security.token = token;
  }
  return security;
}

}  // namespace tandem
