// estimator/internal/security_config.h
//
// The [security] rules of estimator/job_config.h and the TransportSecurity a job's
// tasks use. CheckSecurity refuses, as config errors naming the key: some but not all
// of tls_cert, tls_key and tls_ca (a cluster's TLS is mutual: each task proves itself
// with its certificate and trusts only the CA's), and tls_server_name without them.
// SecurityFor takes the token from $TANDEM_CLUSTER_TOKEN and the TLS settings from
// [security], or, when [security] names no TLS file, from $TANDEM_TLS_CERT,
// $TANDEM_TLS_KEY, $TANDEM_TLS_CA and $TANDEM_TLS_SERVER_NAME; then checks the files
// (CheckTlsFiles as a cluster peer: readable, matching, signed by the CA, usable as
// server and client), so a bad file stops the task at once with the file named.
//
// Thread safety: pure functions (SecurityFor reads the environment).
#ifndef TANDEM_ESTIMATOR_INTERNAL_SECURITY_CONFIG_H_
#define TANDEM_ESTIMATOR_INTERNAL_SECURITY_CONFIG_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "estimator/job_config.h"
#include "framework/distributed/transport_security.h"

namespace tandem::internal {

absl::Status CheckSecurity(const JobConfig& c,
                           const std::function<std::string(const std::string&)>& where);

absl::StatusOr<TransportSecurity> SecurityFor(const JobConfig& c);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_SECURITY_CONFIG_H_
