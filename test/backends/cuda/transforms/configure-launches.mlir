// RUN: sits-opt %s --split-input-file --kernel-fuse-rope-append --kernel-choose-operand-layout --kernel-configure-launches | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-fuse-rope-append --kernel-choose-operand-layout --kernel-configure-launches --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --kernel-configure-launches="dtype=fp32" | FileCheck %s --check-prefix=FP32

// Every one-kernel launch names its kernel and block: whole warps of about
// one 16-byte piece of the embedding row a thread (8 elements a piece in
// fp16, 4 in fp32), 8 norm elements, 4 RoPE/append elements (the fused
// query's row counts), at most 256 / 512 / 256 threads; 256 for the
// elementwise ops.
// Attention (and linear layers) are other passes' (no config here).

// CHECK-LABEL: func.func @decode
// CHECK: sits.embedding {{.*}}{kernel.config = #kernel.config<embedding, threads = 128, weight_bytes = 0>}
// CHECK: sits.rms_norm {{.*}}kernel.config = #kernel.config<rms_norm, threads = 128, weight_bytes = 0>}
// CHECK: sits.layer_norm {{.*}}kernel.config = #kernel.config<layer_norm, threads = 32, weight_bytes = 0>}
// CHECK: kernel.launch <rope_kv_append> attributes {kernel.config = #kernel.config<append_kv, threads = 64, weight_bytes = 0>}
// CHECK: sits.attention {{.*}}{causal = #sits.causal<bottom_right>, num_heads
// CHECK: sits.rope {{.*}}{kernel.config = #kernel.config<rope, threads = 64, weight_bytes = 0>, rotary_dim
// CHECK: sits.glu <silu> {{.*}}{kernel.config = #kernel.config<elementwise, threads = 256, weight_bytes = 0>}
// CHECK: sits.activation {{.*}}kernel.config = #kernel.config<elementwise, threads = 256, weight_bytes = 0>}
// CHECK: sits.add {{.*}}{kernel.config = #kernel.config<elementwise, threads = 64, weight_bytes = 0>}

// FP32: sits.embedding {{.*}}{kernel.config = #kernel.config<embedding, threads = 256, weight_bytes = 0>}
// FP32: sits.kv_cache.append {{.*}}{kernel.config = #kernel.config<append_kv, threads = 32, weight_bytes = 0>}

// AUDIT-LABEL: pass kernel-configure-launches
// AUDIT-NEXT: embedding: 1
// AUDIT-NEXT: rms_norm: 1
// AUDIT-NEXT: layer_norm: 1
// AUDIT-NEXT: rope: 1
// AUDIT-NEXT: append_kv: 1
// AUDIT-NEXT: elementwise: 3
// AUDIT-NEXT: - sits.embedding -> #kernel.config<embedding, threads = 128, weight_bytes = 0>
// AUDIT-NEXT: rule: 128 16-byte pieces a row: 128 threads, about 1 each (at most 256 threads)
// AUDIT-NEXT: from: embed
// AUDIT-NEXT: - sits.rms_norm -> #kernel.config<rms_norm, threads = 128, weight_bytes = 0>
// AUDIT-NEXT: rule: 1024 elements a row: 128 threads, about 8 each (at most 512 threads)
// AUDIT: - kernel.launch -> #kernel.config<append_kv, threads = 64, weight_bytes = 0>
// AUDIT-NEXT: rule: 256 elements a row: 64 threads, about 4 each (at most 256 threads)
// AUDIT: - sits.rope -> #kernel.config<rope, threads = 64, weight_bytes = 0>
// AUDIT-NEXT: rule: 256 elements a row: 64 threads, about 4 each (at most 256 threads)
// AUDIT: - sits.add -> #kernel.config<elementwise, threads = 64, weight_bytes = 0>
// AUDIT-NEXT: rule: given in the input

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 2, capacity = 64, head_dim = 64, element_type = f32, layout = <contiguous>>

func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv, %q: tensor<?x4x?x64xf32>, %k: tensor<?x2x?x64xf32>, %v: tensor<?x2x?x64xf32>, %cos: tensor<?x?x32xf32>, %sin: tensor<?x?x32xf32>, %h: tensor<?x?x48xf32>, %g: tensor<?x?x48xf32>) -> (tensor<?x?x1024xf32>, tensor<?x?x48xf32>, tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>, tensor<?x?x48xf32>, tensor<?x?x48xf32>, !kv) {
  %embed = sits.weight "embed" dense<1.0e-3> : tensor<40x1024xf32>
  %norm = sits.weight "norm" dense<1.0> : tensor<1024xf32>
  %ln = sits.weight "ln" dense<1.0> : tensor<48xf32>
  %past = sits.kv_cache.length %kv : !kv -> tensor<?xi64>
  %x = sits.embedding %embed[%ids] : tensor<40x1024xf32>, tensor<?x1xi64> -> tensor<?x?x1024xf32> loc("embed")
  %n = sits.rms_norm %x, %norm {epsilon = 1.0e-6 : f32} : tensor<?x?x1024xf32>, tensor<1024xf32> -> tensor<?x?x1024xf32>
  %l = sits.layer_norm %h, %ln {epsilon = 1.0e-5 : f32} : tensor<?x?x48xf32>, tensor<48xf32> -> tensor<?x?x48xf32>
  %kr = sits.rope %k, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 64} : tensor<?x2x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32> -> tensor<?x2x?x64xf32>
  %qr = sits.rope %q, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 64} : tensor<?x4x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32> -> tensor<?x4x?x64xf32>
  %kv1 = sits.kv_cache.append %kv[0], %kr, %v at %past : !kv, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?xi64>
  %key, %value = sits.kv_cache.read %kv1[0] : !kv -> tensor<?x2x64x64xf32>, tensor<?x2x64x64xf32>
  %a = sits.attention %qr, %key, %value past_len(%past : tensor<?xi64>) {num_heads = 4, num_kv_heads = 2, scale = 0.125 : f32, causal = #sits.causal<bottom_right>} : tensor<?x4x?x64xf32>, tensor<?x2x64x64xf32>, tensor<?x2x64x64xf32> -> tensor<?x4x?x64xf32>
  %r = sits.rope %a, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 64} : tensor<?x4x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32> -> tensor<?x4x?x64xf32>
  %y = sits.glu <silu> %h, %g : tensor<?x?x48xf32>
  %z = sits.activation <gelu_tanh> %y : tensor<?x?x48xf32>
  %s = sits.add %z, %l {kernel.config = #kernel.config<elementwise, threads = 64, weight_bytes = 0>} : tensor<?x?x48xf32>
  return %n, %l, %a, %r, %y, %s, %kv1 : tensor<?x?x1024xf32>, tensor<?x?x48xf32>, tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>, tensor<?x?x48xf32>, tensor<?x?x48xf32>, !kv
}
