// hooks/summary_writer.h
//
// SummaryWriter (TensorFlow's FileWriter) writes TensorBoard event files: in a log
// directory (created if missing) a file `events.out.tfevents.<secs>.<hostname>`, TFRecord
// framed (framework/core/record_io.h), whose first record is
// Event{wall_time, file_version: "brain.Event:2"} and whose later records are Events
// carrying summaries, e.g. Event{wall_time, step, summary{value{tag, simple_value}}}.
// If a file of that name already exists (two writers in one second), ".<pid>.<n>" is
// appended to the name; TensorBoard reads every file whose name contains "tfevents".
//
// Records are buffered; Flush() hands them to the OS, Close() (and the destructor)
// also fsyncs.
//
// Thread safety: all methods may be called concurrently; records are written whole and
// in the order the calls took the writer's lock.
#ifndef TANDEM_HOOKS_SUMMARY_WRITER_H_
#define TANDEM_HOOKS_SUMMARY_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/record_io.h"
#include "framework/protos/event.pb.h"

namespace tandem {

inline constexpr char kEventFileVersion[] = "brain.Event:2";

class SummaryWriter {
 public:
  // Creates `logdir` if needed and starts a new event file there with the
  // file_version record.
  static absl::StatusOr<std::unique_ptr<SummaryWriter>> Create(const std::string& logdir);
  // Closes the file (flush + fsync); errors are logged.
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // Appends Event{wall_time: now, step, summary{value{tag, simple_value: value}}}.
  absl::Status AddScalar(absl::string_view tag, float value, int64_t step);
  // Appends several scalars as one Event (one summary with a value per entry).
  absl::Status AddScalars(const std::vector<std::pair<std::string, float>>& values, int64_t step);
  // Appends `event`, setting wall_time to now if it is 0.
  absl::Status AddEvent(proto::Event event);
  absl::Status Flush();
  // Flushes, fsyncs and closes; later Add* calls fail with FAILED_PRECONDITION.
  absl::Status Close();

  // The event file's path.
  const std::string& path() const { return path_; }

 private:
  SummaryWriter(std::string path, std::unique_ptr<io::RecordWriter> writer)
      : path_(std::move(path)), writer_(std::move(writer)) {}

  const std::string path_;
  absl::Mutex mu_;
  std::unique_ptr<io::RecordWriter> writer_ ABSL_GUARDED_BY(mu_);  // Null once closed.
};

// Seconds since the epoch as TensorBoard's wall_time.
double WallTimeSeconds();

// The highest step at which an event file in `dir` holds a summary value tagged
// `tag`; -1 when none does or `dir` does not exist. A corrupt record ends the reading
// of its file (the events before it count).
int64_t LatestSummaryStep(const std::string& dir, absl::string_view tag);

// One SummaryWriter per directory, shared by every hook writing there (TensorFlow's
// FileWriterCache), so a directory gets one event file per process.
absl::StatusOr<std::shared_ptr<SummaryWriter>> SummaryWriterForDir(const std::string& dir);

}  // namespace tandem

#endif  // TANDEM_HOOKS_SUMMARY_WRITER_H_
