// apps/trainer/health_command.h
//
// `trainer health --address HOST:PORT`: one gRPC health check (grpc.health.v1 Check,
// as grpc_health_probe and Kubernetes' gRPC probes make) of any task's port or health
// port. Prints SERVING or NOT_SERVING, or why there was no answer; exit 0 only when
// SERVING, 1 otherwise, so it serves as an exec probe. Plaintext unless --tls_ca (and,
// for a mutual-TLS port, --tls_cert/--tls_key) are given; health checks need no token.
//
// Thread safety: run once from main.
#ifndef TANDEM_APPS_TRAINER_HEALTH_COMMAND_H_
#define TANDEM_APPS_TRAINER_HEALTH_COMMAND_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "framework/distributed/transport_security.h"

namespace tandem {

struct HealthFlags {
  std::string address;
  int64_t timeout_ms = 1000;
  TransportSecurity security;
};

CLI::App* AddHealthCommand(CLI::App& app, HealthFlags& flags);
int Health(const HealthFlags& flags);

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_HEALTH_COMMAND_H_
