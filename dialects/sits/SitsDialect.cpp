//===- SitsDialect.cpp - The sits dialect ---------------------------------===//

#include "dialects/sits/SitsDialect.h"
#include "dialects/sits/SitsOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

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
}

//===----------------------------------------------------------------------===//
// KVCacheType
//===----------------------------------------------------------------------===//

LogicalResult
KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                    unsigned layers, unsigned maxBatch, unsigned kvHeads,
                    unsigned capacity, unsigned headDim, Type elementType,
                    KVCacheLayoutAttr layout) {
  if (layers == 0 || maxBatch == 0 || kvHeads == 0 || capacity == 0 ||
      headDim == 0)
    return emitError() << "kv_cache needs layers, max_batch, kv_heads, "
                          "capacity and head_dim all > 0";
  if (!isa<Float32Type, Float16Type, BFloat16Type>(elementType))
    return emitError() << "kv_cache element type must be f32, f16 or bf16, "
                          "got "
                       << elementType;
  return success();
}

uint64_t KVCacheType::getBytesPerTokenPerLayer() const {
  uint64_t elementBytes = getElementType().getIntOrFloatBitWidth() / 8;
  return 2ull * getKvHeads() * getHeadDim() * elementBytes;
}

uint64_t KVCacheType::getTotalBytes() const {
  return getBytesPerTokenPerLayer() * getLayers() * getMaxBatch() *
         getCapacity();
}
