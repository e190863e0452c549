#include "framework/core/record_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "framework/core/crc32c.h"
#include "glog/logging.h"

namespace tandem::io {
namespace {

void PutFixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutFixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetFixed64(const char* src) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(src[i])) << (8 * i);
  return v;
}
uint32_t GetFixed32(const char* src) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(src[i])) << (8 * i);
  return v;
}

absl::Status ErrnoError(absl::string_view call, const std::string& path) {
  int err = errno;
  std::string msg = absl::StrCat(call, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

}  // namespace

std::string EncodeRecord(absl::string_view data) {
  std::string out(kRecordHeaderBytes + data.size() + kRecordFooterBytes, '\0');
  PutFixed64(&out[0], data.size());
  PutFixed32(&out[8], crc32c::Mask(crc32c::Value(out.data(), 8)));
  if (!data.empty()) std::memcpy(&out[kRecordHeaderBytes], data.data(), data.size());
  PutFixed32(&out[kRecordHeaderBytes + data.size()], crc32c::Mask(crc32c::Value(data)));
  return out;
}

// ---------------------------------------------------------------------------- writer

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (f == nullptr) return ErrnoError("fopen", path);
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, f));
}

RecordWriter::~RecordWriter() {
  if (file_ != nullptr) {
    absl::Status s = Close();
    if (!s.ok()) LOG(ERROR) << "closing record file: " << s;
  }
}

absl::Status RecordWriter::WriteRecord(absl::string_view data) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("write to closed record file ", path_));
  }
  std::string framed = EncodeRecord(data);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size()) {
    return ErrnoError("fwrite", path_);
  }
  return absl::OkStatus();
}

absl::Status RecordWriter::Flush() {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("flush of closed record file ", path_));
  }
  if (std::fflush(file_) != 0) return ErrnoError("fflush", path_);
  return absl::OkStatus();
}

absl::Status RecordWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  absl::Status status;
  if (std::fflush(file_) != 0) {
    status = ErrnoError("fflush", path_);
  } else if (::fsync(fileno(file_)) != 0) {
    status = ErrnoError("fsync", path_);
  }
  if (std::fclose(file_) != 0 && status.ok()) status = ErrnoError("fclose", path_);
  file_ = nullptr;
  return status;
}

// ---------------------------------------------------------------------------- reader

absl::StatusOr<std::vector<absl::string_view>> SplitRecords(absl::string_view bytes,
                                                            const std::string& name) {
  std::vector<absl::string_view> records;
  size_t offset = 0;
  auto corrupt = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat(name, ": corrupt record at offset ", offset, ": ", what));
  };
  while (offset < bytes.size()) {
    const size_t left = bytes.size() - offset;
    if (left < kRecordHeaderBytes) {
      return corrupt(absl::StrCat("truncated header (", left, " of ", kRecordHeaderBytes,
                                  " bytes)"));
    }
    const char* header = bytes.data() + offset;
    const uint64_t length = GetFixed64(header);
    if (crc32c::Unmask(GetFixed32(header + 8)) != crc32c::Value(header, 8)) {
      return corrupt("length checksum mismatch");
    }
    const size_t body = left - kRecordHeaderBytes;
    if (length > body || body - length < kRecordFooterBytes) {
      return corrupt(absl::StrCat("record length ", length, " plus footer exceeds the ", body,
                                  " bytes left (truncated or corrupt)"));
    }
    absl::string_view data(header + kRecordHeaderBytes, length);
    if (crc32c::Unmask(GetFixed32(data.data() + length)) != crc32c::Value(data)) {
      return corrupt("data checksum mismatch");
    }
    records.push_back(data);
    offset += kRecordHeaderBytes + length + kRecordFooterBytes;
  }
  return records;
}

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return ErrnoError("fopen", path);
  struct stat st;
  if (::fstat(fileno(f), &st) != 0) {
    absl::Status s = ErrnoError("fstat", path);
    std::fclose(f);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    std::fclose(f);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  return std::unique_ptr<RecordReader>(
      new RecordReader(path, f, static_cast<uint64_t>(st.st_size)));
}

RecordReader::~RecordReader() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status RecordReader::Corrupt(absl::string_view what) const {
  return absl::DataLossError(
      absl::StrCat(path_, ": corrupt record at offset ", offset_, ": ", what));
}

absl::StatusOr<std::optional<std::string>> RecordReader::ReadRecord() {
  if (!sticky_error_.ok()) return sticky_error_;
  auto fail = [this](absl::string_view what) {
    sticky_error_ = Corrupt(what);
    return sticky_error_;
  };
  char header[kRecordHeaderBytes];
  size_t got = std::fread(header, 1, sizeof(header), file_);
  if (got == 0 && std::feof(file_)) return std::optional<std::string>();
  if (got < sizeof(header)) {
    if (std::ferror(file_)) return sticky_error_ = ErrnoError("fread", path_);
    return fail(absl::StrCat("truncated header (", got, " of ", kRecordHeaderBytes, " bytes)"));
  }
  const uint64_t length = GetFixed64(header);
  const uint32_t length_crc = GetFixed32(header + 8);
  if (crc32c::Unmask(length_crc) != crc32c::Value(header, 8)) {
    return fail("length checksum mismatch");
  }
  // The file size was taken at Open(); a writer may have appended since, so re-check
  // against the live size before refusing a long record.
  uint64_t remaining =
      file_size_ > offset_ + kRecordHeaderBytes ? file_size_ - offset_ - kRecordHeaderBytes : 0;
  if (length > remaining || remaining - length < kRecordFooterBytes) {
    struct stat st;
    if (::fstat(fileno(file_), &st) == 0) file_size_ = static_cast<uint64_t>(st.st_size);
    remaining =
        file_size_ > offset_ + kRecordHeaderBytes ? file_size_ - offset_ - kRecordHeaderBytes : 0;
    if (length > remaining || remaining - length < kRecordFooterBytes) {
      return fail(absl::StrCat("record length ", length, " plus footer exceeds the ", remaining,
                               " bytes left in the file (truncated or corrupt)"));
    }
  }
  std::string data(length, '\0');
  char footer[kRecordFooterBytes];
  if ((length > 0 && std::fread(data.data(), 1, length, file_) != length) ||
      std::fread(footer, 1, sizeof(footer), file_) != sizeof(footer)) {
    if (std::ferror(file_)) return sticky_error_ = ErrnoError("fread", path_);
    return fail("truncated payload");
  }
  if (crc32c::Unmask(GetFixed32(footer)) != crc32c::Value(data)) {
    return fail("data checksum mismatch");
  }
  offset_ += kRecordHeaderBytes + length + kRecordFooterBytes;
  return std::optional<std::string>(std::move(data));
}

}  // namespace tandem::io
