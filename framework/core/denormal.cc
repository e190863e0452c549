// framework/core/denormal.cc
#include "framework/core/denormal.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace tandem {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr uint64_t kFlushBits = 0x8040;  // MXCSR: FTZ (bit 15) and DAZ (bit 6).
uint64_t ReadMode() { return _mm_getcsr(); }
void WriteMode(uint64_t mode) { _mm_setcsr(static_cast<unsigned int>(mode)); }
#elif defined(__aarch64__)
constexpr uint64_t kFlushBits = uint64_t{1} << 24;  // FPCR.FZ.
uint64_t ReadMode() {
  uint64_t fpcr;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
  return fpcr;
}
void WriteMode(uint64_t mode) { __asm__ __volatile__("msr fpcr, %0" : : "r"(mode)); }
#else
constexpr uint64_t kFlushBits = 0;
uint64_t ReadMode() { return 0; }
void WriteMode(uint64_t) {}
#endif

// TANDEM_KEEP_DENORMALS=1 turns flushing off, to measure what it saves or to compare
// with results computed without it.
uint64_t FlushBits() {
  static const uint64_t bits = [] {
    const char* keep = std::getenv("TANDEM_KEEP_DENORMALS");
    return keep != nullptr && *keep != '\0' && std::strcmp(keep, "0") != 0 ? 0 : kFlushBits;
  }();
  return bits;
}

}  // namespace

void FlushDenormals() {
  const uint64_t bits = FlushBits(), mode = ReadMode();
  if ((mode & bits) != bits) WriteMode(mode | bits);
}

bool DenormalsFlushed() { return kFlushBits != 0 && (ReadMode() & kFlushBits) == kFlushBits; }

ScopedFlushDenormals::ScopedFlushDenormals() : saved_(ReadMode()) {
  if ((saved_ & FlushBits()) != FlushBits()) WriteMode(saved_ | FlushBits());
}

ScopedFlushDenormals::~ScopedFlushDenormals() {
  if ((saved_ & FlushBits()) != FlushBits()) WriteMode(saved_);
}

}  // namespace tandem
