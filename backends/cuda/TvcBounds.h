//===- TvcBounds.h - TVC bounds of the stored LM head -----------*- C++ -*-===//
//
// sits.tvc_lm_head's `row_bounds` bound the f32 head. An engine stores the
// head in --dtype (f16/bf16), so TvcPlan.cpp recomputes the bounds for the
// stored rows w': rho' = rho + |w' - w|, sigma' = sigma + |T|_2 |w' - w|
// (|T|_2 from Gershgorin on T T^T, or |T|_F when that costs too much),
// pi' = pi, omega' = |w'|, each rounded up to f32.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_TVCBOUNDS_H
#define SITS_BACKENDS_CUDA_TVCBOUNDS_H

#include "sits/EngineFormat.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace sits::codegen {

/// `weight` [vocab, hidden] (f32), `right` T [rank, hidden], `bounds`
/// [vocab, 4] (the IR's); returns the bounds [vocab, 4] of the rows as
/// stored in `type`.
std::vector<float> storedTvcBounds(llvm::ArrayRef<float> weight,
                                   llvm::ArrayRef<float> right,
                                   llvm::ArrayRef<float> bounds,
                                   format::DType type, int64_t vocab,
                                   int64_t hidden, int64_t rank);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_TVCBOUNDS_H
