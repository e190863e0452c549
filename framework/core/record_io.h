// framework/core/record_io.h
//
// TFRecord framing, byte-compatible with TensorFlow's tf.io.TFRecordWriter and with
// TensorBoard event files. Each record is
//
//   uint64 length (little-endian)
//   uint32 masked crc32c of the 8 length bytes
//   byte   data[length]
//   uint32 masked crc32c of data
//
// RecordWriter appends records to a file; RecordReader reads them back in order. Every
// corruption the reader can see (a truncated header or payload, a bad CRC, a length
// larger than what is left of the file) is a DATA_LOSS status naming the file and the
// offset of the broken record. End of file exactly at a record boundary is a clean end.
//
// Thread safety: a RecordWriter or RecordReader is used by one thread at a time;
// callers that share one must serialise access themselves.
#ifndef TANDEM_FRAMEWORK_CORE_RECORD_IO_H_
#define TANDEM_FRAMEWORK_CORE_RECORD_IO_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::io {

inline constexpr size_t kRecordHeaderBytes = 12;  // length + masked crc of length
inline constexpr size_t kRecordFooterBytes = 4;   // masked crc of data

// Returns the framed bytes of one record (header, data, footer).
std::string EncodeRecord(absl::string_view data);

// The records of a whole TFRecord file held in memory (e.g. after decompression), as
// views into `bytes`. DATA_LOSS naming `name` and the offset of the first corrupt
// record, as RecordReader.
absl::StatusOr<std::vector<absl::string_view>> SplitRecords(absl::string_view bytes,
                                                            const std::string& name);

class RecordWriter {
 public:
  // Opens `path` for appending (created if missing; existing bytes are kept).
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Open(const std::string& path);
  // Closes the file if Close() was not called; errors are logged, not returned.
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  absl::Status WriteRecord(absl::string_view data);
  // Pushes buffered bytes to the operating system (not necessarily to disk).
  absl::Status Flush();
  // Flushes, fsyncs and closes. Further writes fail with FAILED_PRECONDITION.
  absl::Status Close();

  const std::string& path() const { return path_; }

 private:
  RecordWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::FILE* file_;  // Owned; null once closed.
};

class RecordReader {
 public:
  // Opens `path` for sequential reading.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Returns the next record's data, std::nullopt at a clean end of file, or DATA_LOSS
  // naming the file and offset when the record is corrupt. After an error, further
  // calls return the same error.
  absl::StatusOr<std::optional<std::string>> ReadRecord();

  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  RecordReader(std::string path, std::FILE* file, uint64_t size)
      : path_(std::move(path)), file_(file), file_size_(size) {}
  absl::Status Corrupt(absl::string_view what) const;

  std::string path_;
  std::FILE* file_;  // Owned.
  uint64_t file_size_;
  uint64_t offset_ = 0;
  absl::Status sticky_error_;
};

}  // namespace tandem::io

#endif  // TANDEM_FRAMEWORK_CORE_RECORD_IO_H_
