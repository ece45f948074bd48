// RUN: sits-opt %s --split-input-file --sits-fuse-tvc="tvc-rank=1 tvc-candidates=3 tvc-top-k=2" | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-fuse-tvc="tvc-rank=1 tvc-candidates=3 tvc-top-k=2" --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --sits-insert-qdq="weights=int8 weight-group=16" --sits-fuse-tvc="tvc-rank=2 tvc-candidates=4" | FileCheck %s --check-prefix=QUANT
// RUN: not sits-opt %s --split-input-file --sits-fuse-tvc="tvc-rank=4" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not sits-opt %s --split-input-file --sits-fuse-tvc="tvc-rank=1 tvc-candidates=9" 2>&1 | FileCheck %s --check-prefix=CANDIDATES
// RUN: not sits-opt %s --split-input-file --sits-fuse-tvc="tvc-rank=1 tvc-candidates=2 tvc-top-k=3" 2>&1 | FileCheck %s --check-prefix=TOP

// A rank-1 head (row v is (v + 1) * [0.2, 0.4, 0.4, 0.8]): the preview is
// the whole head, its singular value |a| |b| = sqrt(204) = 14.283.

// CHECK-LABEL: func.func @head
// CHECK: %[[W:.*]] = sits.weight "head" dense
// CHECK: %[[P:.*]] = sits.weight "head.tvc_left" dense<{{.*}}> : tensor<8x1xf32>
// CHECK: %[[T:.*]] = sits.weight "head.tvc_right" dense<{{.*}}> : tensor<1x4xf32>
// CHECK: %[[B:.*]] = sits.weight "head.tvc_bounds" dense<{{.*}}> : tensor<8x4xf32>
// CHECK: sits.tvc_lm_head %{{.*}}, %[[W]] preview(%[[P]], %[[T]]) bounds(%[[B]]) {candidates = 3 : i64, exact_top = 2 : i64} : tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8x1xf32>, tensor<1x4xf32>, tensor<8x4xf32> -> tensor<?x?x8xf32>
// CHECK-NOT: sits.lm_head

// AUDIT: pass sits-fuse-tvc
// AUDIT-NEXT: lm_heads_fused: 1
// AUDIT-NEXT: lm_heads_kept: 0
// AUDIT: - sits.lm_head 'head' [8 x 4]: 8 logits per position -> sits.tvc_lm_head: rank-1 preview ('head.tvc_left' [8 x 1], 'head.tvc_right' [1 x 4], per-row bounds 'head.tvc_bounds'), 3 candidates scored exactly, full head where the proof fails
// AUDIT-NEXT: rule: every logit is at most its preview plus {{.*}} so greedy and top-2 are exact; SVD {{[0-9.]+}} s (randomized range finder, 2 power iterations), preview keeps 100.0% of |W|_F^2, largest singular value 14.283

// QUANT-LABEL: func.func @head
// QUANT: %[[D:.*]] = sits.dequantize
// QUANT: sits.weight "head.tvc_left" dense<{{.*}}> : tensor<8x2xf32>
// QUANT: sits.tvc_lm_head %{{.*}}, %[[D]] preview

func.func @head(%h: tensor<?x?x4xf32>) -> tensor<?x?x8xf32> {
  %w = sits.weight "head" dense<[[0.2,0.4,0.4,0.8],[0.4,0.8,0.8,1.6],[0.6,1.2,1.2,2.4],[0.8,1.6,1.6,3.2],[1.0,2.0,2.0,4.0],[1.2,2.4,2.4,4.8],[1.4,2.8,2.8,5.6],[1.6,3.2,3.2,6.4]]> : tensor<8x4xf32>
  %l = sits.lm_head %h, %w : tensor<?x?x4xf32>, tensor<8x4xf32> -> tensor<?x?x8xf32>
  return %l : tensor<?x?x8xf32>
}

// -----

// Heads the proof does not cover are kept, with the reason.
// AUDIT: lm_heads_fused: 0
// AUDIT-NEXT: lm_heads_kept: 3
// AUDIT: - sits.lm_head -> kept
// AUDIT-NEXT: rule: not a TVC head: it has a bias
// AUDIT: - sits.lm_head -> kept
// AUDIT-NEXT: rule: not a TVC head: its activations or weight are not f32 (the proof bounds f32 dot products)
// AUDIT: - sits.lm_head -> kept
// AUDIT-NEXT: rule: not a TVC head: its weight is not a constant (sits.weight or a sits.dequantize of constants)
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: sits.lm_head
func.func @kept(%h: tensor<?x4xf32>, %h16: tensor<?x4xf16>, %wa: tensor<8x4xf32>) -> (tensor<?x8xf32>, tensor<?x8xf16>, tensor<?x8xf32>) {
  %w = sits.weight "w" dense<0.5> : tensor<8x4xf32>
  %b = sits.weight "b" dense<0.5> : tensor<8xf32>
  %w16 = sits.weight "w16" dense<0.5> : tensor<8x4xf16>
  %a = sits.lm_head %h, %w bias(%b : tensor<8xf32>) : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
  %c = sits.lm_head %h16, %w16 : tensor<?x4xf16>, tensor<8x4xf16> -> tensor<?x8xf16>
  %d = sits.lm_head %h, %wa : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
  return %a, %c, %d : tensor<?x8xf32>, tensor<?x8xf16>, tensor<?x8xf32>
}

// RANK: error: sits-fuse-tvc: tvc-rank must be between 1 and the hidden size - 1 (3), got 4
// CANDIDATES: error: sits-fuse-tvc: tvc-candidates must be between 1 and the vocabulary size (8), got 9
// TOP: error: sits-fuse-tvc: tvc-top-k must be between 1 and tvc-candidates (2), got 3
