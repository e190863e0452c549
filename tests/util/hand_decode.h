// tests/util/hand_decode.h
//
// Readers of tandem's on-disk formats written from the specs, sharing no code with the
// writers, so tests pin the formats other tools read: TFRecord framing (length, masked
// CRC32C of the length, payload, masked CRC32C of the payload), the protobuf wire
// format of TensorBoard's Event/Summary (field numbers, not our .proto), and the
// safetensors layout (8-byte little-endian header length, JSON header, raw data).
// Failures are reported with gtest's EXPECT/ADD_FAILURE.
#ifndef TANDEM_TESTS_UTIL_HAND_DECODE_H_
#define TANDEM_TESTS_UTIL_HAND_DECODE_H_

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "framework/core/crc32c.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::testing {

inline uint64_t Le(const std::string& b, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(b[pos + i])) << (8 * i);
  }
  return v;
}

// Splits a TFRecord file into payloads, asserting every length and CRC.
inline std::vector<std::string> ReadTfRecords(const std::string& bytes) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    EXPECT_LE(pos + 12, bytes.size()) << "truncated header at " << pos;
    if (pos + 12 > bytes.size()) break;
    uint64_t len = Le(bytes, pos, 8);
    EXPECT_EQ(Le(bytes, pos + 8, 4), crc32c::Mask(crc32c::Value(bytes.data() + pos, 8)))
        << "length crc at " << pos;
    EXPECT_LE(pos + 12 + len + 4, bytes.size()) << "truncated payload at " << pos;
    if (pos + 12 + len + 4 > bytes.size()) break;
    std::string payload = bytes.substr(pos + 12, len);
    EXPECT_EQ(Le(bytes, pos + 12 + len, 4), crc32c::Mask(crc32c::Value(payload)))
        << "payload crc at " << pos;
    out.push_back(payload);
    pos += 12 + len + 4;
  }
  return out;
}

// A protobuf message decoded by hand: field number -> raw values (varints and fixed
// values as integers, length-delimited as bytes).
struct Fields {
  std::multimap<int, uint64_t> ints;
  std::multimap<int, std::string> bytes;
  std::map<int, int> wire_type;
};

inline uint64_t Varint(const std::string& b, size_t* pos) {
  uint64_t v = 0;
  for (int shift = 0; *pos < b.size() && shift < 64; shift += 7) {
    uint8_t c = static_cast<uint8_t>(b[(*pos)++]);
    v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if (!(c & 0x80)) return v;
  }
  ADD_FAILURE() << "bad varint";
  return v;
}

inline Fields Decode(const std::string& b) {
  Fields f;
  size_t pos = 0;
  while (pos < b.size()) {
    uint64_t key = Varint(b, &pos);
    int field = static_cast<int>(key >> 3), type = static_cast<int>(key & 7);
    f.wire_type[field] = type;
    if (type == 0) {
      f.ints.emplace(field, Varint(b, &pos));
    } else if (type == 1) {
      f.ints.emplace(field, Le(b, pos, 8));
      pos += 8;
    } else if (type == 5) {
      f.ints.emplace(field, Le(b, pos, 4));
      pos += 4;
    } else if (type == 2) {
      uint64_t n = Varint(b, &pos);
      f.bytes.emplace(field, b.substr(pos, n));
      pos += n;
    } else {
      ADD_FAILURE() << "wire type " << type;
      break;
    }
  }
  return f;
}

inline double AsDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
inline float AsFloat(uint64_t bits) {
  uint32_t b32 = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b32, 4);
  return f;
}

struct Scalar {
  int64_t step;
  std::string tag;
  float value;
  double wall_time;
};

// Decodes every Event after the first as {step, summary.value[*]}, skipping
// SessionLog events (field 7).
inline std::vector<Scalar> Scalars(const std::vector<std::string>& records) {
  std::vector<Scalar> out;
  for (size_t i = 1; i < records.size(); ++i) {
    Fields event = Decode(records[i]);
    EXPECT_EQ(event.wire_type[1], 1);  // wall_time: double
    if (event.wire_type.count(2)) {
      EXPECT_EQ(event.wire_type[2], 0);  // step: varint
    }
    if (event.wire_type.count(7)) {
      EXPECT_EQ(event.wire_type[7], 2);  // session_log: message
      continue;
    }
    EXPECT_EQ(event.wire_type[5], 2);  // summary: message
    auto summary = event.bytes.find(5);
    if (summary == event.bytes.end()) continue;
    Fields s = Decode(summary->second);
    // repeated Value value = 1
    for (auto [it, end] = s.bytes.equal_range(1); it != end; ++it) {
      Fields v = Decode(it->second);
      EXPECT_EQ(v.wire_type[2], 5);    // simple_value: float
      auto step = event.ints.find(2);  // proto3 omits step 0.
      out.push_back({step == event.ints.end() ? 0 : static_cast<int64_t>(step->second),
                     v.bytes.find(1)->second, AsFloat(v.ints.find(2)->second),
                     AsDouble(event.ints.find(1)->second)});
    }
  }
  return out;
}

// A safetensors file split by hand: the JSON header and the data section.
// Every scalar of every TensorBoard event file (tfevents) in `dir`; [] when none.
inline std::vector<Scalar> ScalarsInDir(const std::string& dir) {
  std::vector<Scalar> all;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().find("tfevents") == std::string::npos) continue;
    std::ifstream file(entry.path());
    std::stringstream bytes;
    bytes << file.rdbuf();
    for (const Scalar& sc : Scalars(ReadTfRecords(bytes.str()))) all.push_back(sc);
  }
  return all;
}

struct SafetensorsByHand {
  nlohmann::json header;
  std::string data;
};

inline SafetensorsByHand ParseSafetensorsByHand(const std::string& bytes) {
  SafetensorsByHand out;
  EXPECT_GE(bytes.size(), 8u);
  if (bytes.size() < 8) return out;
  uint64_t n = Le(bytes, 0, 8);
  EXPECT_LE(8 + n, bytes.size()) << "header length " << n;
  if (8 + n > bytes.size()) return out;
  out.header = nlohmann::json::parse(bytes.substr(8, n), nullptr, false);
  EXPECT_FALSE(out.header.is_discarded()) << "header is not JSON";
  out.data = bytes.substr(8 + n);
  return out;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_HAND_DECODE_H_
