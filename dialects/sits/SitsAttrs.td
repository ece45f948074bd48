//===- SitsAttrs.td - Attributes of the sits dialect -------*- tablegen -*-===//
//
// The enum attributes are defined in SitsBase.td; this file is the TableGen
// entry point that generates them.

#ifndef SITS_DIALECT_SITS_SITSATTRS_TD
#define SITS_DIALECT_SITS_SITSATTRS_TD

include "dialects/sits/SitsBase.td"

#endif // SITS_DIALECT_SITS_SITSATTRS_TD
