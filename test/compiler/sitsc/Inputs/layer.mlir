func.func @layer(%x: tensor<?x?x128xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x128xf32> {
  %w = sits.weight "model.layers.0.input_layernorm.weight" dense<1.0> : tensor<128xf32>
  %wq = sits.weight "q" dense<0.5> : tensor<128x128xf32>
  %n = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32>
  %q = sits.linear %n, %wq : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %qh = sits.split_heads %q {num_heads = 4} : tensor<?x?x128xf32> -> tensor<?x4x?x32xf32>
  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  %c, %s = sits.rope_cos_sin %pos {inv_freq = dense<[1.0, 0.5]> : tensor<2xf32>} : tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
  %r = sits.rope %qh, %c, %s {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x4x?x32xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x4x?x32xf32>
  %a = sits.attention %r, %r, %r {num_heads = 4, num_kv_heads = 4, scale = 0.125 : f32, causal = #sits.causal<bottom_right>} : tensor<?x4x?x32xf32>, tensor<?x4x?x32xf32>, tensor<?x4x?x32xf32> -> tensor<?x4x?x32xf32>
  %m = sits.merge_heads %a : tensor<?x4x?x32xf32> -> tensor<?x?x128xf32>
  %g = sits.glu <silu> %m, %m : tensor<?x?x128xf32>
  %o = sits.add %g, %x : tensor<?x?x128xf32>
  return %o : tensor<?x?x128xf32>
}
