// framework/distributed/process_setup.h
//
// InitProcess: the settings that change a whole process. Library code never makes them
// by itself (a library linked into someone else's program must not retune its malloc
// or its gRPC); a binary's main() calls InitProcess once, before it creates a Server or
// a channel. TrainerMain (every trainer binary) and the distributed benchmarks do.
// Without it everything works the same, only large tensors cross the wire slower.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_PROCESS_SETUP_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_PROCESS_SETUP_H_

namespace tandem {

struct ProcessOptions {
  // glibc malloc keeps blocks up to 512 MiB in the heap (M_MMAP_THRESHOLD) and trims
  // it above 1 GiB (M_TRIM_THRESHOLD). Tensors of megabytes arrive in buffers gRPC
  // allocates per read; above glibc's default mmap threshold each is a fresh mapping
  // that the kernel faults in page by page and unmaps when freed. That cost, not the
  // copy, dominated a 64 MiB transfer (0.24 of raw TCP before, 0.84 after).
  bool keep_large_blocks_in_heap = true;
  // GRPC_EXPERIMENTS = kGrpcTransportExperiments (rpc/grpc_util.h) unless the
  // environment already sets it (an empty value turns every experiment off). gRPC reads
  // the variable once, when it first needs an experiment, hence before any channel.
  bool grpc_transport_experiments = true;
  // Debian's abseil is built without NDEBUG, so every absl::Mutex::Lock also updates
  // a process-wide lock-order graph (deadlock detection) under one global lock: about
  // 3% of a parameter-server cluster's CPU, and a point where every thread of the
  // process meets. Off unless this is true (tests keep abseil's default).
  bool mutex_deadlock_detection = false;
};

// Applies `options` to this process. Idempotent; call it from main(), before other
// threads start (setenv is not thread-safe).
void InitProcess(const ProcessOptions& options = {});

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_PROCESS_SETUP_H_
