// framework/distributed/rpc/grpc_util.h
//
// The one place where tandem meets gRPC's types: absl::Status <-> grpc::Status,
// WireMessage <-> grpc::ByteBuffer (tensor buffers become zero-copy slices that hold
// a reference to the tensor; received slices are decoded by tensor_wire.h, which
// copies each tensor once into aligned memory), channel arguments without message
// size limits, the cluster token's metadata key, and a generic asynchronous unary
// call that every client uses.
//
// Thread safety: functions are thread-safe; GrpcCall's arguments follow the
// WorkerInterface calling rules.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_UTIL_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_UTIL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "framework/distributed/rpc/rpc_queue.h"
#include "framework/distributed/transport_security.h"
#include "framework/distributed/worker_interface.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

// Metadata key of the shared cluster token (lower case, as gRPC requires).
inline constexpr char kTokenMetadataKey[] = "x-tandem-cluster-token";
inline constexpr char kWorkerServicePrefix[] = "/tandem.WorkerService/";
inline constexpr char kMasterServicePrefix[] = "/tandem.MasterService/";

grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

grpc::ByteBuffer EncodeByteBuffer(const google::protobuf::MessageLite& body,
                                  const std::vector<Tensor>& tensors);

// What this process has sent through EncodeByteBuffer (every tandem RPC request and
// response: the envelope and the tensor bytes), by message type
// ("tandem.proto.RecvTensorResponse", ...), since the process started.
struct WireTraffic {
  int64_t messages = 0;
  int64_t bytes = 0;
};
std::map<std::string, WireTraffic> WireTrafficSent();
// One line for a log: the total and the types, largest first.
std::string WireTrafficSummary();
absl::Status DecodeByteBuffer(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* body,
                              std::vector<Tensor>* tensors);

// gRPC 1.51 transport experiments that cut the wake-ups a large message costs: reads
// sized to the rest of the HTTP/2 frame (tcp_frame_size_tuning), SO_RCVLOWAT so the
// socket wakes its reader once that much has arrived (tcp_rcv_lowat), and frames sized
// by the peer's settings (peer_state_based_framing). On loopback a lone 4 MiB
// RecvTensor went from 0.46-0.56 to 0.60-0.68 of raw TCP with them (distributed_bench).
// InitProcess (process_setup.h) sets them for the process.
inline constexpr char kGrpcTransportExperiments[] =
    "tcp_frame_size_tuning,tcp_rcv_lowat,peer_state_based_framing";

// Channel arguments: no message size limit, quick reconnects to a restarted task,
// and ForEachTransportArgument.
grpc::ChannelArguments DefaultChannelArguments();
// The HTTP/2 and TCP settings that servers and channels share (frame, window and read
// sizes for megabyte tensors; keepalive pings, rpc_policy.h).
void ForEachTransportArgument(const std::function<void(const char*, int)>& set);

// Credentials from the TLS settings (insecure when tls() is false). Unreadable or
// mismatched files (CheckTlsFiles) are INVALID_ARGUMENT naming the file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportSecurity& security);
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurity& security);
// With TLS and a server_name, clients check the servers' certificates against it.
void SetServerNameOverride(const TransportSecurity& security, grpc::ChannelArguments* args);

// Sends `request` to `method` ("/tandem.WorkerService/RunGraph") on `stub`; decodes
// the reply into `response` and calls `done` (on the ClientQueue's thread, where it
// must not block). `options` may be null.
template <typename Req, typename Resp>
void GrpcCall(grpc::GenericStub* stub, const std::string& method, const std::string& token,
              CallOptions* options, const WireMessage<Req>* request, WireMessage<Resp>* response,
              StatusCallback done) {
  struct State final : RpcEvent {
    grpc::ClientContext context;  // Outlives `call`, which lives in its arena.
    grpc::ByteBuffer send;
    grpc::ByteBuffer recv;
    grpc::Status status;
    std::shared_ptr<RpcQueue> queue;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call;
    CallOptions* options = nullptr;
    WireMessage<Resp>* response = nullptr;
    StatusCallback done;
    std::shared_ptr<State> self;  // The call's own reference, until its event.

    void OnEvent(bool) override {
      if (options != nullptr) options->ClearCancelCallback();
      absl::Status result = FromGrpcStatus(status);
      if (result.ok()) result = DecodeByteBuffer(recv, &response->proto, &response->tensors);
      std::shared_ptr<State> last = std::move(self);  // Freed after `done` has run.
      done(result);
    }
  };
  auto state = std::make_shared<State>();
  if (!token.empty()) state->context.AddMetadata(kTokenMetadataKey, token);
  if (options != nullptr && options->timeout_ms() > 0) {
    state->context.set_deadline(std::chrono::system_clock::now() +
                                std::chrono::milliseconds(options->timeout_ms()));
  }
  if (options != nullptr && options->wait_for_ready()) state->context.set_wait_for_ready(true);
  state->send = EncodeByteBuffer(request->proto, request->tensors);
  state->queue = ClientQueue();
  state->options = options;
  state->response = response;
  state->done = std::move(done);
  if (options != nullptr) {
    options->SetCancelCallback([weak = std::weak_ptr<State>(state)] {
      if (auto s = weak.lock()) s->context.TryCancel();
    });
  }
  state->call = stub->PrepareUnaryCall(&state->context, method, state->send, state->queue->cq());
  state->call->StartCall();
  State* raw = state.get();
  raw->self = std::move(state);
  raw->call->Finish(&raw->recv, &raw->status, raw);
}

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_UTIL_H_
