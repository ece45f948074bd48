// A two-layer decoder in the sits dialect (what raising produces), for the
// sitsc option tests.
func.func @forward(%ids: tensor<?x?xi64>) -> tensor<?x?x16xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %wq = sits.weight "wq" dense<0.25> : tensor<8x8xf32>
  %wkv = sits.weight "wkv" dense<0.125> : tensor<4x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  %cos, %sin = sits.rope_cos_sin %pos {inv_freq = dense<[1.0, 0.1]> : tensor<2xf32>} : tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
  %q0 = sits.linear %x, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %k0 = sits.linear %x, %wkv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %qh0 = sits.split_heads %q0 {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %kh0 = sits.split_heads %k0 {num_heads = 1} : tensor<?x?x4xf32> -> tensor<?x1x?x4xf32>
  %qr0 = sits.rope %qh0, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x2x?x4xf32>
  %kr0 = sits.rope %kh0, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x1x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x1x?x4xf32>
  %a0 = sits.attention %qr0, %kr0, %kh0 {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x2x?x4xf32>
  %m0 = sits.merge_heads %a0 : tensor<?x2x?x4xf32> -> tensor<?x?x8xf32>
  %h1 = sits.add %x, %m0 : tensor<?x?x8xf32>
  %q1 = sits.linear %h1, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %k1 = sits.linear %h1, %wkv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %qh1 = sits.split_heads %q1 {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %kh1 = sits.split_heads %k1 {num_heads = 1} : tensor<?x?x4xf32> -> tensor<?x1x?x4xf32>
  %a1 = sits.attention %qh1, %kh1, %kh1 {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x2x?x4xf32>
  %m1 = sits.merge_heads %a1 : tensor<?x2x?x4xf32> -> tensor<?x?x8xf32>
  %h2 = sits.add %h1, %m1 : tensor<?x?x8xf32>
  %logits = sits.lm_head %h2, %table {tied} : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
