//===- WeightView.h - Reading weights where they are ------------*- C++ -*-===//
//
// A model's weights can be gigabytes. The importer leaves large external
// data in the mapped file (a dense_resource constant), and raising reads a
// large weight transposed or in another float type through a
// #sits.weight_view instead of copying it. Code that needs the values reads
// them here: as a description of the stored bytes (WeightStorage, for the
// engine writer, which converts ranges of it in parallel), or copied out
// (copyWeightValues, readWeightValues, materializeWeight).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITS_WEIGHTVIEW_H
#define SITS_DIALECT_SITS_WEIGHTVIEW_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <vector>

namespace sits {

/// Weights of at least this many bytes stay where they are: external data
/// is mapped, not read; transposes and casts of them are views.
constexpr int64_t kLargeWeightBytes = 64 * 1024;

/// Element types weights are stored and read in.
enum class WeightElement { F32, F16, BF16, I8 };

/// The WeightElement of `type`, or nullopt for other types.
std::optional<WeightElement> getWeightElement(mlir::Type type);
unsigned getWeightElementBytes(WeightElement element);

/// Where a constant's values are, in plain data (no MLIR calls), so that
/// threads can read it: `values[i] = convert(stored[j])`, j = i, or the
/// transposed index, or 0 for a splat; a slice's rows are `stride` apart.
struct WeightStorage {
  const char *data = nullptr; ///< the first stored element read
  WeightElement stored = WeightElement::F32;
  WeightElement value = WeightElement::F32; ///< a converting view rounds
  bool splat = false;
  bool transposed = false;
  /// The values as a matrix [rows, cols] (rank <= 1: one row); transposed,
  /// the stored elements are [cols, rows].
  int64_t rows = 0, cols = 0;
  /// Stored elements from one stored row to the next (transposed: from one
  /// value column to the next); 0 when they follow each other (no slice).
  int64_t stride = 0;

  int64_t numElements() const { return rows * cols; }
  /// Elements per stored row, and the stride between stored rows.
  int64_t storedRowLength() const { return transposed ? rows : cols; }
  int64_t storedRowStride() const {
    return stride ? stride : storedRowLength();
  }
  bool isContiguous() const { return storedRowStride() == storedRowLength(); }
  /// Stored elements from `data` to the last one read, inclusive.
  int64_t storedSpan() const {
    if (splat || numElements() == 0)
      return splat ? 1 : 0;
    int64_t storedRows = transposed ? cols : rows;
    return (storedRows - 1) * storedRowStride() + storedRowLength();
  }
};

/// The storage of a dense (not i1), dense_resource or weight_view constant;
/// failure for other attributes and element types.
mlir::FailureOr<WeightStorage> getWeightStorage(mlir::ElementsAttr attr);

/// Writes values [begin, end) (row-major indices) as little-endian `out`
/// elements (f32/f16/bf16 from floats, rounded to nearest even through the
/// value type; i8 only from i8). Same-type values are copied as stored.
/// Safe to call from several threads.
mlir::LogicalResult copyWeightValues(const WeightStorage &storage,
                                     int64_t begin, int64_t end,
                                     WeightElement out, char *destination);

/// All values of `attr` as raw little-endian elements of its element type.
mlir::FailureOr<std::vector<char>> readWeightValues(mlir::ElementsAttr attr);

/// `attr` as a DenseElementsAttr (a copy for views and resources), for code
/// that needs one on small constants; null when it cannot be read.
mlir::DenseElementsAttr materializeWeight(mlir::ElementsAttr attr);

/// `source` read as `type`, transposed (rank 2) and/or converted between
/// float types: `source` itself when that changes nothing, else a
/// #sits.weight_view (a view of a view is folded into one view of the
/// source when its conversion is exact, else built over a copy).
mlir::ElementsAttr getWeightView(mlir::ElementsAttr source,
                                 mlir::ShapedType type, bool transposed);

/// The block of `source` (read transposed when it is a transposing view)
/// that starts at `offsets` and has `type`'s shape and element type: a
/// #sits.weight_view over `source`'s constant (no copy), a splat for a
/// splat, `source` itself for the whole; null when the block is not inside
/// `source` or cuts a middle dimension of a rank > 2 constant.
mlir::ElementsAttr getWeightSlice(mlir::ElementsAttr source,
                                  mlir::ShapedType type,
                                  llvm::ArrayRef<int64_t> offsets);

/// Bytes of `attr`'s values (elements x element size).
int64_t getWeightBytes(mlir::ElementsAttr attr);

/// Read-only file mappings (the importer's external data) are registered,
/// so that a reader done with a weight can let its pages go:
/// releaseMappedPages drops this process's mapping of the whole pages of
/// [data, data + size) that lie in a registered range (the file's pages
/// stay in the page cache and are mapped again if touched); other memory is
/// left alone. Thread-safe.
void registerMappedRange(const void *base, size_t size);
void unregisterMappedRange(const void *base);
void releaseMappedPages(const void *data, size_t size);

} // namespace sits

#endif // SITS_DIALECT_SITS_WEIGHTVIEW_H
