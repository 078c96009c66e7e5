#!/usr/bin/env bash
# The `cujax` command's options (CLI11): `--help` for every subcommand on stdout with exit 0,
# option lists that agree with the top-level usage and docs/training.md, `--name=value` and
# `--name value`, and every usage error one line on stderr with exit status 2.
# Usage: cli_options_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"

"$cujax" --help >"$work/usage" || fail "cujax --help: exit status $?"
commands="doctor compile stablehlo-test train generate export run checkpoint"
benches="dispatch train attention decode scaling"
if grep -q '^  serve ' "$work/usage"; then
  commands="$commands serve"
  benches="$benches serve"
fi
check_help() {
  local name="$1"
  shift
  "$cujax" "$@" --help >"$work/help" 2>"$work/err"
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name --help: exit status $rc"; cat "$work/err"; return; fi
  [ -s "$work/err" ] && { fail "$name --help wrote to stderr"; cat "$work/err"; }
  grep -q "^Usage: cujax $name \[OPTIONS\]" "$work/help" || { fail "$name --help: no usage line"; cat "$work/help"; }
  grep -q -- "-h,--help" "$work/help" || fail "$name --help does not list --help"
  # `-h` is the same.
  "$cujax" "$@" -h | cmp -s - "$work/help" || fail "$name -h differs from $name --help"
}
for c in $commands; do check_help "$c" "$c"; done
for b in $benches; do check_help "bench $b" bench "$b"; done
"$cujax" bench --help | grep -q '^  scaling ' || fail "cujax bench --help does not list the benchmarks"

# Every option the top-level usage names for a command is one its --help lists, and the reverse
# for train, whose options docs/training.md documents in a table.
for c in compile stablehlo-test generate; do
  "$cujax" "$c" --help >"$work/help"
  awk -v c="$c" '$1 == c { on = 1; next } /^  [a-z]/ { on = 0 } on' "$work/usage" |
    grep -o -- '--[a-z][a-z-]*' | sort -u >"$work/named"
  while read -r opt; do
    grep -q -- " $opt\b" "$work/help" || fail "$c: the usage names $opt, but $c --help lacks it"
  done <"$work/named"
done
"$cujax" train --help | grep -o -- '^  --[a-z][a-z-]*' | sed 's/^ *//' | sort -u >"$work/train_help"
sed -n '/^## `cujax train`/,/^## /p' "$src/docs/training.md" | grep -o '^| `--[a-z-]*`\(, `--[a-z-]*`\)*' |
  grep -o -- '--[a-z-]*' | sort -u >"$work/train_doc"
grep -qx -- '--steps' "$work/train_doc" || fail "docs/training.md's option table was not found"
echo "--dump-batches" >>"$work/train_doc"  # documented under "Reproducing a run's batches"
echo "--profile" >>"$work/train_doc"       # documented in docs/profiling.md
sort -u -o "$work/train_doc" "$work/train_doc"
diff "$work/train_doc" "$work/train_help" >"$work/diff" ||
  { fail "cujax train --help and docs/training.md list different options"; cat "$work/diff"; }

# Both spellings of a value reach the same check; the last of a repeated option wins.
expect_usage_error "--steps=0" "--steps must be at least 1" train --steps=0 --out "$work/r"
expect_usage_error "--steps 0" "--steps must be at least 1" train --steps 0 --out "$work/r"
expect_usage_error "repeated --steps" "--steps must be at least 1, got 0" train --steps 5 --steps 0
expect_usage_error "negative value" "--steps must be at least 1, got -3" train --steps -3
expect_usage_error "unknown option" "unknown option --epochs" train --epochs 3
expect_usage_error "unknown option=value" "unknown option --epochs\$" train --epochs=3
expect_usage_error "unknown short option" "unknown option -x" stablehlo-test -x "$work"
expect_usage_error "missing value" "--steps" train --steps
expect_usage_error "flag with a value" "--resume takes no value" train --resume=maybe
expect_usage_error "stray argument" "unexpected argument 'extra'" generate --model "$work" extra
expect_usage_error "no FILE" "stablehlo-test needs at least one FILE or DIR" stablehlo-test -j 2
expect_usage_error "bad -j" "-j must be at least 1" stablehlo-test -j 0 "$work"
expect_usage_error "unknown benchmark" "unknown benchmark 'nope'" bench nope
# `--` ends the options: what follows is a file, even when it starts with a dash.
printf 'func.func @main() {\n  %%0 = stablehlo.constant dense<2> : tensor<i32>\n  check.expect_eq_const %%0, dense<2> : tensor<i32>\n  return\n}\n' >"$work/-odd.mlir"
(cd "$work" && "$cujax" stablehlo-test --platform cpu -- -odd.mlir) >"$work/out" 2>&1 ||
  { fail "stablehlo-test -- -odd.mlir: exit status $?"; cat "$work/out"; }
grep -q '1 passed, 0 failed' "$work/out" || { fail "stablehlo-test -- -odd.mlir did not run it"; cat "$work/out"; }

finish cli_options
