// RUN: sits-opt %s --sits-print-symbolic-shapes --split-input-file --verify-diagnostics --allow-unregistered-dialect -o /dev/null

// The analysis on hand-written IR: dims of the arguments come from their
// `sits.dim_names`; shape computations keep those symbols.

// Reshape(x, Concat(Shape(x)[0], Shape(x)[1], [-1], [32])) of [batch, seq,
// 128] is [batch, seq, 4, 32], with the same symbols.
func.func @reshape_by_shape(%x: tensor<?x?x128xf32> {sits.dim_names = ["batch", "seq", ""]}) -> tensor<?x?x4x32xf32> {
  // expected-remark @+1 {{dims [2] values [-1, 32]}}
  %tail = onnx.Constant {value_ints = array<i64: -1, 32>} : tensor<2xi64>
  // expected-remark @+1 {{dims [3] values [batch, seq, 128]}}
  %shape = onnx.Shape %x : (tensor<?x?x128xf32>) -> tensor<3xi64>
  // expected-remark @+1 {{dims [1] values [0]}}
  %zero = onnx.Constant {value_ints = array<i64: 0>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [batch]}}
  %b = onnx.Gather %shape, %zero : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [seq]}}
  %s = onnx.Shape %x {start = 1 : i64, end = 2 : i64} : (tensor<?x?x128xf32>) -> tensor<1xi64>
  // expected-remark @+1 {{dims [4] values [batch, seq, -1, 32]}}
  %target = onnx.Concat %b, %s, %tail {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  // expected-remark @+1 {{dims [batch, seq, 4, 32]}}
  %r = onnx.Reshape %x, %target : (tensor<?x?x128xf32>, tensor<4xi64>) -> tensor<?x?x4x32xf32>
  return %r : tensor<?x?x4x32xf32>
}

// -----

// Sizes computed from symbols: seq + 1 from a Concat, batch * seq from a
// flattening Reshape, and back.
func.func @arithmetic(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}, %x: tensor<?x?x8xf32> {sits.dim_names = ["batch", "seq", ""]}) {
  // expected-remark @+1 {{dims [1] values [1]}}
  %c1 = onnx.Constant {value_ints = array<i64: 1>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [0]}}
  %c0 = onnx.Constant {value_ints = array<i64: 0>} : tensor<1xi64>
  // expected-remark @+1 {{dims [batch, 1]}}
  %first = onnx.Slice %ids, %c0, %c1 axes %c1 : (tensor<?x?xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  // expected-remark @+1 {{dims [batch, seq + 1]}}
  %cat = onnx.Concat %first, %ids {axis = 1 : i64} : (tensor<?x1xi64>, tensor<?x?xi64>) -> tensor<?x?xi64>
  // expected-remark @+1 {{dims [2] values [-1, 8]}}
  %flat = onnx.Constant {value_ints = array<i64: -1, 8>} : tensor<2xi64>
  // expected-remark @+1 {{dims [batch * seq, 8]}}
  %rows = onnx.Reshape %x, %flat : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  // expected-remark @+1 {{dims [3] values [batch, seq, 8]}}
  %back_shape = onnx.Shape %x : (tensor<?x?x8xf32>) -> tensor<3xi64>
  // expected-remark @+1 {{dims [batch, seq, 8]}}
  %back = onnx.Reshape %rows, %back_shape : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  return
}

// -----

// Positions: Range(0, seq) is element d0; unsqueezed and broadcast over the
// batch it is element d1 at index (d0, d1): arange(seq) broadcast.
func.func @positions(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) {
  // expected-remark @+1 {{dims [] values [0] element 0}}
  %zero = onnx.Constant {value_int = 0 : i64} : tensor<i64>
  // expected-remark @+1 {{dims [] values [1] element 1}}
  %one = onnx.Constant {value_int = 1 : i64} : tensor<i64>
  // expected-remark @+1 {{dims [1] values [seq]}}
  %s = onnx.Shape %ids {start = 1 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  // expected-remark @+1 {{dims [] values [seq]}}
  %seq = onnx.Squeeze %s : (tensor<1xi64>) -> tensor<i64>
  // expected-remark @+1 {{dims [seq] element d0}}
  %arange = onnx.Range %zero, %seq, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  // expected-remark @+1 {{dims [1] values [0]}}
  %axis = onnx.Constant {value_ints = array<i64: 0>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1, seq] element d1}}
  %row = onnx.Unsqueeze %arange, %axis : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  // expected-remark @+1 {{dims [2] values [batch, seq]}}
  %shape = onnx.Shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  // expected-remark @+1 {{dims [batch, seq] element d1}}
  %positions = onnx.Expand %row, %shape : (tensor<1x?xi64>, tensor<2xi64>) -> tensor<?x?xi64>
  // expected-remark @+1 {{dims [batch, seq] element d1 + 1}}
  %shifted = onnx.Add %positions, %one : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  return
}

// -----

// Slices with the exporters' INT64_MAX / INT64_MIN bounds, and negative
// indices, on shape vectors.
func.func @slices(%x: tensor<?x4x?x32xf32> {sits.dim_names = ["batch", "", "seq", ""]}) {
  // expected-remark @+1 {{dims [4] values [batch, 4, seq, 32]}}
  %shape = onnx.Shape %x : (tensor<?x4x?x32xf32>) -> tensor<4xi64>
  // expected-remark @+1 {{dims [1] values [-1]}}
  %m1 = onnx.Constant {value_ints = array<i64: -1>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [-2]}}
  %m2 = onnx.Constant {value_ints = array<i64: -2>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [9223372036854775807]}}
  %max = onnx.Constant {value_ints = array<i64: 9223372036854775807>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [-9223372036854775808]}}
  %min = onnx.Constant {value_ints = array<i64: -9223372036854775808>} : tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [32]}}
  %last = onnx.Slice %shape, %m1, %max : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  // expected-remark @+1 {{dims [1] values [seq]}}
  %second = onnx.Slice %shape, %m2, %m1 : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  // expected-remark @+1 {{dims [2] values [batch, 4]}}
  %lead = onnx.Slice %shape, %min, %m2 : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  // expected-remark @+1 {{dims [3] values [-1, seq, 32]}}
  %flat_shape = onnx.Concat %m1, %second, %last {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  // expected-remark @+1 {{dims [batch * 4, seq, 32]}}
  %flat = onnx.Reshape %x, %flat_shape : (tensor<?x4x?x32xf32>, tensor<3xi64>) -> tensor<?x?x32xf32>
  return
}

// -----

// sits ops keep the symbols of their operands.
func.func @sits_ops(%x: tensor<?x?x128xf32> {sits.dim_names = ["batch", "seq", ""]}, %w: tensor<64x128xf32>) {
  // expected-remark @+1 {{dims [batch, seq, 64]}}
  %0 = sits.linear %x, %w : tensor<?x?x128xf32>, tensor<64x128xf32> -> tensor<?x?x64xf32>
  // expected-remark @+1 {{dims [batch, 2, seq, 32]}}
  %1 = sits.split_heads %0 {num_heads = 2 : i64} : tensor<?x?x64xf32> -> tensor<?x2x?x32xf32>
  // expected-remark @+1 {{dims [batch, seq, 64]}}
  %2 = sits.merge_heads %1 : tensor<?x2x?x32xf32> -> tensor<?x?x64xf32>
  return
}

// -----

// Ops without a rule fall back to their type, with a fresh unknown symbol
// per dynamic dim.
func.func @unknown(%x: tensor<?x8xf32> {sits.dim_names = ["n", ""]}) {
  // expected-remark @+1 {{dims [?1, 8]}}
  %0 = "test.unknown"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return
}
