#!/usr/bin/env bash
# `cujax stablehlo-test` on programs without check ops: one passes by running; one that prints
# passes when its `// CHECK:` / `// CHECK-NEXT:` lines match what interpreter.print wrote and
# fails, naming the line, when a pattern is missing, out of place or an unsupported directive.
# Usage: cli_conformance_filecheck_test.sh CUJAX
set -uo pipefail
cujax="$1"
source "$(dirname "$0")/cli_test_lib.sh"

program() {  # program CHECK-LINES...: prints iota twice from two run_parallel processes
  printf '%s\n' 'func.func @f() -> tensor<3xi32> {' \
    '  %0 = stablehlo.iota dim = 0 : tensor<3xi32>' \
    '  interpreter.print %0 : tensor<3xi32>' \
    '  return %0 : tensor<3xi32>' '}' 'func.func @main() {'
  for l in "$@"; do printf '  // %s\n' "$l"; done
  printf '%s\n' '  %r:2 = "interpreter.run_parallel"() {programs = [[@f, @f]]} : () -> (tensor<3xi32>, tensor<3xi32>)' \
    '  func.return' '}'
}
verdict() {  # verdict FILE: the PASS/FAIL line
  "$cujax" stablehlo-test --platform cpu --min-pass-rate 0 -v "$1" 2>&1 | grep -E '^(PASS|FAIL) '
}
expect() {  # expect NAME PASS|PATTERN CHECK-LINES...
  local name="$1" want="$2"
  shift 2
  program "$@" >"$work/$name.mlir"
  local got
  got="$(verdict "$work/$name.mlir")"
  if [ "$want" = PASS ]; then
    [[ "$got" == PASS* ]] || fail "$name: expected PASS, got: $got"
  else
    [[ "$got" == FAIL* && "$got" == *"$want"* ]] || fail "$name: expected a FAIL with '$want', got: $got"
  fi
}

expect no_checks PASS
expect both PASS 'CHECK: %0 = tensor<3xi32> {' 'CHECK-NEXT:   [0, 1, 2]' 'CHECK-NEXT: }' \
  'CHECK: %0 = tensor<3xi32> {' 'CHECK-NEXT: [0, 1, 2]' 'CHECK-NEXT: }'
expect third_missing "line 9: CHECK: '[0, 1, 2]' not found" 'CHECK: [0, 1, 2]' 'CHECK: [0, 1, 2]' \
  'CHECK: [0, 1, 2]'
expect wrong_value "CHECK-NEXT: '[0, 1, 3]' not found" 'CHECK: %0 = tensor<3xi32> {' \
  'CHECK-NEXT: [0, 1, 3]'
expect not_next "CHECK-NEXT: '}' not found" 'CHECK: tensor<3xi32>' 'CHECK-NEXT: }'
expect label "directive 'CHECK-LABEL' is not supported" 'CHECK-LABEL: tensor'
finish cli_conformance_filecheck
