// Never ends: a while loop whose condition is always true (tests/cli_conformance_workers_test.sh).
module @jit_main {
  func.func public @main() -> tensor<i64> {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.while(%i = %c) : tensor<i64>
     cond {
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i64>
      %n = stablehlo.add %i, %one : tensor<i64>
      stablehlo.return %n : tensor<i64>
    }
    return %0 : tensor<i64>
  }
}
