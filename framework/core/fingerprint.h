// framework/core/fingerprint.h
//
// Fingerprint64: FarmHash's 64-bit fingerprint (farmhash::Fingerprint64, the
// farmhashna variant of Hash64), the hash TensorFlow uses for string_to_hash_bucket_fast,
// vocabulary OOV buckets and hashed feature crosses. It is a fixed function of the bytes
// (little-endian reads, no seed, the same on every machine and in every release), so a
// string's bucket is the same in tandem as in TensorFlow and never changes: checkpoints
// of hashed features depend on it. FingerprintCat64 combines two fingerprints as
// TensorFlow's (tensorflow/core/platform/fingerprint.h).
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_CORE_FINGERPRINT_H_
#define TANDEM_FRAMEWORK_CORE_FINGERPRINT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tandem {

uint64_t Fingerprint64(absl::string_view s);
uint64_t FingerprintCat64(uint64_t fp1, uint64_t fp2);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_CORE_FINGERPRINT_H_
