// A one-op StableHLO test for `cujax stablehlo-test --platform` (tests/cli_platform_test.sh).
module @jit_main {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<[-1.5, 2.0]> : tensor<2xf32>
    %1 = stablehlo.constant dense<[1.5, 2.0]> : tensor<2xf32>
    %2 = stablehlo.abs %0 : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %2 : tensor<2xf32>
  }
}
