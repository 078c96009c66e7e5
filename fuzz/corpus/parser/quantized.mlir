func.func @main(%arg0: tensor<2x3x!quant.uniform<i8<-127:127>:f32:1, {0.1:-30, 0.5:-20, 2.0}>>, %arg1: tensor<4xf16>) -> (tensor<2x3xf32>, tensor<4xf16>) {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2x!quant.uniform<u8:f32, 0.25:128>>
  %1 = stablehlo.uniform_dequantize %arg0 : (tensor<2x3x!quant.uniform<i8<-127:127>:f32:1, {0.1:-30, 0.5:-20, 2.0}>>) -> tensor<2x3xf32>
  %2 = stablehlo.uniform_quantize %arg1 : (tensor<4xf16>) -> tensor<4x!quant.uniform<i4:f16, 0.5:1>>
  %3 = stablehlo.add %2, %2 : (tensor<4x!quant.uniform<i4:f16, 0.5:1>>, tensor<4x!quant.uniform<i4:f16, 0.5:1>>) -> tensor<4x!quant.uniform<i4:f16, 1.0:-2>>
  %4 = stablehlo.uniform_dequantize %3 : (tensor<4x!quant.uniform<i4:f16, 1.0:-2>>) -> tensor<4xf16>
  return %1, %4 : tensor<2x3xf32>, tensor<4xf16>
}
