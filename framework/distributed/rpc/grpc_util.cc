#include "framework/distributed/rpc/grpc_util.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc_policy.h"
#include "framework/distributed/tensor_wire.h"

namespace tandem {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

namespace {

struct TrafficCounter {
  absl::Mutex mu;
  std::map<std::string, WireTraffic> sent ABSL_GUARDED_BY(mu);
};
TrafficCounter& Traffic() {
  static TrafficCounter* counter = new TrafficCounter;  // Never destroyed.
  return *counter;
}

}  // namespace

std::map<std::string, WireTraffic> WireTrafficSent() {
  TrafficCounter& t = Traffic();
  absl::MutexLock lock(&t.mu);
  return t.sent;
}

std::string WireTrafficSummary() {
  std::map<std::string, WireTraffic> sent = WireTrafficSent();
  std::vector<std::pair<std::string, WireTraffic>> types(sent.begin(), sent.end());
  std::sort(types.begin(), types.end(),
            [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  WireTraffic total;
  std::vector<std::string> parts;
  for (const auto& [type, t] : types) {
    total.messages += t.messages;
    total.bytes += t.bytes;
    parts.push_back(
        absl::StrCat(absl::StripPrefix(type, "tandem.proto."), " ", t.bytes, " in ", t.messages));
  }
  return absl::StrCat("rpc sent: ", total.bytes, " bytes in ", total.messages, " messages (",
                      absl::StrJoin(parts, ", "), ")");
}

grpc::ByteBuffer EncodeByteBuffer(const google::protobuf::MessageLite& body,
                                  const std::vector<Tensor>& tensors) {
  std::vector<grpc::Slice> slices;
  slices.reserve(tensors.size() + 1);
  slices.emplace_back(EncodeWireHead(body, tensors));
  int64_t bytes = static_cast<int64_t>(slices.back().size());
  for (const Tensor& t : tensors) {
    if (HasWireBytes(t.dtype())) bytes += static_cast<int64_t>(t.TotalBytes());
  }
  {
    TrafficCounter& traffic = Traffic();
    absl::MutexLock lock(&traffic.mu);
    WireTraffic& w = traffic.sent[body.GetTypeName()];
    ++w.messages;
    w.bytes += bytes;
  }
  for (const Tensor& t : tensors) {
    if (!HasWireBytes(t.dtype()) || t.TotalBytes() == 0) continue;
    // The slice holds a reference to the tensor's buffer until gRPC has sent it.
    auto* holder = new Tensor(t);
    slices.emplace_back(
        holder->raw_data(), holder->TotalBytes(), [](void* p) { delete static_cast<Tensor*>(p); },
        holder);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status DecodeByteBuffer(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* body,
                              std::vector<Tensor>* tensors) {
  std::vector<grpc::Slice> slices;
  grpc::Status s = buffer.Dump(&slices);
  if (!s.ok()) return FromGrpcStatus(s);
  std::vector<absl::string_view> chunks;
  chunks.reserve(slices.size());
  for (const grpc::Slice& slice : slices) {
    chunks.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return DecodeWire(chunks, body, tensors);
}

void ForEachTransportArgument(const std::function<void(const char*, int)>& set) {
  // Large HTTP/2 frames, windows and socket reads: tensors of megabytes cross in a few
  // system calls instead of thousands of 16 KiB frames.
  set(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024 - 1);
  set(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 * 1024 * 1024);
  set(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 16 * 1024 * 1024);
  set(GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 * 1024 * 1024);
  set(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 * 1024);
  set(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 8 * 1024 * 1024);
  // No bandwidth-delay probing: it sizes stream windows from ping round trips and
  // starts them small, so a multi-megabyte response stalls on WINDOW_UPDATEs. With the
  // lookahead above as the fixed window, a 4 MiB RecvTensor went from about 1.2 to
  // 1.6-1.9 GB/s on loopback, and 64 MiB from 0.5-0.9 to 0.9-1.0 of raw TCP.
  set(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // Keepalive, both ways: a peer that stops answering without closing its connection
  // (frozen, SIGSTOPped, partitioned) fails the calls in flight with UNAVAILABLE
  // within kKeepaliveTimeMs + kKeepaliveTimeoutMs, instead of leaving them waiting
  // forever; the caller's recovery then names the task and retries. Pings go out on
  // idle connections too, and a peer accepts them as often as they come (gRPC's
  // default would answer frequent pings with GOAWAY "too_many_pings").
  set(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  set(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  set(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  set(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  set(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kKeepaliveTimeMs / 2);
  set(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

grpc::ChannelArguments DefaultChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  ForEachTransportArgument([&](const char* key, int value) { args.SetInt(key, value); });
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // One TCP connection per channel object, so channels to one task do not share a
  // subchannel that is backing off after a restart.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  TANDEM_ASSIGN_OR_RETURN(TlsFiles pems, ReadTlsFiles(security, /*cluster_peer=*/false));
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = pems.ca;
  opts.pem_cert_chain = pems.cert;
  opts.pem_private_key = pems.key;
  return grpc::SslCredentials(opts);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  if (security.cert_file.empty() || security.key_file.empty()) {
    return absl::InvalidArgumentError("a TLS server needs both a certificate and a key file");
  }
  TANDEM_ASSIGN_OR_RETURN(TlsFiles pems, ReadTlsFiles(security, /*cluster_peer=*/false));
  grpc::SslServerCredentialsOptions opts(
      security.ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                               : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = pems.cert;
  pair.private_key = pems.key;
  opts.pem_key_cert_pairs.push_back(pair);
  opts.pem_root_certs = pems.ca;
  return grpc::SslServerCredentials(opts);
}

void SetServerNameOverride(const TransportSecurity& security, grpc::ChannelArguments* args) {
  if (security.tls() && !security.server_name.empty()) {
    args->SetSslTargetNameOverride(security.server_name);
  }
}

}  // namespace tandem
