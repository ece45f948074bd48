// A mask that is runtime data (a padding mask input): folding keeps it, and
// the KV-cache pass then refuses the program.
func.func @forward(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %pad = sits.weight "pad" dense<true> : tensor<1x1x3x3xi1>
  %a = sits.attention %q, %q, %q mask(%pad : tensor<1x1x3x3xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}
