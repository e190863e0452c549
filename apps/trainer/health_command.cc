// apps/trainer/health_command.cc
#include "apps/trainer/health_command.h"

#include <cstdio>

#include "apps/trainer/exit_codes.h"
#include "framework/distributed/health_port.h"

namespace tandem {

CLI::App* AddHealthCommand(CLI::App& app, HealthFlags& flags) {
  CLI::App* health = app.add_subcommand(
      "health",
      "check a task's health (grpc.health.v1 Check, as Kubernetes' gRPC probes do): prints "
      "SERVING or NOT_SERVING; exit 0 only when SERVING");
  health->add_option("--address", flags.address, "host:port of a task or of its health port")
      ->required();
  health->add_option("--timeout_ms", flags.timeout_ms, "how long to wait for the answer")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}))
      ->capture_default_str();
  health->add_option("--tls_ca", flags.security.ca_file, "PEM roots: the port speaks TLS");
  health->add_option("--tls_cert", flags.security.cert_file, "PEM client certificate (mutual TLS)");
  health->add_option("--tls_key", flags.security.key_file, "PEM private key of --tls_cert");
  health->add_option("--tls_server_name", flags.security.server_name,
                     "the name to check the server's certificate against (default: the host)");
  return health;
}

int Health(const HealthFlags& flags) {
  absl::StatusOr<ServingStatus> status =
      CheckHealth(flags.address, flags.security, flags.timeout_ms);
  if (!status.ok()) {
    std::printf("no answer: %s\n", std::string(status.status().message()).c_str());
    return kRuntimeError;
  }
  switch (*status) {
    case ServingStatus::kServing:
      std::printf("SERVING\n");
      return 0;
    case ServingStatus::kNotServing:
      std::printf("NOT_SERVING\n");
      break;
    case ServingStatus::kServiceUnknown:
      std::printf("SERVICE_UNKNOWN\n");
      break;
    default:
      std::printf("UNKNOWN\n");
      break;
  }
  return kRuntimeError;
}

}  // namespace tandem
