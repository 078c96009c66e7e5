#!/usr/bin/env bash
# `cujax bench attention` prints one RESULT line per length (the lines scripts/gpu-check.sh
# reads) with a positive TFLOP/s, and refuses a bad --seq or --implementation as usage errors.
# Usage: cli_bench_attention_test.sh CUJAX SOURCE_DIR
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
finish cli_bench_attention
