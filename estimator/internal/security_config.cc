// estimator/internal/security_config.cc
#include "estimator/internal/security_config.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"

namespace tandem::internal {
namespace {

bool NamesTlsFiles(const SecuritySection& s) {
  return !s.tls_cert.empty() || !s.tls_key.empty() || !s.tls_ca.empty();
}

}  // namespace

absl::Status CheckSecurity(const JobConfig& c,
                           const std::function<std::string(const std::string&)>& where) {
  const SecuritySection& s = c.security;
  if (NamesTlsFiles(s)) {
    for (auto [key, value] : {std::pair{"tls_cert", &s.tls_cert}, std::pair{"tls_key", &s.tls_key},
                              std::pair{"tls_ca", &s.tls_ca}}) {
      if (value->empty()) {
        return ConfigError(absl::StrCat(
            where("security"), ": [security] ", key,
            " is missing: tls_cert, tls_key and tls_ca go together (a cluster's TLS is mutual: "
            "each task proves itself with its certificate and trusts only the CA's)"));
      }
    }
  } else if (!s.tls_server_name.empty()) {
    return ConfigError(absl::StrCat(where("security.tls_server_name"),
                                    ": [security] tls_server_name needs TLS (tls_cert, tls_key "
                                    "and tls_ca)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TransportSecurity> SecurityFor(const JobConfig& c) {
  TransportSecurity security = SecurityFromEnvironment();
  const SecuritySection& s = c.security;
  if (NamesTlsFiles(s)) {
    security.cert_file = s.tls_cert;
    security.key_file = s.tls_key;
    security.ca_file = s.tls_ca;
    security.server_name = s.tls_server_name;
  }
  security.health_port = static_cast<int>(s.health_port);
  absl::Status files = CheckTlsFiles(security, /*cluster_peer=*/true);
  if (!files.ok()) {
    return ConfigError(absl::StrCat(
        NamesTlsFiles(s) ? "[security]: " : "$TANDEM_TLS_CERT, $TANDEM_TLS_KEY, $TANDEM_TLS_CA: ",
        files.message()));
  }
  return security;
}

}  // namespace tandem::internal
