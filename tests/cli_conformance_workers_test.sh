#!/usr/bin/env bash
# `cujax stablehlo-test` with one worker per job running many files gives the same verdict per
# file as a fresh process per file, on a mix of passing programs, programs that fail to parse
# and one that never ends (timed out, its worker replaced, the files after it still run).
# Usage: cli_conformance_workers_test.sh CUJAX SOURCE_DIR SHARED_DIR
set -uo pipefail
cujax="$1"
src="$2"
shared="${CUJAX_SHARED_DIR:-$3}"
source "$src/tests/cli_test_lib.sh"
data="$shared/conformance/stablehlo-testdata"
ext="$shared/conformance/stablehlo-testdata-ext"
if [ ! -d "$data" ]; then
  echo "SKIP: conformance data not found at $data (set CUJAX_SHARED_DIR to the shared/ folder)"
  exit 77
fi
data="$(cd "$data" && pwd)"  # the links below must not be relative
[ -d "$ext" ] && ext="$(cd "$ext" && pwd)"
mkdir "$work/files"
# Sorted by name: the hanging program runs in the middle of the others.
ls "$data"/*.mlir | head -150 | xargs -I{} ln -s {} "$work/files/"
[ -d "$ext" ] && ls "$ext"/*.mlir | head -20 | xargs -I{} ln -s {} "$work/files/"
cp "$src/tests/fixtures/conformance_hang.mlir" "$work/files/m_hang.mlir"
total=$(ls "$work/files" | wc -l)

run() {  # run OUT ARGS...: the sorted PASS/FAIL lines
  "$cujax" stablehlo-test --platform cpu -j 2 --timeout 3 --min-pass-rate 0 -v "$@" \
    "$work/files" 2>/dev/null | grep -E '^(PASS|FAIL) ' | sort
}
run --process-per-file >"$work/per_file"
run >"$work/workers"
[ "$(wc -l <"$work/per_file")" -eq "$total" ] || fail "per-file run: $(wc -l <"$work/per_file") verdicts for $total files"
[ "$(wc -l <"$work/workers")" -eq "$total" ] || fail "worker run: $(wc -l <"$work/workers") verdicts for $total files"
grep -q "m_hang.mlir: timed out" "$work/workers" || fail "the hanging program is not reported as timed out"
passed=$(grep -c '^PASS' "$work/workers")
[ "$passed" -ge 100 ] || fail "only $passed programs passed with workers"
diff "$work/per_file" "$work/workers" || fail "workers and per-file processes disagree (above)"
echo "$total files, $passed passed, the same verdicts both ways"
finish cli_conformance_workers
