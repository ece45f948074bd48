//===- SitsOps.h - Operations of the sits dialect ---------------*- C++ -*-===//

#ifndef SITS_DIALECT_SITS_SITSOPS_H
#define SITS_DIALECT_SITS_SITSOPS_H

#include "dialects/sits/SitsDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/sits/SitsOps.h.inc"

#endif // SITS_DIALECT_SITS_SITSOPS_H
