// apps/ckpt/ckpt_tool.h
//
// The logic of the `ckpt` command-line tool (apps/ckpt/ckpt_main.cc), kept in a library
// so tests can run every command and read what it prints:
//
//   ckpt ls PATH                        checkpoints of a model_dir, or tensors of one
//   ckpt verify PATH                    every shard and CRC of one or all checkpoints
//   ckpt dump PATH NAME [--limit N]     dtype, shape, values (+ min/max/mean for floats)
//   ckpt export PATH OUT.safetensors    every tensor in one safetensors file
//
// PATH is either a model directory (one with a `checkpoint` state file, as the Saver
// writes it; without one, the *.index.json files in it are taken, oldest step first)
// or a checkpoint prefix "<dir>/model.ckpt-<step>" (a trailing ".index.json" is
// accepted too). `dump` and `export` on a model directory use its latest checkpoint.
//
// Each command writes its report to `out` and returns OK, or an error whose message
// names the file and tensor at fault (the reader's DATA_LOSS / NOT_FOUND); nothing is
// printed for the error itself, the caller prints it. Partitioned variables (the
// index's "slices") are shown, dumped and exported as their full logical tensor.
//
// Thread safety: the functions share no state; each may run concurrently with others
// on different outputs.
#ifndef TANDEM_APPS_CKPT_CKPT_TOOL_H_
#define TANDEM_APPS_CKPT_CKPT_TOOL_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::ckpt {

// What a PATH argument names.
struct ResolvedPath {
  bool is_model_dir = false;
  std::string model_dir;              // Set when is_model_dir.
  std::vector<std::string> prefixes;  // Oldest first; one entry for a prefix.
  std::vector<double> timestamps;     // Parallel to prefixes when known, else empty.
  // The newest checkpoint ("" for a model directory without checkpoints).
  std::string latest;
};

// Resolves PATH as above. NOT_FOUND when it is neither a directory nor a prefix with an
// index file; INVALID_ARGUMENT when the state file cannot be parsed.
absl::StatusOr<ResolvedPath> Resolve(const std::string& path);

// ckpt ls: for a model directory one line per checkpoint (step, shards, size on disk,
// time, prefix; the latest marked "*"); for a prefix one line per tensor (name, dtype,
// shape, shard file) and one per partitioned tensor (full shape and parts).
absl::Status List(const std::string& path, std::ostream& out);

// ckpt verify: checks every shard and CRC (CheckpointReader::Verify) and prints
// "OK <prefix>: N tensors in K shards", or, for a model directory, one "OK ..." or
// "FAILED <prefix>: <error>" line per checkpoint. Returns the error for a prefix, and
// DATA_LOSS counting the failures for a model directory.
absl::Status Verify(const std::string& path, std::ostream& out);

// ckpt dump: the tensor `name` (a stored tensor or a partitioned one): its dtype and
// shape, the first `limit` values (all when limit < 0), and min/max/mean over all
// values for floating-point tensors.
absl::Status Dump(const std::string& path, const std::string& name, int64_t limit,
                  std::ostream& out);

// ckpt export: writes every tensor of the checkpoint into ONE safetensors file at
// `out_path` (partitioned tensors assembled under their full name, their parts left
// out), atomically: a reader sees the old file or the complete new one. __metadata__
// carries "global_step", "source" (the prefix) and the per-tensor crc32c entries.
absl::Status Export(const std::string& path, const std::string& out_path, std::ostream& out);

}  // namespace tandem::ckpt

#endif  // TANDEM_APPS_CKPT_CKPT_TOOL_H_
