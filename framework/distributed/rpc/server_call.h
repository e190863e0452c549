// framework/distributed/rpc/server_call.h
//
// The server side of a call on gRPC's asynchronous generic API, shaped as gRPC's
// callback reactors are. A ReactorFactory (a task's GrpcService, a HealthService)
// makes a ServerReactor for each call that arrives; the reactor starts reads and
// writes and finishes the call, and hears of each on the server's RpcQueue thread:
//
//   OnReadDone / OnWriteDone  an operation it started completed (ok = false: the call
//                             is over, cancelled or broken);
//   OnCancel                  the call was cancelled (the client cancelled, its
//                             deadline passed, its connection dropped, the server is
//                             shutting down); at most once, and only after the call
//                             started; the reactor must still Finish;
//   OnDone                    last: the call finished and no operation is in flight;
//                             the reactor may delete itself.
//
// ServerCall is the call itself. ServerCalls are one server's calls: RpcServer keeps a
// few waiting for calls (Await), each that gets one puts the next in its place, and
// after the server's shutdown WaitUntilNoneLive holds the server until the queue has
// delivered every event of its calls (gRPC reads the server while it delivers the
// request of a call, even a cancelled one).
//
// Thread safety: a reactor may start operations from any thread, at most one read
// and one write in flight, nothing after Finish; its On* methods run one at a time.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_SERVER_CALL_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_SERVER_CALL_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/rpc/rpc_queue.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace tandem {

class ServerCall;

class ServerReactor {
 public:
  explicit ServerReactor(ServerCall* call) : call_(call) {}
  virtual ~ServerReactor() = default;

  // `request` / `response` must stay alive until the operation's event.
  void StartRead(grpc::ByteBuffer* request);
  void StartWrite(const grpc::ByteBuffer* response);
  void StartWriteAndFinish(const grpc::ByteBuffer* response, const grpc::Status& status);
  void Finish(const grpc::Status& status);

  virtual void OnReadDone(bool ok) {}
  virtual void OnWriteDone(bool ok) {}
  virtual void OnCancel() {}
  virtual void OnDone() = 0;

 private:
  ServerCall* const call_;
};

class ReactorFactory {
 public:
  // The reactor for the call that arrived (its method, metadata and peer are in
  // call->context()). Never null.
  virtual ServerReactor* CreateReactor(ServerCall* call) = 0;

 protected:
  ~ReactorFactory() = default;
};

class ServerCalls : public std::enable_shared_from_this<ServerCalls> {
 public:
  // Not owned: the server's, which must outlive every call (WaitUntilNoneLive).
  ServerCalls(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq,
              ReactorFactory* factory)
      : service_(service), cq_(cq), factory_(factory) {}
  // Puts one more call waiting for a call to arrive.
  void Await();
  // After the server's Shutdown: returns once every call has ended.
  void WaitUntilNoneLive();

 private:
  friend class ServerCall;
  void Ended();

  grpc::AsyncGenericService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  ReactorFactory* const factory_;
  absl::Mutex mu_;
  int live_ ABSL_GUARDED_BY(mu_) = 0;
};

class ServerCall {
 public:
  const grpc::GenericServerContext& context() const { return context_; }

 private:
  friend class ServerCalls;
  friend class ServerReactor;
  // One tag of the call: which event of it came.
  struct Tag : RpcEvent {
    Tag(ServerCall* c, void (ServerCall::*f)(bool)) : call(c), on(f) {}
    void OnEvent(bool ok) override { (call->*on)(ok); }
    ServerCall* call;
    void (ServerCall::*on)(bool);
  };

  explicit ServerCall(std::shared_ptr<ServerCalls> calls) : calls_(std::move(calls)) {}
  ~ServerCall() { calls_->Ended(); }
  void OnArrived(bool ok);
  void OnRead(bool ok);
  void OnWritten(bool ok);
  void OnFinished(bool ok);
  void OnOver(bool ok);
  // Runs the reactor's OnDone and deletes the call once it is finished, over and idle.
  void MaybeDone();

  const std::shared_ptr<ServerCalls> calls_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_{&context_};
  ServerReactor* reactor_ = nullptr;
  Tag arrived_{this, &ServerCall::OnArrived};
  Tag read_{this, &ServerCall::OnRead};
  Tag written_{this, &ServerCall::OnWritten};
  Tag finished_{this, &ServerCall::OnFinished};
  Tag over_{this, &ServerCall::OnOver};
  std::atomic<int> in_flight_{0};  // Reads and writes started, their events not run.
  bool finish_done_ = false;       // Both set and read on the queue's thread only.
  bool over_done_ = false;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_SERVER_CALL_H_
