// framework/distributed/transport_security.h
//
// TransportSecurity: the cluster token and TLS files that a task's server and its
// clients share; beside it, the default number of connections per remote task
// (kDefaultChannelsPerTask). Plain data, free of gRPC
// types, so that server.h, grpc_session.h and the layers above name it without
// seeing gRPC; rpc/grpc_util.h turns it into gRPC credentials.
//
// Thread safety: value type.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_TRANSPORT_SECURITY_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_TRANSPORT_SECURITY_H_

#include <string>

namespace tandem {

// gRPC connections a task keeps to each other task (GrpcWorkerCache).
inline constexpr int kDefaultChannelsPerTask = 4;

struct TransportSecurity {
  std::string token;      // Empty: RPCs carry no token and servers ask for none.
  std::string cert_file;  // PEM; server: its certificate; client: its client certificate.
  std::string key_file;   // PEM private key for cert_file.
  std::string ca_file;    // PEM roots; server: when set, clients must present a certificate.
  bool tls() const { return !cert_file.empty() || !ca_file.empty(); }
};

// TransportSecurity with the token of $TANDEM_CLUSTER_TOKEN (empty when unset).
TransportSecurity SecurityFromEnvironment();

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_TRANSPORT_SECURITY_H_
