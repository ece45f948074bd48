//===- WeightSection.cpp - The engine's weights, made while written -------===//

#include "backends/cuda/WeightSection.h"

#include "backends/cuda/QuantLayout.h"

#include "compiler/reference/Tensor.h"

#include <algorithm>
#include <cstring>

namespace sits::codegen {

using format::DType;
using namespace mlir;

llvm::Expected<WeightSection>
WeightSection::create(const std::vector<WeightPlan> &weights) {
  WeightSection section;
  for (const WeightPlan &weight : weights) {
    Entry entry;
    entry.name = weight.name;
    bool levels = weight.type == DType::I8 || weight.type == DType::I4X2;
    switch (weight.type) {
    case DType::F32:
      entry.stored = WeightElement::F32;
      break;
    case DType::F16:
      entry.stored = WeightElement::F16;
      break;
    case DType::BF16:
      entry.stored = WeightElement::BF16;
      break;
    case DType::I8:
    case DType::I4X2:
      // Quantized levels: the i8 bytes as they are (int4 already packed).
      entry.stored = WeightElement::I8;
      break;
    default:
      return llvm::createStringError("weight '" + weight.name +
                                     "' has a storage type sitsc does not "
                                     "write");
    }
    Type element = cast<ShapedType>(weight.values.getType()).getElementType();
    if (levels && !element.isInteger(8))
      return llvm::createStringError("quantized weight '" + weight.name +
                                     "' is not an i8 tensor");
    if (!levels && !isa<FloatType>(element))
      return llvm::createStringError("weight '" + weight.name +
                                     "' is not a float tensor");
    FailureOr<WeightStorage> storage = getWeightStorage(weight.values);
    if (succeeded(storage) && (levels || storage->value != WeightElement::I8)) {
      entry.storage = *storage;
    } else if (!levels) {
      // Another kind of constant: its values, read once.
      llvm::Expected<reference::Tensor> tensor =
          reference::Tensor::fromAttribute(weight.values);
      if (!tensor)
        return llvm::createStringError(
            "cannot read weight '" + weight.name +
            "': " + llvm::toString(tensor.takeError()));
      entry.owned = std::make_shared<std::vector<float>>(
          tensor->floats().begin(), tensor->floats().end());
      entry.storage.data = reinterpret_cast<const char *>(entry.owned->data());
      entry.storage.rows = 1;
      entry.storage.cols = static_cast<int64_t>(entry.owned->size());
    } else {
      return llvm::createStringError("cannot read quantized weight '" +
                                     weight.name + "'");
    }
    entry.bytes = static_cast<uint64_t>(entry.storage.numElements()) *
                  getWeightElementBytes(entry.stored);
    entry.interleavedBits = weight.interleavedBits;
    if (entry.interleavedBits &&
        (!levels || weight.shape.size() != 2 ||
         weight.shape[1] % kQuantChunkBytes != 0 ||
         (entry.interleavedBits != 8 && entry.interleavedBits != 4)))
      return llvm::createStringError(
          "quantized weight '" + weight.name +
          "' cannot be stored in interleaved chunks: its rows are not whole "
          "chunks of " +
          std::to_string(kQuantChunkBytes) + " bytes");
    if (entry.bytes != weight.bytes)
      return llvm::createStringError(
          "weight '" + weight.name + "' holds " + std::to_string(entry.bytes) +
          " bytes, its plan " + std::to_string(weight.bytes));
    entry.offset = (section.total + format::kWeightAlignment - 1) /
                   format::kWeightAlignment * format::kWeightAlignment;
    section.total = entry.offset + entry.bytes;
    section.entries.push_back(std::move(entry));
  }
  section.remaining.reset(new std::atomic<uint64_t>[section.entries.size()]);
  for (size_t i = 0; i < section.entries.size(); ++i)
    section.remaining[i] = section.entries[i].bytes;
  return section;
}

bool WeightSection::encodeInterleaved(const Entry &entry, uint64_t begin,
                                      uint64_t end, uint8_t *out,
                                      std::string *error) const {
  // Rows are whole chunks (create), so chunks lie at multiples of 64 bytes
  // of the weight (one byte per stored element).
  constexpr uint64_t kChunk = kQuantChunkBytes;
  uint8_t inOrder[kChunk], interleaved[kChunk];
  for (uint64_t chunk = begin / kChunk * kChunk; chunk < end; chunk += kChunk) {
    if (failed(copyWeightValues(entry.storage, static_cast<int64_t>(chunk),
                                static_cast<int64_t>(chunk + kChunk),
                                entry.stored,
                                reinterpret_cast<char *>(inOrder)))) {
      *error = "cannot read quantized weight '" + entry.name + "'";
      return false;
    }
    for (int n = 0; n < static_cast<int>(kChunk); ++n)
      interleaved[n] = inOrder[interleavedSourceByte(entry.interleavedBits, n)];
    uint64_t from = std::max(begin, chunk), to = std::min(end, chunk + kChunk);
    std::memcpy(out + (from - begin), interleaved + (from - chunk), to - from);
  }
  return true;
}

bool WeightSection::encode(const Entry &entry, uint64_t begin, uint64_t end,
                           uint8_t *out, std::string *error) const {
  if (entry.interleavedBits)
    return encodeInterleaved(entry, begin, end, out, error);
  uint64_t size = getWeightElementBytes(entry.stored);
  uint64_t first = begin / size, last = (end + size - 1) / size;
  char *destination = reinterpret_cast<char *>(out);
  auto copy = [&](uint64_t from, uint64_t to, char *into) {
    if (succeeded(copyWeightValues(entry.storage, static_cast<int64_t>(from),
                                   static_cast<int64_t>(to), entry.stored,
                                   into)))
      return true;
    *error = "cannot convert weight '" + entry.name + "' to its storage type";
    return false;
  };
  // Ranges cut elements only if the caller's chunks do: then the cut
  // elements go through a small buffer.
  if (begin % size == 0 && end % size == 0)
    return copy(first, last, destination);
  char element[8];
  for (uint64_t index = first; index < last; ++index) {
    uint64_t from = std::max(begin, index * size);
    uint64_t to = std::min(end, (index + 1) * size);
    bool whole = from == index * size && to == (index + 1) * size;
    if (whole) {
      // The run of whole elements up to the last one.
      uint64_t runEnd = end / size;
      if (!copy(index, runEnd, destination + (from - begin)))
        return false;
      index = runEnd - 1;
      continue;
    }
    if (!copy(index, index + 1, element))
      return false;
    std::memcpy(destination + (from - begin), element + (from - index * size),
                to - from);
  }
  return true;
}

bool WeightSection::fill(uint64_t offset, uint8_t *out, uint64_t size,
                         std::string *error) const {
  uint64_t at = offset, end = offset + size;
  // The first weight that ends after `offset`.
  auto it = std::partition_point(
      entries.begin(), entries.end(),
      [&](const Entry &entry) { return entry.offset + entry.bytes <= offset; });
  while (at < end) {
    uint64_t next = it == entries.end() ? end : std::min(end, it->offset);
    if (at < next) { // padding between weights
      std::memset(out + (at - offset), 0, next - at);
      at = next;
      continue;
    }
    uint64_t to = std::min(end, it->offset + it->bytes);
    if (!encode(*it, at - it->offset, to - it->offset, out + (at - offset),
                error))
      return false;
    const WeightStorage &storage = it->storage;
    if (remaining[it - entries.begin()].fetch_sub(to - at) == to - at &&
        !storage.splat && !it->owned)
      releaseMappedPages(storage.data,
                         static_cast<size_t>(storage.storedSpan()) *
                             getWeightElementBytes(storage.stored));
    at = to;
    ++it;
  }
  return true;
}

} // namespace sits::codegen
