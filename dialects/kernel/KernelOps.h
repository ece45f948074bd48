//===- KernelOps.h - The kernel dialect's ops -------------------*- C++ -*-===//

#ifndef SITS_DIALECT_KERNEL_KERNELOPS_H
#define SITS_DIALECT_KERNEL_KERNELOPS_H

#include "dialects/kernel/KernelDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/kernel/KernelOps.h.inc"

namespace sits::kernel {

/// The kernel.launch whose region holds `op`, or null.
LaunchOp getEnclosingLaunch(mlir::Operation *op);

/// Checks that the tasks (#kernel.task) of the step function `func` form
/// `schedule`: ids 0, 1, ... in program order, tiles for each bucket, each
/// task's first block where the tiles before it end (round-robin).
mlir::LogicalResult verifyDecodeSchedule(mlir::Operation *func,
                                         DecodeScheduleAttr schedule);

/// `value` as the rest of the program sees it: the launch result that
/// carries it out when a launch's region defines it.
mlir::Value getOuterValue(mlir::Value value);

/// `value` as the ops that compute it see it: the region value that a
/// launch result carries out, or `value` itself.
mlir::Value getInnerValue(mlir::Value value);

} // namespace sits::kernel

#endif // SITS_DIALECT_KERNEL_KERNELOPS_H
