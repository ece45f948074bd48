//===- half_bits.h - f16 bits for the kernel tests' references -----------===//
//
// The host compiler's own _Float16 conversion (round to nearest even), an
// independent check of the kernels' f16 conversions.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_CODEGEN_HALF_BITS_H
#define SITS_TEST_CODEGEN_HALF_BITS_H

#include <cstring>

inline unsigned short halfBits(float x) {
  _Float16 h = static_cast<_Float16>(x);
  unsigned short bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

inline float halfValue(unsigned short bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

#endif // SITS_TEST_CODEGEN_HALF_BITS_H
