//===- WeightView.cpp - Reading weights where they are --------------------===//

#include "dialects/sits/WeightView.h"
#include "dialects/sits/SitsDialect.h"
#include "sits/EngineFormat.h"

#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

using namespace mlir;
using namespace sits;

//===----------------------------------------------------------------------===//
// Element conversions (bit-exact with the engine format's, so that a view
// converts as the engine writer always did)
//===----------------------------------------------------------------------===//

namespace {

template <typename T> T load(const char *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T> void storeBits(char *p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

// The conversions are the engine format's (runtime/format/Format.cpp), so
// that a view rounds exactly as the engine writer does.
using format::bfloat16ToFloat;
using format::floatToBFloat16;
using format::floatToHalf;
using format::halfToFloat;

template <WeightElement E> float toFloat(const char *p) {
  if constexpr (E == WeightElement::F32)
    return load<float>(p);
  else if constexpr (E == WeightElement::F16)
    return halfToFloat(load<uint16_t>(p));
  else
    return bfloat16ToFloat(load<uint16_t>(p));
}

template <WeightElement E> void fromFloat(float value, char *p) {
  if constexpr (E == WeightElement::F32)
    storeBits(p, value);
  else if constexpr (E == WeightElement::F16)
    storeBits(p, floatToHalf(value));
  else
    storeBits(p, floatToBFloat16(value));
}

/// `value` rounded to `element`'s precision.
float roundTo(WeightElement element, float value) {
  if (element == WeightElement::F16)
    return halfToFloat(floatToHalf(value));
  if (element == WeightElement::BF16)
    return bfloat16ToFloat(floatToBFloat16(value));
  return value;
}

/// Calls `block(r0, r1, c0, c1)` for rectangles of values (rows [r0, r1),
/// columns [c0, c1)) that together are values [begin, end) of a transposed
/// storage: a partial first row, whole rows, a partial last row.
template <typename Block>
void forEachBlock(const WeightStorage &storage, int64_t begin, int64_t end,
                  Block block) {
  int64_t cols = storage.cols;
  int64_t at = begin;
  if (at < end && at % cols != 0) {
    int64_t r = at / cols, c0 = at % cols;
    int64_t c1 = std::min(cols, c0 + (end - at));
    block(r, r + 1, c0, c1);
    at = r * cols + c1;
  }
  if (int64_t fullRows = (end - at) / cols) {
    block(at / cols, at / cols + fullRows, 0, cols);
    at += fullRows * cols;
  }
  if (at < end)
    block(at / cols, at / cols + 1, 0, end - at);
}

/// Calls `op(stored index, destination index, count)` for the runs of
/// consecutive stored elements that hold values [begin, end) of a storage
/// that is neither transposed nor a splat, destination indices counting from
/// `begin`: one run, or one per row of a slice.
template <typename Op>
void forEachRun(const WeightStorage &storage, int64_t begin, int64_t end,
                Op op) {
  if (storage.isContiguous()) {
    if (begin < end)
      op(begin, int64_t{0}, end - begin);
    return;
  }
  int64_t cols = storage.cols, stride = storage.storedRowStride();
  for (int64_t at = begin; at < end;) {
    int64_t row = at / cols, col = at % cols;
    int64_t count = std::min(cols - col, end - at);
    op(row * stride + col, at - begin, count);
    at += count;
  }
}

#ifdef __SSE2__
/// Transposes an 8 x 8 block of 16-bit elements: row i of `to` (stride
/// `toStride` elements) gets column i of `from`.
inline void transpose8x8(const char *from, int64_t fromStride, char *to,
                         int64_t toStride) {
  __m128i a[8], t[8], u[8];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm_loadu_si128(
        reinterpret_cast<const __m128i *>(from + 2 * i * fromStride));
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      u[4 * i + 2 * j] = _mm_unpacklo_epi32(t[4 * i + j], t[4 * i + j + 2]);
      u[4 * i + 2 * j + 1] = _mm_unpackhi_epi32(t[4 * i + j], t[4 * i + j + 2]);
    }
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(to + 2 * (2 * i) * toStride),
                     _mm_unpacklo_epi64(u[i], u[i + 4]));
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(to + 2 * (2 * i + 1) * toStride),
        _mm_unpackhi_epi64(u[i], u[i + 4]));
  }
}

/// The same for a 4 x 4 block of 32-bit elements.
inline void transpose4x4(const char *from, int64_t fromStride, char *to,
                         int64_t toStride) {
  __m128i a[4], t[4];
  for (int i = 0; i < 4; ++i)
    a[i] = _mm_loadu_si128(
        reinterpret_cast<const __m128i *>(from + 4 * i * fromStride));
  t[0] = _mm_unpacklo_epi32(a[0], a[1]);
  t[1] = _mm_unpacklo_epi32(a[2], a[3]);
  t[2] = _mm_unpackhi_epi32(a[0], a[1]);
  t[3] = _mm_unpackhi_epi32(a[2], a[3]);
  for (int i = 0; i < 2; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(to + 4 * (2 * i) * toStride),
                     _mm_unpacklo_epi64(t[2 * i], t[2 * i + 1]));
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(to + 4 * (2 * i + 1) * toStride),
        _mm_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
  }
}
#endif

/// Writes the transposed tile of values (rows [r0, r1), columns [c0, c1))
/// of T elements stored as [cols, rows] (stored rows `rows` elements apart)
/// to `out`, row by row `outStride` elements apart: by 8 x 8 (16-bit) or
/// 4 x 4 (32-bit) register transposes where the tile allows.
template <typename T>
void transposeTile(const char *data, int64_t rows, int64_t r0, int64_t r1,
                   int64_t c0, int64_t c1, char *out, int64_t outStride) {
  constexpr int64_t kSize = sizeof(T);
  constexpr int64_t kBlock = sizeof(T) == 2 ? 8 : sizeof(T) == 4 ? 4 : 0;
  auto at = [&](int64_t r, int64_t c) {
    return out + ((r - r0) * outStride + (c - c0)) * kSize;
  };
  auto scalar = [&](int64_t ra, int64_t rb, int64_t ca, int64_t cb) {
    for (int64_t r = ra; r < rb; ++r)
      for (int64_t c = ca; c < cb; ++c)
        std::memcpy(at(r, c), data + (c * rows + r) * kSize, kSize);
  };
  int64_t r = r0;
#ifdef __SSE2__
  if constexpr (kBlock > 0) {
    for (; r + kBlock <= r1; r += kBlock) {
      int64_t c = c0;
      for (; c + kBlock <= c1; c += kBlock) {
        const char *from = data + (c * rows + r) * kSize;
        if constexpr (kBlock == 8)
          transpose8x8(from, rows, at(r, c), outStride);
        else
          transpose4x4(from, rows, at(r, c), outStride);
      }
      scalar(r, r + kBlock, c, c1);
    }
  }
#endif
  scalar(r, r1, c0, c1);
}

constexpr int64_t kTile = 64;

/// Calls `tile(r0, r1, c0, c1)` for the kTile x kTile tiles of values
/// [begin, end) of a transposed storage.
template <typename Tile>
void forEachTile(const WeightStorage &storage, int64_t begin, int64_t end,
                 Tile tile) {
  forEachBlock(
      storage, begin, end, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        for (int64_t rt = r0; rt < r1; rt += kTile)
          for (int64_t ct = c0; ct < c1; ct += kTile)
            tile(rt, std::min(r1, rt + kTile), ct, std::min(c1, ct + kTile));
      });
}

template <typename T>
void copySameType(const WeightStorage &storage, int64_t begin, int64_t end,
                  char *destination) {
  if (storage.transposed && !storage.splat) {
    // Tiles straight into the destination.
    forEachTile(storage, begin, end,
                [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                  transposeTile<T>(
                      storage.data, storage.storedRowStride(), r0, r1, c0, c1,
                      destination + (r0 * storage.cols + c0 - begin) *
                                        static_cast<int64_t>(sizeof(T)),
                      storage.cols);
                });
    return;
  }
  if (storage.splat) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(destination + (i - begin) * sizeof(T), storage.data,
                  sizeof(T));
    return;
  }
  forEachRun(storage, begin, end, [&](int64_t from, int64_t to, int64_t n) {
    std::memcpy(destination + to * sizeof(T), storage.data + from * sizeof(T),
                n * sizeof(T));
  });
}

#if defined(__x86_64__) || defined(__i386__)
/// f32 to f16 for 8 values at a time with F16C (round to nearest even, as
/// floatToHalf); a group holding a NaN is left to floatToHalf, whose NaN
/// drops the payload.
__attribute__((target("avx,f16c"))) int64_t
floatsToHalvesF16C(const char *from, int64_t count, char *to) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 values =
        _mm256_loadu_ps(reinterpret_cast<const float *>(from + 4 * i));
    if (_mm256_movemask_ps(_mm256_cmp_ps(values, values, _CMP_UNORD_Q)))
      break;
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(to + 2 * i),
        _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

bool cpuHasF16C() {
  static const bool has = [] {
    __builtin_cpu_init();
    // F16C from CPUID: clang 14 (the fuzzing build's compiler) does not know
    // __builtin_cpu_supports("f16c"). "avx" also checks the OS saves YMM.
    unsigned eax, ebx, ecx, edx;
    return __builtin_cpu_supports("avx") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  }();
  return has;
}
#endif

/// Converts `count` contiguous `In` elements to `Out`, rounding through
/// `value` when it is narrower than `In`.
template <WeightElement In, WeightElement Out>
void convertRun(const char *from, int64_t count, char *to,
                WeightElement value) {
  constexpr unsigned inBytes = In == WeightElement::F32 ? 4 : 2;
  constexpr unsigned outBytes = Out == WeightElement::F32 ? 4 : 2;
  bool rounds = value != In && value != WeightElement::F32;
  int64_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (In == WeightElement::F32 && Out == WeightElement::F16)
    if (!rounds && cpuHasF16C())
      i = floatsToHalvesF16C(from, count, to);
#endif
  for (; i < count; ++i) {
    float x = toFloat<In>(from + i * inBytes);
    if (rounds)
      x = roundTo(value, x);
    fromFloat<Out>(x, to + i * outBytes);
  }
}

template <WeightElement In, WeightElement Out>
void convert(const WeightStorage &storage, int64_t begin, int64_t end,
             char *destination) {
  constexpr int64_t inBytes = In == WeightElement::F32 ? 4 : 2;
  constexpr int64_t outBytes = Out == WeightElement::F32 ? 4 : 2;
  if (storage.splat) {
    for (int64_t i = begin; i < end; ++i)
      convertRun<In, Out>(storage.data, 1, destination + (i - begin) * outBytes,
                          storage.value);
    return;
  }
  if (!storage.transposed) {
    forEachRun(storage, begin, end, [&](int64_t from, int64_t to, int64_t n) {
      convertRun<In, Out>(storage.data + from * inBytes, n,
                          destination + to * outBytes, storage.value);
    });
    return;
  }
  // Each tile transposed as stored into a small buffer, then converted row
  // by row into place.
  using Stored =
      std::conditional_t<In == WeightElement::F32, uint32_t, uint16_t>;
  Stored tile[kTile * kTile];
  char *buffer = reinterpret_cast<char *>(tile);
  forEachTile(storage, begin, end,
              [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                transposeTile<Stored>(storage.data, storage.storedRowStride(),
                                      r0, r1, c0, c1, buffer, kTile);
                for (int64_t r = r0; r < r1; ++r)
                  convertRun<In, Out>(
                      buffer + (r - r0) * kTile * inBytes, c1 - c0,
                      destination + (r * storage.cols + c0 - begin) * outBytes,
                      storage.value);
              });
}

template <WeightElement In>
void convertTo(WeightElement out, const WeightStorage &storage, int64_t begin,
               int64_t end, char *destination) {
  switch (out) {
  case WeightElement::F32:
    return convert<In, WeightElement::F32>(storage, begin, end, destination);
  case WeightElement::F16:
    return convert<In, WeightElement::F16>(storage, begin, end, destination);
  case WeightElement::BF16:
    return convert<In, WeightElement::BF16>(storage, begin, end, destination);
  case WeightElement::I8:
    return;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

std::optional<WeightElement> sits::getWeightElement(Type type) {
  if (type.isF32())
    return WeightElement::F32;
  if (type.isF16())
    return WeightElement::F16;
  if (type.isBF16())
    return WeightElement::BF16;
  if (type.isInteger(8))
    return WeightElement::I8;
  return std::nullopt;
}

unsigned sits::getWeightElementBytes(WeightElement element) {
  switch (element) {
  case WeightElement::F32:
    return 4;
  case WeightElement::F16:
  case WeightElement::BF16:
    return 2;
  case WeightElement::I8:
    return 1;
  }
  return 0;
}

FailureOr<WeightStorage> sits::getWeightStorage(ElementsAttr attr) {
  auto type = dyn_cast<ShapedType>(attr.getType());
  if (!type || !type.hasStaticShape())
    return failure();
  std::optional<WeightElement> element =
      getWeightElement(type.getElementType());
  if (!element)
    return failure();
  WeightStorage storage;
  int64_t count = type.getNumElements();
  storage.cols = type.getRank() ? type.getShape().back() : 1;
  storage.rows = storage.cols ? count / storage.cols : 0;
  if (auto view = dyn_cast<WeightViewAttr>(attr)) {
    FailureOr<WeightStorage> source = getWeightStorage(view.getSource());
    if (failed(source) || isa<WeightViewAttr>(view.getSource()))
      return failure();
    // A slice starts at its first element and keeps the source's rows.
    ArrayRef<int64_t> offsets = view.getOffsets();
    if (!offsets.empty() && !source->splat) {
      auto from = cast<ShapedType>(view.getSource().getType());
      int64_t first = 0;
      if (view.getTransposed()) {
        first = offsets[1] * from.getDimSize(1) + offsets[0];
      } else {
        for (auto [offset, size] : llvm::zip(offsets, from.getShape()))
          first = first * size + offset;
      }
      source->data +=
          first * static_cast<int64_t>(getWeightElementBytes(source->stored));
      source->stride = from.getRank() ? from.getShape().back() : 1;
    }
    source->value = *element;
    source->transposed = view.getTransposed();
    source->rows = storage.rows;
    source->cols = storage.cols;
    return source;
  }
  storage.stored = storage.value = *element;
  ArrayRef<char> bytes;
  if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr)) {
    bytes = dense.getRawData();
    storage.splat = dense.isSplat();
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return failure();
    bytes = blob->getData();
  } else {
    return failure();
  }
  int64_t stored = storage.splat ? std::min<int64_t>(count, 1) : count;
  if (static_cast<int64_t>(bytes.size()) !=
      stored * getWeightElementBytes(*element))
    return failure();
  storage.data = bytes.data();
  return storage;
}

LogicalResult sits::copyWeightValues(const WeightStorage &storage,
                                     int64_t begin, int64_t end,
                                     WeightElement out, char *destination) {
  if (begin < 0 || begin > end || end > storage.numElements())
    return failure();
  bool integer = storage.stored == WeightElement::I8 ||
                 storage.value == WeightElement::I8 || out == WeightElement::I8;
  if (storage.stored == storage.value && storage.value == out) {
    unsigned bytes = getWeightElementBytes(out);
    if (!storage.transposed && !storage.splat && storage.isContiguous()) {
      std::memcpy(destination, storage.data + begin * bytes,
                  static_cast<size_t>(end - begin) * bytes);
      return success();
    }
    if (bytes == 1)
      copySameType<uint8_t>(storage, begin, end, destination);
    else if (bytes == 2)
      copySameType<uint16_t>(storage, begin, end, destination);
    else
      copySameType<uint32_t>(storage, begin, end, destination);
    return success();
  }
  if (integer)
    return failure();
  switch (storage.stored) {
  case WeightElement::F32:
    convertTo<WeightElement::F32>(out, storage, begin, end, destination);
    break;
  case WeightElement::F16:
    convertTo<WeightElement::F16>(out, storage, begin, end, destination);
    break;
  case WeightElement::BF16:
    convertTo<WeightElement::BF16>(out, storage, begin, end, destination);
    break;
  case WeightElement::I8:
    return failure();
  }
  return success();
}

FailureOr<std::vector<char>> sits::readWeightValues(ElementsAttr attr) {
  FailureOr<WeightStorage> storage = getWeightStorage(attr);
  if (failed(storage))
    return failure();
  std::vector<char> values(static_cast<size_t>(storage->numElements()) *
                           getWeightElementBytes(storage->value));
  if (failed(copyWeightValues(*storage, 0, storage->numElements(),
                              storage->value, values.data())))
    return failure();
  return values;
}

DenseElementsAttr sits::materializeWeight(ElementsAttr attr) {
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return dense;
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  FailureOr<std::vector<char>> values = readWeightValues(attr);
  if (!type || failed(values))
    return nullptr;
  return DenseElementsAttr::getFromRawBuffer(type, *values);
}

int64_t sits::getWeightBytes(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  return type.getNumElements() *
         static_cast<int64_t>((type.getElementTypeBitWidth() + 7) / 8);
}

//===----------------------------------------------------------------------===//
// Mapped files
//===----------------------------------------------------------------------===//

namespace {
struct MappedRanges {
  std::mutex mutex;
  std::map<uintptr_t, size_t> ranges; ///< base -> size
};
MappedRanges &getMappedRanges() {
  static MappedRanges ranges;
  return ranges;
}
} // namespace

void sits::registerMappedRange(const void *base, size_t size) {
  MappedRanges &mapped = getMappedRanges();
  std::lock_guard<std::mutex> lock(mapped.mutex);
  mapped.ranges[reinterpret_cast<uintptr_t>(base)] = size;
}

void sits::unregisterMappedRange(const void *base) {
  MappedRanges &mapped = getMappedRanges();
  std::lock_guard<std::mutex> lock(mapped.mutex);
  mapped.ranges.erase(reinterpret_cast<uintptr_t>(base));
}

void sits::releaseMappedPages(const void *data, size_t size) {
  uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + size;
  {
    MappedRanges &mapped = getMappedRanges();
    std::lock_guard<std::mutex> lock(mapped.mutex);
    auto it = mapped.ranges.upper_bound(begin);
    if (it == mapped.ranges.begin())
      return;
    --it;
    if (end > it->first + it->second)
      return; // not (all) in one mapping
  }
  uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last)
    ::madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}
