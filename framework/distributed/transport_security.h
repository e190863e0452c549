// framework/distributed/transport_security.h
//
// TransportSecurity: the cluster token and TLS files that a task's server and its
// clients share, and the plaintext health-check port that stands beside a TLS port;
// beside it, the default number of connections per remote task
// (kDefaultChannelsPerTask). Plain data, free of gRPC types, so that server.h,
// grpc_session.h and the layers above name it without seeing gRPC; rpc/grpc_util.h
// turns it into gRPC credentials (and checks the files: readable PEM, the key
// matching the certificate, the certificate signed by the CA).
//
// Mutual TLS on a cluster: every task presents cert_file to the others, as a server
// and as a client, and trusts only certificates signed by ca_file; so the certificate
// needs both extended key usages (serverAuth and clientAuth) and a subjectAltName that
// matches the name the clients check: the host of each task's address, or
// server_name for every task when it is set (one certificate for a whole cluster).
//
// Thread safety: value type.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_TRANSPORT_SECURITY_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_TRANSPORT_SECURITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

// gRPC connections a task keeps to each other task (GrpcWorkerCache).
inline constexpr int kDefaultChannelsPerTask = 4;

struct TransportSecurity {
  std::string token;      // Empty: RPCs carry no token and servers ask for none.
  std::string cert_file;  // PEM; server: its certificate; client: its client certificate.
  std::string key_file;   // PEM private key for cert_file.
  std::string ca_file;    // PEM roots; server: when set, clients must present a certificate.
  // Clients check the server's certificate against this name instead of the host of
  // the address they dial ("" = the host).
  std::string server_name;
  // A Server also answers grpc.health.v1 on this plaintext port (0 = none) and
  // nothing else there: Kubernetes' gRPC probes speak neither TLS nor tokens.
  int health_port = 0;
  bool tls() const { return !cert_file.empty() || !ca_file.empty(); }
};

// TransportSecurity from the environment: the token of $TANDEM_CLUSTER_TOKEN, the TLS
// files of $TANDEM_TLS_CERT, $TANDEM_TLS_KEY and $TANDEM_TLS_CA and the name of
// $TANDEM_TLS_SERVER_NAME (each empty when unset).
TransportSecurity SecurityFromEnvironment();

// The PEM contents of the TLS files ("" for a file not given).
struct TlsFiles {
  std::string cert, key, ca;
};

// Reads the TLS files of `security` once and checks them (empty when TLS is off): each
// one readable PEM, the certificate and key given together and matching, the
// certificate currently valid and, with a CA, signed by it. With `cluster_peer` (a
// task of a mutual-TLS cluster, which serves and calls the others with one
// certificate) all three files are required and the certificate must allow both TLS
// server and client use. Errors are INVALID_ARGUMENT naming the file and what is wrong.
absl::StatusOr<TlsFiles> ReadTlsFiles(const TransportSecurity& security, bool cluster_peer);
// ReadTlsFiles' verdict alone.
absl::Status CheckTlsFiles(const TransportSecurity& security, bool cluster_peer);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_TRANSPORT_SECURITY_H_
