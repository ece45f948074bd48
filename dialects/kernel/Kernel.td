//===- Kernel.td - The whole kernel dialect ----------------*- tablegen -*-===//
//
// Entry point for documentation: the dialect, its attributes and ops.

include "dialects/kernel/KernelOps.td"
