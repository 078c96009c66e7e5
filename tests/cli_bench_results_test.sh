#!/usr/bin/env bash
# `cujax bench attention` and `cujax bench decode` print one RESULT line per length or batch
# size (the lines scripts/gpu-check.sh reads) with a positive figure, and refuse bad options as
# usage errors.
# Usage: cli_bench_results_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"
"$cujax" bench attention --platform cpu --seq 16,32 --heads 1 --implementation xla >"$work/out" 2>&1 ||
  fail "cujax bench attention: exit status $?"
for T in 16 32; do
  grep -qE "^RESULT cujax\.attention\.xla\.T$T=[0-9.e+-]+ unit=TFLOP/s$" "$work/out" ||
    fail "no RESULT line for T=$T"
done
awk -F'[= ]' '/^RESULT/ && $3 + 0 <= 0 { bad = 1 } END { exit bad }' "$work/out" ||
  fail "a RESULT line is not positive"
[ "$failures" -eq 0 ] || cat "$work/out"
expect_usage_error "--seq 0" "--seq takes lengths" bench attention --platform cpu --seq 0
expect_usage_error "--implementation" "must be xla or cudnn" bench attention --platform cpu --implementation flash

"$cujax" bench decode --platform cpu --config tiny --batch 1,3 >"$work/decode" 2>&1 ||
  fail "cujax bench decode: exit status $?"
for b in 1 3; do
  grep -qE "^RESULT cujax\.decode\.tiny\.b$b=[0-9.e+-]+ unit=ms/token$" "$work/decode" ||
    { fail "no decode RESULT line for batch $b"; cat "$work/decode"; }
done
awk -F'[= ]' '/^RESULT/ && $3 + 0 <= 0 { bad = 1 } END { exit bad }' "$work/decode" ||
  fail "a decode RESULT line is not positive"
expect_usage_error "--batch 0" "--batch takes sizes" bench decode --platform cpu --batch 0
expect_usage_error "--config" "unknown config" bench decode --platform cpu --config huge
finish cli_bench_results
