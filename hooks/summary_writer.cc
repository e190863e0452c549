#include "hooks/summary_writer.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"

namespace tandem {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

double WallTimeSeconds() { return static_cast<double>(env::NowMicros()) / 1e6; }

absl::StatusOr<std::unique_ptr<SummaryWriter>> SummaryWriter::Create(const std::string& logdir) {
  TANDEM_RETURN_IF_ERROR(env::MakeDirs(logdir));
  const int64_t secs = env::NowMicros() / 1000000;
  std::string path =
      env::JoinPath(logdir, absl::StrCat("events.out.tfevents.", secs, ".", HostName()));
  for (int n = 0; env::FileExists(path); ++n) {
    path = env::JoinPath(logdir, absl::StrCat("events.out.tfevents.", secs, ".", HostName(), ".",
                                              ::getpid(), ".", n));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<io::RecordWriter> writer, io::RecordWriter::Open(path));
  std::unique_ptr<SummaryWriter> w(new SummaryWriter(path, std::move(writer)));
  proto::Event first;
  first.set_wall_time(WallTimeSeconds());
  first.set_file_version(kEventFileVersion);
  TANDEM_RETURN_IF_ERROR(w->AddEvent(std::move(first)));
  TANDEM_RETURN_IF_ERROR(w->Flush());
  return w;
}

SummaryWriter::~SummaryWriter() {
  absl::Status s = Close();
  if (!s.ok()) LOG(ERROR) << "closing summary writer: " << s;
}

absl::Status SummaryWriter::AddScalar(absl::string_view tag, float value, int64_t step) {
  proto::Event event;
  event.set_step(step);
  proto::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(value);
  return AddEvent(std::move(event));
}

absl::Status SummaryWriter::AddScalars(const std::vector<std::pair<std::string, float>>& values,
                                       int64_t step) {
  proto::Event event;
  event.set_step(step);
  for (const auto& [tag, value] : values) {
    proto::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(value);
  }
  return AddEvent(std::move(event));
}

absl::Status SummaryWriter::AddEvent(proto::Event event) {
  if (event.wall_time() == 0) event.set_wall_time(WallTimeSeconds());
  std::string bytes;
  if (!event.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("cannot serialize an Event for ", path_));
  }
  absl::MutexLock lock(&mu_);
  if (writer_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("summary writer for ", path_, " is closed"));
  }
  return writer_->WriteRecord(bytes);
}

absl::Status SummaryWriter::Flush() {
  absl::MutexLock lock(&mu_);
  if (writer_ == nullptr) return absl::OkStatus();
  return writer_->Flush();
}

absl::Status SummaryWriter::Close() {
  absl::MutexLock lock(&mu_);
  if (writer_ == nullptr) return absl::OkStatus();
  absl::Status s = writer_->Close();
  writer_.reset();
  return s;
}

int64_t LatestSummaryStep(const std::string& dir, absl::string_view tag) {
  int64_t latest = -1;
  absl::StatusOr<std::vector<std::string>> files = env::ListDir(dir);
  if (!files.ok()) return latest;
  for (const std::string& name : *files) {
    if (name.find("tfevents") == std::string::npos) continue;
    absl::StatusOr<std::unique_ptr<io::RecordReader>> reader =
        io::RecordReader::Open(env::JoinPath(dir, name));
    if (!reader.ok()) continue;
    while (true) {
      absl::StatusOr<std::optional<std::string>> record = (*reader)->ReadRecord();
      if (!record.ok()) {
        LOG(WARNING) << "Reading events: " << record.status();
        break;
      }
      if (!*record) break;
      proto::Event event;
      if (!event.ParseFromString(**record) || !event.has_summary()) continue;
      for (const auto& value : event.summary().value()) {
        if (value.tag() == tag) latest = std::max(latest, static_cast<int64_t>(event.step()));
      }
    }
  }
  return latest;
}

absl::StatusOr<std::shared_ptr<SummaryWriter>> SummaryWriterForDir(const std::string& dir) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* writers ABSL_GUARDED_BY(mu) =
      new std::map<std::string, std::shared_ptr<SummaryWriter>>();
  absl::MutexLock lock(&mu);
  auto it = writers->find(dir);
  if (it != writers->end()) return it->second;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<SummaryWriter> writer, SummaryWriter::Create(dir));
  std::shared_ptr<SummaryWriter> shared(std::move(writer));
  (*writers)[dir] = shared;
  return shared;
}

}  // namespace tandem
