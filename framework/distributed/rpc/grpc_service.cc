#include "framework/distributed/rpc/grpc_service.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "glog/logging.h"

namespace tandem {
namespace {

// One unary call arriving on the generic (bidi) API: read one request, reply once.
// The call's CallOptions is cancelled when gRPC cancels the call (the client
// cancelled, its deadline passed, the connection dropped, or the server shuts down),
// so a handler that waits stops waiting. OnDone comes only after OnCancel has returned
// and the reply was sent, so the options outlive every use.
class UnaryReactor : public ServerReactor {
 public:
  UnaryReactor(ServerCall* call, GrpcService* service)
      : ServerReactor(call), context_(call->context()), service_(service) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request"));
      return;
    }
    service_->Handle(context_, &options_, request_, &response_, [this](const grpc::Status& s) {
      if (s.ok()) {
        StartWriteAndFinish(&response_, s);
      } else {
        Finish(s);
      }
    });
  }
  void OnCancel() override { options_.StartCancel(); }
  void OnDone() override { delete this; }

 private:
  const grpc::GenericServerContext& context_;
  GrpcService* service_;
  CallOptions options_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

bool SameToken(absl::string_view got, absl::string_view want) {
  if (got.size() != want.size()) return false;
  // Compares every byte, so the time taken does not reveal a matching prefix.
  unsigned char diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff |= got[i] ^ want[i];
  return diff == 0;
}

}  // namespace

template <typename Service, typename Req, typename Resp>
void GrpcService::Add(const std::string& name, Service* service,
                      void (Service::*method)(CallOptions*, const WireMessage<Req>*,
                                              WireMessage<Resp>*, StatusCallback)) {
  handlers_[name] = [service, method](CallOptions* options, const grpc::ByteBuffer& in,
                                      grpc::ByteBuffer* out, Reply reply) {
    auto request = std::make_shared<WireMessage<Req>>();
    auto response = std::make_shared<WireMessage<Resp>>();
    absl::Status s = DecodeByteBuffer(in, &request->proto, &request->tensors);
    if (!s.ok()) {
      reply(ToGrpcStatus(s));
      return;
    }
    (service->*method)(options, request.get(), response.get(),
                       [request, response, out, reply](const absl::Status& s) {
                         if (s.ok()) *out = EncodeByteBuffer(response->proto, response->tensors);
                         reply(ToGrpcStatus(s));
                       });
  };
}

GrpcService::GrpcService(WorkerInterface* worker, MasterInterface* master, HealthService* health,
                         std::string token)
    : token_(std::move(token)), health_(health) {
  const std::string w = kWorkerServicePrefix;
#define TANDEM_ADD_WORKER_RPC(Name) Add(w + #Name, worker, &WorkerInterface::Name##Async);
  TANDEM_WORKER_RPCS(TANDEM_ADD_WORKER_RPC)
#undef TANDEM_ADD_WORKER_RPC
  if (master == nullptr) return;
  const std::string m = kMasterServicePrefix;
#define TANDEM_ADD_MASTER_RPC(Name) Add(m + #Name, master, &MasterInterface::Name##Async);
  TANDEM_MASTER_RPCS(TANDEM_ADD_MASTER_RPC)
#undef TANDEM_ADD_MASTER_RPC
}

ServerReactor* GrpcService::CreateReactor(ServerCall* call) {
  // Health checks come without the token (Kubernetes' probes carry none).
  if (ServerReactor* r = health_->MaybeCreateReactor(call)) return r;
  return new UnaryReactor(call, this);
}

void GrpcService::Handle(const grpc::GenericServerContext& context, CallOptions* options,
                         const grpc::ByteBuffer& in, grpc::ByteBuffer* out, Reply reply) {
  if (!token_.empty()) {
    const auto& md = context.client_metadata();
    auto it = md.find(kTokenMetadataKey);
    absl::string_view got = it == md.end()
                                ? absl::string_view()
                                : absl::string_view(it->second.data(), it->second.size());
    if (!SameToken(got, token_)) {
      LOG(WARNING) << "refused " << context.method() << " from " << context.peer() << ": "
                   << (it == md.end() ? "no cluster token" : "wrong cluster token");
      reply(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                         "this server requires the cluster token (set [cluster] token or "
                         "TANDEM_CLUSTER_TOKEN on every task)"));
      return;
    }
  }
  auto h = handlers_.find(context.method());
  if (h == handlers_.end()) {
    reply(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                       absl::StrCat("unknown method ", context.method())));
    return;
  }
  h->second(options, in, out, std::move(reply));
}

}  // namespace tandem
