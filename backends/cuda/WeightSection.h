//===- WeightSection.h - The engine's weights, made while written -*- C++ -*-//
//
// The weights section is not built in memory: the engine writer asks for
// it in chunks (runtime/format/EngineWriter.h), from several threads, and
// each chunk is made from the model's constants where they are (the mapped
// external data, dense constants, weight views): copied, transposed and
// converted to the storage type in one pass. Each weight starts at a
// kWeightAlignment boundary; the bytes between weights are zero.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_WEIGHTSECTION_H
#define SITS_BACKENDS_CUDA_WEIGHTSECTION_H

#include "backends/cuda/Plan.h"
#include "dialects/sits/WeightView.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <memory>

namespace sits::codegen {

class WeightSection {
public:
  /// Where each of `weights` lies and how it is read; checks their types
  /// (no weight bytes are read).
  static llvm::Expected<WeightSection>
  create(const std::vector<WeightPlan> &weights);

  /// Bytes of the section.
  uint64_t size() const { return total; }
  /// Offset of weight `index` in the section.
  uint64_t offsetOf(size_t index) const { return entries[index].offset; }

  /// Writes bytes [offset, offset + size) of the section into `out`. Safe to
  /// call from several threads.
  bool fill(uint64_t offset, uint8_t *out, uint64_t size,
            std::string *error) const;

private:
  struct Entry {
    std::string name;
    WeightStorage storage;
    WeightElement stored = WeightElement::F32; ///< the engine's type
    uint64_t offset = 0;
    uint64_t bytes = 0;
    /// Quantized levels in interleaved chunks (QuantLayout.h): their bits.
    int interleavedBits = 0;
    /// Values read out of attributes that do not hold raw bytes.
    std::shared_ptr<std::vector<float>> owned;
  };
  bool encode(const Entry &entry, uint64_t begin, uint64_t end, uint8_t *out,
              std::string *error) const;
  /// encode for interleaved levels: whole chunks in input order, reordered.
  bool encodeInterleaved(const Entry &entry, uint64_t begin, uint64_t end,
                         uint8_t *out, std::string *error) const;

  std::vector<Entry> entries;
  /// Bytes of each weight not written yet: once all are, the pages of a
  /// mapped source are let go (releaseMappedPages), so that the memory
  /// mapped at once stays about the weights in progress.
  std::unique_ptr<std::atomic<uint64_t>[]> remaining;
  uint64_t total = 0;
};

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_WEIGHTSECTION_H
