//===- QuantLayout.h - Byte order of quantized weights in an engine -*- C++
//-*-//
//
// The tensor-core GEMV (kernels/gemv_quant.cuh) reads a quantized row in
// chunks of 64 bytes (128 int4 or 64 int8 levels), lane t of each group of
// four its 16-byte piece t. Stored in input order, piece t covers 128 bytes
// of the lane's f32 inputs, so each of the lane's input loads touches
// another cache line than its neighbours' and a warp's load costs L1 four
// passes. Where every chunk is whole, sitsc stores each chunk's bytes so
// that piece t holds the levels of inputs 4t..4t+3 of every 16 (int8:
// inputs 16w + 4t + j of word w; int4: 32w + 16h + 4t + j of word w, nibble
// 4h + j): the four lanes' loads of one input word then read 64
// consecutive bytes. Header-only, so that the kernel tests share it.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_QUANTLAYOUT_H
#define SITS_BACKENDS_CUDA_QUANTLAYOUT_H

namespace sits::codegen {

/// Bytes of one chunk of an interleaved row.
constexpr int kQuantChunkBytes = 64;

/// Byte `n` (0..63) of an interleaved chunk of `bits`-bit levels (8 or 4):
/// the byte of the same chunk in input order that it holds.
constexpr int interleavedSourceByte(int bits, int n) {
  const int piece = n / 16, word = n / 4 % 4, byte = n % 4;
  if (bits == 8) // levels 16 word + 4 piece + byte
    return 16 * word + 4 * piece + byte;
  // int4: the byte's two nibbles are levels 32 word + 16 (byte / 2) +
  // 4 piece + 2 (byte % 2) + {0, 1}, one byte in input order.
  return 16 * word + 8 * (byte / 2) + 2 * piece + byte % 2;
}

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_QUANTLAYOUT_H
