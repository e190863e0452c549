// apps/trainer/json_lines.h
//
// JsonLinesWriter: predictions as JSON Lines, one object per example,
// {"<key>": value, ...}: a number for a one-element row of a [batch] tensor, else the
// row's values as a flat list. `trainer predict` writes it both from a checkpoint and
// from an exported model, so the two outputs compare line by line.
//
// Thread safety: not thread-safe.
#ifndef TANDEM_APPS_TRAINER_JSON_LINES_H_
#define TANDEM_APPS_TRAINER_JSON_LINES_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class JsonLinesWriter {
 public:
  explicit JsonLinesWriter(std::ostream* out) : out_(out) {}  // Not owned.
  // Writes each row of `batch` (every tensor's first dimension is the batch).
  absl::Status Write(const std::map<std::string, Tensor>& batch);
  int64_t count() const { return count_; }

 private:
  std::ostream* out_;
  int64_t count_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_JSON_LINES_H_
