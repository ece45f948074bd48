//===- SitsDialect.h - The sits dialect -------------------------*- C++ -*-===//

#ifndef SITS_DIALECT_SITS_SITSDIALECT_H
#define SITS_DIALECT_SITS_SITSDIALECT_H

#include "dialects/sits/AuditLog.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "dialects/sits/SitsDialect.h.inc"
#include "dialects/sits/SitsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/sits/SitsAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/sits/SitsTypes.h.inc"

#endif // SITS_DIALECT_SITS_SITSDIALECT_H
