# Sourced by the CLI tests after they set `cujax`: a scratch folder $work (removed on exit),
# fail() counting failures, expect_usage_error, expect_same_checkpoints, and finish NAME to end
# with the count.

# Sanitizer builds (CUJAX_TEST_TIME_SCALE > 1, set by tests/CMakeLists.txt for the debug preset)
# run several times slower: waits for progress, and bounds whose clock includes start-up or
# compiling a step, are multiplied by it.
time_scale="${CUJAX_TEST_TIME_SCALE:-1}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_usage_error WHAT PATTERN ARGS...: `cujax ARGS...` exits with status 2 and exactly one
# line on stderr, which contains PATTERN.
expect_usage_error() {
  local what="$1" pattern="$2"
  shift 2
  "$cujax" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$rc" -ne 2 ]; then fail "$what: exit status $rc, expected 2"; cat "$work/err"; return; fi
  if [ "$(wc -l <"$work/err")" -ne 1 ]; then fail "$what: stderr is not one line"; cat "$work/err"; fi
  grep -q -- "$pattern" "$work/err" || { fail "$what: stderr lacks '$pattern'"; cat "$work/err"; }
}

# The corpus the training tests read: the project's own documentation.
write_corpus() {
  cat "$src"/docs/*.md "$src"/README.md >"$1"
}

# losses_match ONE.csv OTHER.csv STEPS: metrics.csv files (step, train_loss, val_loss) with STEPS
# rows each and one validation loss, OTHER's losses within 1e-4 relative of ONE's. Prints the
# steps that differ.
losses_match() {
  awk -F, -v steps="$3" '
    NR == FNR { if (FNR > 1) { want[$1] = $2; val[$1] = $3 } next }
    FNR > 1 {
      n++
      d = $2 - want[$1]; if (d < 0) d = -d
      if (d > 1e-4 * want[$1]) { printf "step %d: loss %s, one device %s\n", $1, $2, want[$1]; bad = 1 }
      if ($3 != "nan") { d = $3 - val[$1]; if (d < 0) d = -d; if (d > 1e-4 * val[$1]) bad = 1; nv++ }
    }
    END { if (n != steps || nv != 1) { print "expected " steps " rows and 1 validation loss"; bad = 1 }
          exit bad }' "$1" "$2"
}

finish() {
  if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
  echo "$1: all checks passed"
}

# same_leaves A B: the checkpoints A and B hold the same leaves bit for bit: each converted to
# safetensors (`cujax checkpoint convert`, sorted and deterministic) and the files compared.
# Orbax's OCDBT layout names its data files at random, so its files are not compared themselves.
same_leaves() {
  rm -f "$work/a.safetensors" "$work/b.safetensors"
  "$cujax" checkpoint convert "$1" "$work/a.safetensors" --to safetensors &&
    "$cujax" checkpoint convert "$2" "$work/b.safetensors" --to safetensors &&
    cmp -s "$work/a.safetensors" "$work/b.safetensors"
}

# expect_same_checkpoints REF OUT STEP WHAT: the parameters and optimizer state of step STEP
# in run OUT are bit-identical to those of run REF (same_leaves).
expect_same_checkpoints() {
  local ref=$1 out=$2 step=$3 what=$4 part
  for part in checkpoints opt_state; do
    same_leaves "$ref/$part/$step/default" "$out/$part/$step/default" ||
      fail "$what$part/$step differs from the uninterrupted run's"
  done
}
