// framework/distributed/local_master.h
//
// The registry of this process's masters by address ("host:port"), as TensorFlow's
// LocalMaster: a GrpcSession whose target is a Server of this process (the usual case:
// a worker's client talks to its own task) calls that Master directly, so feeds and
// fetches are not serialized and no RPC is made. A server registers its master when
// it starts serving and unregisters it (and stops it) before it is destroyed; the
// token is kept so a session with the wrong token still goes through gRPC and is
// refused there.
//
// Thread safety: all functions are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_LOCAL_MASTER_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_LOCAL_MASTER_H_

#include <memory>
#include <string>

#include "framework/distributed/master_interface.h"

namespace tandem {

void RegisterLocalMaster(const std::string& address, std::shared_ptr<MasterInterface> master,
                         const std::string& token);
void UnregisterLocalMaster(const std::string& address);
// The master serving `address` in this process when `token` matches its server's;
// null otherwise.
std::shared_ptr<MasterInterface> FindLocalMaster(const std::string& address,
                                                 const std::string& token);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_LOCAL_MASTER_H_
