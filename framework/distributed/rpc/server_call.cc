// framework/distributed/rpc/server_call.cc: ServerCall and ServerReactor (server_call.h).
#include "framework/distributed/rpc/server_call.h"

namespace tandem {

void ServerReactor::StartRead(grpc::ByteBuffer* request) {
  call_->in_flight_.fetch_add(1);
  call_->stream_.Read(request, &call_->read_);
}

void ServerReactor::StartWrite(const grpc::ByteBuffer* response) {
  call_->in_flight_.fetch_add(1);
  call_->stream_.Write(*response, &call_->written_);
}

void ServerReactor::StartWriteAndFinish(const grpc::ByteBuffer* response,
                                        const grpc::Status& status) {
  call_->stream_.WriteAndFinish(*response, grpc::WriteOptions(), status, &call_->finished_);
}

void ServerReactor::Finish(const grpc::Status& status) {
  call_->stream_.Finish(status, &call_->finished_);
}

void ServerCalls::Await() {
  {
    absl::MutexLock lock(&mu_);
    ++live_;
  }
  auto* call = new ServerCall(shared_from_this());
  // `over_` comes once the call that arrives is over, never for a request the server's
  // shutdown cancels.
  call->context_.AsyncNotifyWhenDone(&call->over_);
  service_->RequestCall(&call->context_, &call->stream_, cq_, cq_, &call->arrived_);
}

void ServerCalls::WaitUntilNoneLive() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* live) { return *live == 0; }, &live_));
}

void ServerCalls::Ended() {
  absl::MutexLock lock(&mu_);
  --live_;
}

void ServerCall::OnArrived(bool ok) {
  if (!ok) {  // The server is shutting down.
    delete this;
    return;
  }
  calls_->Await();
  reactor_ = calls_->factory_->CreateReactor(this);
}

void ServerCall::OnRead(bool ok) {
  reactor_->OnReadDone(ok);
  in_flight_.fetch_sub(1);
  MaybeDone();
}

void ServerCall::OnWritten(bool ok) {
  reactor_->OnWriteDone(ok);
  in_flight_.fetch_sub(1);
  MaybeDone();
}

void ServerCall::OnFinished(bool) {
  finish_done_ = true;
  MaybeDone();
}

void ServerCall::OnOver(bool) {
  over_done_ = true;
  if (context_.IsCancelled()) reactor_->OnCancel();
  MaybeDone();
}

void ServerCall::MaybeDone() {
  if (!finish_done_ || !over_done_ || in_flight_.load() != 0) return;
  reactor_->OnDone();
  delete this;
}

}  // namespace tandem
