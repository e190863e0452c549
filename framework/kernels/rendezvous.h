// framework/kernels/rendezvous.h
//
// A Rendezvous is where a producer (_Send) hands a tensor to a consumer (_Recv) of
// the same step, possibly on another device or task. This is the interface the
// kernels see (StepContext::rendezvous); the runtime implements it in process
// (LocalRendezvous, framework/runtime/rendezvous.h) and the distributed worker across
// tasks. A tensor is addressed by a key in TensorFlow's format:
//
//   "<src_device>;<src_incarnation as 16 hex digits>;<dst_device>;<tensor_name>;<frame>:<iter>"
//   e.g. "/job:ps/replica:0/task:0/device:CPU:0;00000000075bcd15;
//         /job:worker/replica:0/task:1/device:CPU:0;edge_3_w;0:0"
//
// Send never blocks. Recv gets the value whether it was sent before or after the Recv
// was issued. StartAbort(status) fails every pending Recv and every later Send/Recv
// with `status` (the first abort wins), so a failed partition releases the others of
// its step instead of leaving them waiting.
//
// Thread safety: implementations are thread-safe. Callbacks are never called with an
// internal lock held; a RecvAsync callback may run on the thread calling Send or
// StartAbort, or inline inside RecvAsync.
#ifndef TANDEM_FRAMEWORK_KERNELS_RENDEZVOUS_H_
#define TANDEM_FRAMEWORK_KERNELS_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/graph/device_spec.h"
#include "framework/tensor/tensor.h"

namespace tandem {

// A validated rendezvous key and its parts.
struct ParsedKey {
  std::string full_key;
  std::string src_device;  // Full device name.
  DeviceSpec src;
  uint64_t src_incarnation = 0;
  std::string dst_device;  // Full device name.
  DeviceSpec dst;
  std::string edge_name;  // The tensor name, unique within a step.
  int64_t frame_id = 0;
  int64_t iter_id = 0;
};

// Builds a key. Does not validate; ParseKey does.
std::string CreateRendezvousKey(absl::string_view src_device, uint64_t src_incarnation,
                                absl::string_view dst_device, absl::string_view tensor_name,
                                int64_t frame_id = 0, int64_t iter_id = 0);

// INVALID_ARGUMENT naming the key and what is wrong: not five ';'-separated parts,
// a device that is not a full device name (job, replica, task, type and id), an
// incarnation that is not 1-16 hex digits, an empty tensor name, or a frame/iteration
// that is not "<int>:<int>".
absl::StatusOr<ParsedKey> ParseRendezvousKey(absl::string_view key);

class Rendezvous {
 public:
  // Called once with the status and, when OK, the value and its deadness.
  using DoneCallback =
      std::function<void(const absl::Status& status, const Tensor& value, bool is_dead)>;

  struct RecvOptions {
    // Blocking Recv gives up with DEADLINE_EXCEEDED after this long; <= 0: wait until
    // a Send or an abort.
    int64_t timeout_micros = 0;
  };

  virtual ~Rendezvous() = default;
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Makes `value` available under `key`. `is_dead` marks a tensor of an untaken
  // branch (carried for TensorFlow parity; tandem's executor has no dead tensors).
  virtual absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) = 0;
  // Calls `done` once the value of `key` is available or the rendezvous is aborted.
  virtual void RecvAsync(const ParsedKey& key, DoneCallback done) = 0;
  // Blocks until the value arrives, the rendezvous is aborted, or the timeout passes
  // (then the pending receive is withdrawn, so a later Send is kept for another Recv).
  virtual absl::Status Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                            bool* is_dead) = 0;
  // Aborts: pending and later Recv/Send fail with `status` (which must not be OK).
  virtual void StartAbort(const absl::Status& status) = 0;

 protected:
  Rendezvous() = default;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_RENDEZVOUS_H_
