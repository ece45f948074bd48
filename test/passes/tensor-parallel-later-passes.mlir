// The passes after sits-tensor-parallel that do not split their work over
// ranks yet refuse a rank's part of a weight instead of skipping it.
// RUN: not sits-opt %s --sits-insert-qdq="weights=int8 weight-group=16" 2>&1 | FileCheck %s --check-prefix=QDQ
// RUN: not sits-opt %s --sits-fuse-tvc="tvc-rank=1 tvc-candidates=2" 2>&1 | FileCheck %s --check-prefix=TVC
// QDQ: error: sits-insert-qdq: the weights of a tensor-parallel program are not quantized yet (this one is a sits.shard)
// TVC: error: sits-fuse-tvc: the LM head of a tensor-parallel program has no TVC head yet (its weight is a sits.shard of the vocabulary)

module attributes {sits.tensor_parallel = 2 : i64} {
  func.func @head(%x: tensor<?x?x16xf32>) -> tensor<?x?x8xf32> {
    %w = sits.weight "head" dense<0.25> : tensor<8x16xf32>
    %part = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x16xf32> -> tensor<4x16xf32>
    %logits = sits.lm_head %x, %part : tensor<?x?x16xf32>, tensor<4x16xf32> -> tensor<?x?x4xf32>
    %all = sits.all_gather %logits {ranks = 2} : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
    return %all : tensor<?x?x8xf32>
  }
}
