// What a #sits.weight_view refuses, with the message users see.
// RUN: sits-opt %s -split-input-file -verify-diagnostics

func.func @not_the_transpose() {
  // expected-error @+1 {{a transposing weight view of tensor<2x3xf32> must be its transpose, got tensor<2x3xf32>}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>, transposed> : tensor<2x3xf32>
  return
}

// -----

func.func @other_shape() {
  // expected-error @+1 {{a weight view of tensor<2x3xf32> must have its shape, got tensor<6xf16>}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>> : tensor<6xf16>
  return
}

// -----

func.func @integers() {
  // expected-error @+1 {{a weight view converts between f16, bf16 and f32 only, got i8 to f32}}
  %w = sits.weight "w" #sits.weight_view<dense<1> : tensor<2x3xi8>> : tensor<2x3xf32>
  return
}

// -----

func.func @nothing() {
  // expected-error @+1 {{a weight view that neither transposes, slices nor converts its source}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>> : tensor<2x3xf32>
  return
}

// -----

func.func @view_of_a_view() {
  // expected-error @+1 {{a weight view cannot view another view (view its source once)}}
  %w = sits.weight "w" #sits.weight_view<#sits.weight_view<dense<1.0> : tensor<2x3xf16>> : tensor<2x3xf32>, transposed> : tensor<3x2xf32>
  return
}

// -----

func.func @no_type() {
  // expected-error @+1 {{a weight view needs its type}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf16>, transposed>
  return
}

// -----

func.func @slice_outside() {
  // expected-error @+1 {{a weight view slice at [1, 2] of shape tensor<2x2xf32> is not inside tensor<2x3xf32>}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>, offsets = [1, 2]> : tensor<2x2xf32>
  return
}

// -----

func.func @slice_after_the_transpose() {
  // The transpose of [2, 3] is [3, 2]: a [2, 3] block does not fit.
  // expected-error @+1 {{a weight view slice at [0, 0] of shape tensor<2x3xf32> is not inside tensor<3x2xf16>}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf16>, transposed, offsets = [0, 0]> : tensor<2x3xf32>
  return
}

// -----

func.func @slice_offsets_per_dimension() {
  // expected-error @+1 {{a weight view slice of tensor<2x3xf32> needs one offset per dimension and the same rank, got offsets [1] and tensor<1x3xf32>}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>, offsets = [1]> : tensor<1x3xf32>
  return
}

// -----

func.func @slice_middle_dimension() {
  // expected-error @+1 {{a weight view slice cuts only the first and last dimensions of tensor<2x4x6xf32> (its rows must be evenly spaced), got tensor<2x2x6xf32>}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x4x6xf32>, offsets = [0, 2, 0]> : tensor<2x2x6xf32>
  return
}

// -----

func.func @slice_of_the_whole() {
  // expected-error @+1 {{a weight view slice that takes the whole of tensor<2x3xf32> (leave out the offsets)}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>, offsets = [0, 0]> : tensor<2x3xf32>
  return
}

// -----

func.func @slice_no_offsets() {
  // expected-error @+1 {{a weight view's offsets need one per dimension}}
  %w = sits.weight "w" #sits.weight_view<dense<1.0> : tensor<2x3xf32>, offsets = []> : tensor<2x3xf32>
  return
}
