// RUN: sits-opt %s --sits-hoist-rope --split-input-file --verify-diagnostics
// RUN: not sits-opt %s --split-input-file --sits-hoist-rope="max-seq-len=0" 2>&1 | FileCheck %s --check-prefix=LEN

// LEN: sits-hoist-rope: max-seq-len must be between 1 and 2^24 (f32 positions are exact up to there), got 0

func.func @non_finite_frequency(%p: tensor<?x?xi64>) -> tensor<?x?x1xf32> {
  // expected-error @+1 {{'sits.rope_cos_sin' op has a non-finite inv_freq value}}
  %c, %s = sits.rope_cos_sin %p {inv_freq = dense<[0x7FC00000]> : tensor<1xf32>} : tensor<?x?xi64> -> tensor<?x?x1xf32>, tensor<?x?x1xf32>
  return %c : tensor<?x?x1xf32>
}
