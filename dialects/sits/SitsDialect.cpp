//===- SitsDialect.cpp - The sits dialect ---------------------------------===//

#include "dialects/sits/SitsDialect.h"
#include "dialects/sits/QuantMath.h"
#include "dialects/sits/SitsOps.h"
#include "dialects/sits/SitsShapeRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace sits;

#include "dialects/sits/SitsDialect.cpp.inc"
#include "dialects/sits/SitsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/sits/SitsAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/sits/SitsTypes.cpp.inc"

namespace {
/// Prints `!sits.kv_cache<...>` types once, as the alias `!kv_cache`, so that
/// programs with a KV cache stay readable.
struct SitsOpAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;

  AliasResult getAlias(Type type, raw_ostream &os) const override {
    if (isa<KVCacheType>(type)) {
      os << "kv_cache";
      return AliasResult::OverridableAlias;
    }
    return AliasResult::NoAlias;
  }
};
} // namespace

void SitsDialect::initialize() {
  addInterfaces<SitsOpAsmInterface>();
  auditLog = std::make_unique<AuditLog>();
  addOperations<
#define GET_OP_LIST
#include "dialects/sits/SitsOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/sits/SitsAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/sits/SitsTypes.cpp.inc"
      >();
  attachSitsShapeRules(getContext());
}

//===----------------------------------------------------------------------===//
// KVCacheType
//===----------------------------------------------------------------------===//

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  unsigned layers, unsigned maxBatch,
                                  unsigned kvHeads, unsigned capacity,
                                  unsigned headDim, Type elementType,
                                  KVCacheLayoutAttr layout, KVQuantAttr quant) {
  if (layers == 0 || maxBatch == 0 || kvHeads == 0 || capacity == 0 ||
      headDim == 0)
    return emitError() << "kv_cache needs layers, max_batch, kv_heads, "
                          "capacity and head_dim all > 0";
  if (!isa<Float32Type, Float16Type, BFloat16Type>(elementType))
    return emitError() << "kv_cache element type must be f32, f16 or bf16, "
                          "got "
                       << elementType;
  if (quant && quant.getGroupSize() > headDim)
    return emitError() << "kv_cache quant group_size " << quant.getGroupSize()
                       << " exceeds head_dim " << headDim;
  return success();
}

uint64_t KVCacheType::getBytesPerTokenPerLayer() const {
  if (KVQuantAttr quant = getQuant())
    return static_cast<uint64_t>(
        std::ceil(getKvHeads() * (quant.getColdKeyBytes(getHeadDim()) +
                                  quant.getColdValueBytes(getHeadDim()))));
  uint64_t elementBytes = getElementType().getIntOrFloatBitWidth() / 8;
  return 2ull * getKvHeads() * getHeadDim() * elementBytes;
}

uint64_t KVCacheType::getHotWindowBytes() const {
  KVQuantAttr quant = getQuant();
  if (!quant)
    return 0;
  uint64_t keyRows = quant.getHotWindow();
  if (quant.hasPerChannelKeys())
    keyRows += quant.getChannelBlock() - 1;
  uint64_t valueRows = quant.getHotWindow();
  uint64_t elementBytes = getElementType().getIntOrFloatBitWidth() / 8;
  return (keyRows + valueRows) * getKvHeads() * getHeadDim() * elementBytes *
         getLayers() * getMaxBatch();
}

uint64_t KVCacheType::getTotalBytes() const {
  return getBytesPerTokenPerLayer() * getLayers() * getMaxBatch() *
             getCapacity() +
         getHotWindowBytes();
}

//===----------------------------------------------------------------------===//
// KVQuantAttr
//===----------------------------------------------------------------------===//

LogicalResult KVQuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  Type coldType, unsigned hotWindow,
                                  unsigned groupSize, KVKeyGroupsAttr keys,
                                  unsigned channelBlock, Type scaleType) {
  if (!coldType.isSignlessInteger(8) && !coldType.isSignlessInteger(4))
    return emitError() << "kv_quant cold_type must be i8 or i4, got "
                       << coldType;
  if (hotWindow == 0)
    return emitError() << "kv_quant hot_window must be >= 1";
  if (groupSize == 0)
    return emitError() << "kv_quant group_size must be >= 1";
  if (!keys)
    return emitError() << "kv_quant needs keys = per_token or per_channel";
  if (keys.getValue() == KVKeyGroups::per_channel ? channelBlock == 0
                                                  : channelBlock != 1)
    return emitError() << "kv_quant channel_block must be >= 1 for "
                          "per_channel keys and 1 for per_token keys, got "
                       << channelBlock;
  if (!isa<Float16Type, Float32Type>(scaleType))
    return emitError() << "kv_quant scale_type must be f16 or f32, got "
                       << scaleType;
  return success();
}

unsigned KVQuantAttr::getBits() const {
  return getColdType().getIntOrFloatBitWidth();
}

double KVQuantAttr::getColdValueBytes(unsigned headDim) const {
  double scaleBytes = getScaleType().getIntOrFloatBitWidth() / 8;
  uint64_t groups = (headDim + getGroupSize() - 1) / getGroupSize();
  return quant::GroupLayout::packedRowBytes(headDim, getBits()) +
         groups * scaleBytes;
}

double KVQuantAttr::getColdKeyBytes(unsigned headDim) const {
  if (!hasPerChannelKeys())
    return getColdValueBytes(headDim);
  double scaleBytes = getScaleType().getIntOrFloatBitWidth() / 8;
  return quant::GroupLayout::packedRowBytes(headDim, getBits()) +
         headDim * scaleBytes / getChannelBlock();
}
