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
  // expected-error @+1 {{a weight view that neither transposes nor converts its source}}
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
