#!/usr/bin/env bash
# A checkpoint save of `cujax train` that runs out of space: a run stopped (SIGKILL) once step
# 4 is committed resumes under a 64 KiB file-size limit (RLIMIT_FSIZE with SIGXFSZ ignored, so
# a write past it fails with EFBIG as on a full disk; the parameter chunks are ~240 KB). The
# resume must exit non-zero with an error naming the file it could not write, leave no
# partial step behind, and leave the last committed step restorable: resumed without the
# limit, the run ends bit-identical to an uninterrupted one.
# Usage: cli_train_disk_full_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"
unset CUJAX_NUM_CPU_DEVICES XLA_FLAGS
base="$work"
if shm=$(mktemp -d -p /dev/shm cujax-full.XXXXXX 2>/dev/null); then
  base="$shm"  # tmpfs: free fsyncs
  trap 'rm -rf "$work" "$shm"' EXIT
fi
corpus="$work/corpus.txt"
write_corpus "$corpus"
steps=30
run_args=(--config tiny --data "$corpus" --batch 4 --seq 32 --steps $steps)
run_options=(--log-every 1 --eval-every 10 --eval-batches 1 --checkpoint-every 2)

"$cujax" train "${run_args[@]}" "${run_options[@]}" --out "$base/ref" >"$work/ref.log" 2>&1 ||
  { fail "the uninterrupted run"; cat "$work/ref.log"; exit 1; }

committed() {
  comm -12 <(ls "$1/checkpoints" 2>/dev/null | grep -x '[0-9]*' | sort) \
    <(ls "$1/opt_state" 2>/dev/null | grep -x '[0-9]*' | sort) | sort -n | tail -1
}

out="$base/full"
"$cujax" train "${run_args[@]}" "${run_options[@]}" --out "$out" >"$work/first.log" 2>&1 &
pid=$!
for ((i = 0; i < 600; i++)); do
  [ -n "$(committed "$out")" ] && [ "$(committed "$out")" -ge 4 ] && break
  sleep 0.05
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
last=$(committed "$out")
[ -n "$last" ] && [ "$last" -lt $steps ] || { fail "the first run committed step '$last'"; exit 1; }
echo "first run stopped with step $last committed"

(trap '' XFSZ; ulimit -f 64; exec "$cujax" train --resume "${run_options[@]}" --out "$out") \
  >"$work/full.log" 2>&1
rc=$?
cat "$work/full.log" | grep -v '^step'
[ $rc -ne 0 ] || fail "the resume under the file-size limit exited with status 0"
grep -Eq "cannot write $out/(checkpoints|opt_state)/[0-9]+[^ ]*/[^ ]+: File too large" "$work/full.log" ||
  fail "no error naming the file that could not be written"
[ "$(committed "$out")" = "$last" ] ||
  fail "the last committed step is $(committed "$out"), not $last"
ls -d "$out"/checkpoints/*tmp* "$out"/opt_state/*tmp* 2>/dev/null && fail "a partial save is left"

"$cujax" train --resume "${run_options[@]}" --out "$out" >"$work/last.log" 2>&1 ||
  { fail "the resume without the limit"; cat "$work/last.log"; }
grep -q "resuming $out at step $last of" "$work/last.log" || fail "did not resume at step $last"
cmp -s <(cut -d, -f1-4 "$base/ref/metrics.csv") <(cut -d, -f1-4 "$out/metrics.csv") ||
  fail "metrics.csv differs from the uninterrupted run's"
expect_same_checkpoints "$base/ref" "$out" "$steps" ""

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "cli_train_disk_full_test: all checks passed"
