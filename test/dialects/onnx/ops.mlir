// RUN: sits-opt %s | FileCheck %s
// RUN: sits-opt %s | sits-opt | FileCheck %s
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt | FileCheck %s

// Every op prints in the custom form and parses back; attributes keep their
// ONNX names; optional operands are spelled with keywords where several can
// be absent.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<2x3xf32>, %y: tensor<3xf32>, %c: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: onnx.Add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = onnx.Add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Max %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = onnx.Max %0, %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = onnx.Where %c, %1, %x : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Gelu %{{.*}} {approximate = "tanh"}
  %3 = onnx.Gelu %2 {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: onnx.Cast %{{.*}} {to = 10 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %4 = onnx.Cast %3 {to = 10 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  // CHECK: onnx.Clip %{{.*}} max %{{.*}} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %m = onnx.Constant {value_float = 6.0 : f32} : tensor<f32>
  %5 = onnx.Clip %3 max %m : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %5 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<?x?x128xf32>) -> tensor<?x?x4x32xf32> {
  // CHECK: onnx.Shape %{{.*}} {end = 1 : i64} : (tensor<?x?x128xf32>) -> tensor<1xi64>
  %b = onnx.Shape %x {end = 1 : i64} : (tensor<?x?x128xf32>) -> tensor<1xi64>
  %s = onnx.Shape %x {start = 1 : i64, end = 2 : i64} : (tensor<?x?x128xf32>) -> tensor<1xi64>
  // CHECK: onnx.Constant {value_ints = array<i64: -1, 32>} : tensor<2xi64>
  %tail = onnx.Constant {value_ints = array<i64: -1, 32>} : tensor<2xi64>
  // CHECK: onnx.Concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64}
  %shape = onnx.Concat %b, %s, %tail {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  // CHECK: onnx.Reshape %{{.*}}, %{{.*}} {allowzero = 1 : i64}
  %r = onnx.Reshape %x, %shape {allowzero = 1 : i64} : (tensor<?x?x128xf32>, tensor<4xi64>) -> tensor<?x?x4x32xf32>
  return %r : tensor<?x?x4x32xf32>
}

// CHECK-LABEL: func.func @slicing
func.func @slicing(%x: tensor<4x8xf32>, %i: tensor<1xi64>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  // Axes absent, steps given.
  // CHECK: onnx.Slice %{{.*}}, %{{.*}}, %{{.*}} steps %{{.*}} : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x4xf32>
  %0 = onnx.Slice %x, %i, %i steps %i : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x4xf32>
  // CHECK: onnx.Slice %{{.*}}, %{{.*}}, %{{.*}} axes %{{.*}} : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x4xf32>
  %1 = onnx.Slice %x, %i, %i axes %i : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x4xf32>
  // CHECK: %{{.*}}:2 = onnx.Split %{{.*}} {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %2:2 = onnx.Split %x {axis = 1 : i64, num_outputs = 2 : i64} : (tensor<4x8xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return %0, %1, %2#0 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<2x4x5x8xf32>, %k: tensor<2x2x5x8xf32>, %m: tensor<2x1x5x5xi1>, %w: tensor<8xf32>) -> (tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>) {
  // CHECK: onnx.RMSNormalization %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32}
  %0 = onnx.RMSNormalization %x, %w {epsilon = 1.0e-6 : f32} : (tensor<2x4x5x8xf32>, tensor<8xf32>) -> tensor<2x4x5x8xf32>
  // CHECK: %{{.*}}, %{{.*}}:2 = onnx.LayerNormalization %{{.*}}, %{{.*}}, %{{.*}}
  %1, %stats:2 = onnx.LayerNormalization %x, %w, %w : (tensor<2x4x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x5x8xf32>, tensor<2x4x5x1xf32>, tensor<2x4x5x1xf32>)
  // CHECK: onnx.Attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {is_causal = 1 : i64, scale = 5.000000e-01 : f32}
  %2 = onnx.Attention %x, %k, %k mask %m {is_causal = 1 : i64, scale = 0.5 : f32} : (tensor<2x4x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x1x5x5xi1>) -> tensor<2x4x5x8xf32>
  return %0, %1, %2 : tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>
}
