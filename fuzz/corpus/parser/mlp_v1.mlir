module @jit_mlp attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x5xf32> loc("params.dense1.kernel"), %arg1: tensor<5xf32> loc("params.dense1.bias"), %arg2: tensor<5x2xf32> loc("params.dense2.kernel"), %arg3: tensor<2xf32> loc("params.dense2.bias"), %arg4: tensor<4x3xf32> loc("x"), %arg5: tensor<4xi32> loc("labels"), %arg6: tensor<4x2xbf16> loc("gate")) -> (tensor<4x2xf32> {jax.result_info = "result[0]"}, tensor<i32> {jax.result_info = "result[1]"}, tensor<4x2xbf16> {jax.result_info = "result[2]"}, tensor<f64> {jax.result_info = "result[3]"}) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f64>
    %0 = stablehlo.dot_general %arg4, %arg0, contracting_dims = [1] x [0] : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<5xf32>) -> tensor<4x5xf32>
    %2 = stablehlo.add %0, %1 : tensor<4x5xf32>
    %3 = stablehlo.tanh %2 : tensor<4x5xf32>
    %4 = stablehlo.dot_general %3, %arg2, contracting_dims = [1] x [0] : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
    %5 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<2xf32>) -> tensor<4x2xf32>
    %6 = stablehlo.add %4, %5 : tensor<4x2xf32>
    %7 = stablehlo.iota dim = 1 : tensor<4x2xi32>
    %8:2 = stablehlo.reduce(%6 init: %cst), (%7 init: %c) across dimensions = [1] : (tensor<4x2xf32>, tensor<4x2xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
     reducer(%arg7: tensor<f32>, %arg9: tensor<f32>) (%arg8: tensor<i32>, %arg10: tensor<i32>)  {
      %16 = stablehlo.compare  GT, %arg7, %arg9,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %17 = stablehlo.compare  NE, %arg7, %arg7,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %18 = stablehlo.or %16, %17 : tensor<i1>
      %19 = stablehlo.compare  EQ, %arg7, %arg9,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %20 = stablehlo.compare  LT, %arg8, %arg10,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %21 = stablehlo.and %19, %20 : tensor<i1>
      %22 = stablehlo.or %18, %21 : tensor<i1>
      %23 = stablehlo.select %18, %arg7, %arg9 : tensor<i1>, tensor<f32>
      %24 = stablehlo.select %22, %arg8, %arg10 : tensor<i1>, tensor<i32>
      stablehlo.return %23, %24 : tensor<f32>, tensor<i32>
    }
    %9 = stablehlo.compare  EQ, %8#1, %arg5,  SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %10 = stablehlo.convert %9 : (tensor<4xi1>) -> tensor<4xi32>
    %11 = stablehlo.reduce(%10 init: %c_0) applies stablehlo.add across dimensions = [0] : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
    %12 = stablehlo.convert %6 : (tensor<4x2xf32>) -> tensor<4x2xbf16>
    %13 = stablehlo.multiply %arg6, %12 : tensor<4x2xbf16>
    %14 = stablehlo.convert %6 : (tensor<4x2xf32>) -> tensor<4x2xf64>
    %15 = stablehlo.reduce(%14 init: %cst_1) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x2xf64>, tensor<f64>) -> tensor<f64>
    return %6, %11, %13, %15 : tensor<4x2xf32>, tensor<i32>, tensor<4x2xbf16>, tensor<f64>
  }
}
