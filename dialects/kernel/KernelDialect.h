//===- KernelDialect.h - The kernel dialect ---------------------*- C++ -*-===//

#ifndef SITS_DIALECT_KERNEL_KERNELDIALECT_H
#define SITS_DIALECT_KERNEL_KERNELDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/kernel/KernelDialect.h.inc"
#include "dialects/kernel/KernelEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/kernel/KernelAttrs.h.inc"

#endif // SITS_DIALECT_KERNEL_KERNELDIALECT_H
