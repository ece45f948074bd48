// #sits.weight_view: a constant read transposed, sliced and/or in another
// float type. It prints and parses back, and the reference executor reads
// its values (row n of a transposed view is column n of the source; f16 to
// f32 is exact, f32 to f16 rounds to nearest even; a slice is the block at
// its offsets, taken after the transpose).
// RUN: sits-opt %s | sits-opt | FileCheck %s
// REQUIRES: python-onnx
// RUN: rm -rf %t && sits-exec %s --function views --output-dir %t
// RUN: %python -c "import numpy as np; print(np.load('%t/result_0.npy').tolist(), np.load('%t/result_1.npy').tolist())" | FileCheck %s --check-prefix=VALUES
// VALUES: {{\[\[}}1.0, 4.0], [2.0, 5.0], [3.0, 6.0]] {{\[\[}}1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
// RUN: rm -rf %t && sits-exec %s --function slices --output-dir %t
// RUN: %python -c "import numpy as np; print(*[np.load('%t/result_%d.npy' % i).tolist() for i in range(4)])" | FileCheck %s --check-prefix=SLICES
// The columns 1..2 of the source, its transpose's rows 1..2 (the source's
// columns 1..2, as rows), the resource's second row in f16, a splat's block.
// SLICES: {{\[\[}}2.0, 3.0], [5.0, 6.0]] {{\[\[}}2.0, 5.0], [3.0, 6.0]] {{\[\[}}4.0, 5.0, 6.0]] {{\[\[}}7.0], [7.0]]

// CHECK-LABEL: func.func @views
// CHECK: sits.weight "t" #sits.weight_view<dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf16>, transposed> : tensor<3x2xf32>
// CHECK: sits.weight "r" #sits.weight_view<dense_resource<blob1> : tensor<2x3xf32>> : tensor<2x3xf16>
func.func @views() -> (tensor<3x2xf32>, tensor<2x3xf16>) {
  %t = sits.weight "t" #sits.weight_view<dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf16>, transposed> : tensor<3x2xf32>
  %r = sits.weight "r" #sits.weight_view<dense_resource<blob1> : tensor<2x3xf32>> : tensor<2x3xf16>
  return %t, %r : tensor<3x2xf32>, tensor<2x3xf16>
}

// CHECK-LABEL: func.func @slices
// CHECK: sits.weight "c" #sits.weight_view<dense<{{.*}}> : tensor<2x3xf32>, offsets = [0, 1]> : tensor<2x2xf32>
// CHECK: sits.weight "t" #sits.weight_view<dense<{{.*}}> : tensor<2x3xf16>, transposed, offsets = [1, 0]> : tensor<2x2xf32>
// CHECK: sits.weight "r" #sits.weight_view<dense_resource<blob1> : tensor<2x3xf32>, offsets = [1, 0]> : tensor<1x3xf16>
func.func @slices() -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<1x3xf16>, tensor<2x1xf32>) {
  %c = sits.weight "c" #sits.weight_view<dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>, offsets = [0, 1]> : tensor<2x2xf32>
  %t = sits.weight "t" #sits.weight_view<dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf16>, transposed, offsets = [1, 0]> : tensor<2x2xf32>
  %r = sits.weight "r" #sits.weight_view<dense_resource<blob1> : tensor<2x3xf32>, offsets = [1, 0]> : tensor<1x3xf16>
  %s = sits.weight "s" #sits.weight_view<dense<7.0> : tensor<4x3xf32>, offsets = [2, 1]> : tensor<2x1xf32>
  return %c, %t, %r, %s : tensor<2x2xf32>, tensor<2x2xf32>, tensor<1x3xf16>, tensor<2x1xf32>
}

{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F0000004000004040000080400000A0400000C040"
    }
  }
#-}
