//===- Sits.td - The whole sits dialect --------------------*- tablegen -*-===//
//
// Entry point for documentation: the dialect, its types, attributes and ops.

include "dialects/sits/SitsOps.td"
