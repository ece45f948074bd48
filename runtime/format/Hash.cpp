//===- Hash.cpp - SHA-256 and the engine's chunked content hash -----------===//
//
// SHA-256 as specified in FIPS 180-4 (with the x86 SHA extensions where the
// CPU has them). The content hash splits the file into
// kHashChunkBytes chunks, hashes each (in parallel threads), then hashes a
// domain tag, the file size and the chunk digests in order.
//
//===----------------------------------------------------------------------===//

#include "format/Hash.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SITS_HAVE_SHA_NI 1
#endif

namespace sits {
namespace format {

namespace {

constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, unsigned n) {
  return (x >> n) | (x << (32 - n));
}

#ifdef SITS_HAVE_SHA_NI
/// `count` blocks with the x86 SHA extensions (Intel's SHA-NI sequence:
/// state as ABEF/CDGH, four rounds per group of message words), about ten
/// times the portable code's speed.
__attribute__((target("sha,sse4.1"))) void
compressShaNi(uint32_t state[8], const uint8_t *data, uint64_t count) {
  const __m128i byteSwap =
      _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i *>(state));
  __m128i state1 =
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(state + 4));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);               // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);         // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8); // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);      // CDGH
  for (; count; --count, data += 64) {
    __m128i abefSave = state0, cdghSave = state1;
    __m128i m[4];
    for (int i = 0; i < 4; ++i) {
      m[i] = _mm_shuffle_epi8(
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(data + 16 * i)),
          byteSwap);
    }
    // Group g runs rounds 4g..4g+3 on words m[g % 4]; the schedule computes
    // the words of group g + 1 (msg2) and starts those of g + 3 (msg1).
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      __m128i msg = _mm_add_epi32(
          m[g % 4], _mm_loadu_si128(reinterpret_cast<const __m128i *>(
                        kRoundConstants + 4 * g)));
      state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
      if (g >= 3 && g <= 14) {
        __m128i next = _mm_add_epi32(
            m[(g + 1) % 4], _mm_alignr_epi8(m[g % 4], m[(g + 3) % 4], 4));
        m[(g + 1) % 4] = _mm_sha256msg2_epu32(next, m[g % 4]);
      }
      msg = _mm_shuffle_epi32(msg, 0x0E);
      state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
      if (g >= 1 && g <= 12)
        m[(g + 3) % 4] = _mm_sha256msg1_epu32(m[(g + 3) % 4], m[g % 4]);
    }
    state0 = _mm_add_epi32(state0, abefSave);
    state1 = _mm_add_epi32(state1, cdghSave);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);       // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);    // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0); // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);    // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i *>(state), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(state + 4), state1);
}

// CPUID rather than __builtin_cpu_supports("sha"), which clang 14 (the
// fuzzing build's compiler) does not know.
bool cpuHasShaNi() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_SSE4_1))
    return false;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_SHA);
}
#else
bool cpuHasShaNi() { return false; }
#endif

std::atomic<bool> &shaNiEnabled() {
  static std::atomic<bool> enabled{cpuHasShaNi()};
  return enabled;
}

} // namespace

bool sha256HardwareAvailable() { return cpuHasShaNi(); }

void setSha256Hardware(bool enabled) {
  shaNiEnabled() = enabled && cpuHasShaNi();
}

Sha256::Sha256() {
  static constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                        0xa54ff53a, 0x510e527f, 0x9b05688c,
                                        0x1f83d9ab, 0x5be0cd19};
  std::memcpy(state, kInit, sizeof(state));
}

void Sha256::compress(const uint8_t *blocks, uint64_t count) {
#ifdef SITS_HAVE_SHA_NI
  if (shaNiEnabled().load(std::memory_order_relaxed)) {
    compressShaNi(state, blocks, count);
    return;
  }
#endif
  for (; count; --count, blocks += 64)
    compressPortable(blocks);
}

void Sha256::compressPortable(const uint8_t *block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t(block[4 * i]) << 24) | (uint32_t(block[4 * i + 1]) << 16) |
           (uint32_t(block[4 * i + 2]) << 8) | uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t sum1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    uint32_t choose = (e & f) ^ (~e & g);
    uint32_t t1 = h + sum1 + choose + kRoundConstants[i] + w[i];
    uint32_t sum0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = sum0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

void Sha256::update(const void *data, uint64_t size) {
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  totalBytes += size;
  if (pending) {
    uint64_t take = std::min<uint64_t>(64 - pending, size);
    std::memcpy(buffer + pending, bytes, take);
    pending += take;
    bytes += take;
    size -= take;
    if (pending < 64)
      return;
    compress(buffer, 1);
    pending = 0;
  }
  uint64_t blocks = size / 64;
  compress(bytes, blocks);
  bytes += 64 * blocks;
  size -= 64 * blocks;
  std::memcpy(buffer, bytes, size);
  pending = size;
}

Hash Sha256::finish() {
  uint64_t bits = totalBytes * 8;
  uint8_t pad[72] = {0x80};
  uint64_t padBytes = (pending < 56 ? 56 : 120) - pending;
  update(pad, padBytes);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(length, 8);
  Hash digest;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      digest[4 * i + j] = static_cast<uint8_t>(state[i] >> (24 - 8 * j));
  return digest;
}

Hash sha256(const void *data, uint64_t size) {
  Sha256 hasher;
  hasher.update(data, size);
  return hasher.finish();
}

std::string hashToHex(const Hash &hash) {
  static const char *digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : hash) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Chunked content hash
//===----------------------------------------------------------------------===//

static const char kContentHashTag[] = "sits-engine-content-v1";

ContentHasher::ContentHasher() = default;

void ContentHasher::update(const void *data, uint64_t size) {
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  while (size) {
    uint64_t room = kHashChunkBytes - inChunk;
    uint64_t take = std::min(room, size);
    // The hash field reads as zeros: feed zeros for the part of it in range.
    uint64_t start = position, end = position + take;
    uint64_t fieldBegin = kContentHashOffset,
             fieldEnd = kContentHashOffset + kHashBytes;
    if (start < fieldEnd && end > fieldBegin) {
      uint64_t zBegin = std::max(start, fieldBegin),
               zEnd = std::min(end, fieldEnd);
      static const uint8_t zeros[kHashBytes] = {};
      chunk.update(bytes, zBegin - start);
      chunk.update(zeros, zEnd - zBegin);
      chunk.update(bytes + (zEnd - start), end - zEnd);
    } else {
      chunk.update(bytes, take);
    }
    bytes += take;
    size -= take;
    position += take;
    inChunk += take;
    if (inChunk == kHashChunkBytes) {
      digests.push_back(chunk.finish());
      chunk = Sha256();
      inChunk = 0;
    }
  }
}

Hash combineContentDigests(uint64_t fileBytes,
                           const std::vector<Hash> &digests) {
  Sha256 top;
  top.update(kContentHashTag, sizeof(kContentHashTag) - 1);
  uint8_t size[8];
  for (int i = 0; i < 8; ++i)
    size[i] = static_cast<uint8_t>(fileBytes >> (8 * i));
  top.update(size, 8);
  for (const Hash &digest : digests)
    top.update(digest.data(), digest.size());
  return top.finish();
}

Hash ContentHasher::firstChunkDigest() {
  return digests.empty() ? chunk.finish() : digests.front();
}

Hash ContentHasher::finish() {
  if (inChunk || digests.empty())
    digests.push_back(chunk.finish());
  return combineContentDigests(position, digests);
}

Hash contentChunkDigest(const uint8_t *chunk, uint64_t size, uint64_t index) {
  if (index != 0)
    return sha256(chunk, size);
  ContentHasher one; // reads the hash field as zeros
  one.update(chunk, size);
  return one.firstChunkDigest();
}

Hash computeContentHash(const uint8_t *data, uint64_t size, unsigned threads) {
  uint64_t chunks =
      size == 0 ? 1 : (size + kHashChunkBytes - 1) / kHashChunkBytes;
  std::vector<Hash> digests(chunks);
  auto hashChunk = [&](uint64_t index) {
    uint64_t begin = index * kHashChunkBytes;
    uint64_t end = std::min(size, begin + kHashChunkBytes);
    digests[index] = contentChunkDigest(data + begin, end - begin, index);
  };
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<uint64_t>(threads, chunks));
  if (threads <= 1) {
    for (uint64_t i = 0; i < chunks; ++i)
      hashChunk(i);
  } else {
    std::atomic<uint64_t> next{0};
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        for (uint64_t i = next++; i < chunks; i = next++)
          hashChunk(i);
      });
    for (auto &worker : workers)
      worker.join();
  }
  return combineContentDigests(size, digests);
}

} // namespace format
} // namespace sits
