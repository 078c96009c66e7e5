#!/usr/bin/env bash
# Crash consistency of `cujax train`: runs killed with SIGKILL at 20 random moments in all
# (drawn from a fixed seed, printed below; CUJAX_CRASH_SEED picks another) across their steps
# and checkpoint saves, and continued with --resume after each kill, end bit-identical to the
# same run uninterrupted. A run that finishes before the 20th kill (a fast machine outruns
# the kills) is checked, and the next kills go to a fresh run. Checked: every row's step, mean train loss since the last row (a window that
# checkpoints cut), validation loss and learning rate in
# metrics.csv, and the final parameters' and optimizer state's checkpoint chunks. Each resume
# must continue from the latest step committed in both checkpoints/ and opt_state/ when it
# started. The runs go to /dev/shm where it is writable: tmpfs makes the checkpoints' fsyncs
# free (a SIGKILL loses no written page, so that changes nothing here).
# Usage: cli_train_crash_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"
unset CUJAX_NUM_CPU_DEVICES XLA_FLAGS
seed="${CUJAX_CRASH_SEED:-26}"
kills_wanted=20
echo "kill moments drawn with seed $seed"
RANDOM=$seed
base="$work"
if shm=$(mktemp -d -p /dev/shm cujax-crash.XXXXXX 2>/dev/null); then
  base="$shm"
  trap 'rm -rf "$work" "$shm"' EXIT
fi
corpus="$work/corpus.txt"
write_corpus "$corpus"
steps=120
run_args=(--config tiny --data "$corpus" --batch 4 --seq 32 --steps $steps --seed 3)
# Logs every 3 steps and checkpoints every 2: a resume must restore a log window cut in two.
run_options=(--log-every 3 --eval-every 20 --eval-batches 1 --checkpoint-every 2)

"$cujax" train "${run_args[@]}" "${run_options[@]}" --out "$base/ref" >"$work/ref.log" 2>&1 ||
  { fail "the uninterrupted run"; cat "$work/ref.log"; exit 1; }

# The latest step whose parameters and optimizer state are both committed, or nothing.
committed() {
  comm -12 <(ls "$1/checkpoints" 2>/dev/null | grep -x '[0-9]*' | sort) \
    <(ls "$1/opt_state" 2>/dev/null | grep -x '[0-9]*' | sort) | sort -n | tail -1
}

kills=0
attempt=0
round=0
while [ $kills -lt $kills_wanted ]; do
  round=$((round + 1))
  [ $round -le 10 ] || { fail "10 runs finished with only $kills kills: give them more steps"; break; }
  out="$base/crash.$round"
  while [ $kills -lt $kills_wanted ]; do
    attempt=$((attempt + 1))
    from=$(committed "$out")
    if [ -z "$from" ]; then
      args=(train "${run_args[@]}" "${run_options[@]}" --out "$out" --overwrite)
    else
      args=(train --resume "${run_options[@]}" --out "$out")
    fi
    log="$work/attempt.$attempt.log"
    "$cujax" "${args[@]}" >"$log" 2>&1 &
    pid=$!
    # A quarter of the kills land in the start-up (loading, restoring, compiling), the others
    # 0 to 200 ms after the first log at or past a step 1 to 4 steps on, among the steps and
    # the saves every 2 steps.
    if ((RANDOM % 4 == 0)); then
      ms=$((100 + RANDOM % 900))
      moment="$ms ms after the start"
    else
      target=$((${from:-0} + 1 + RANDOM % 4))
      ms=$((RANDOM % 200))
      moment="$ms ms after step $target"
      for ((i = 0; i < 600; i++)); do
        awk -v t=$target '$1 == "step" && $2 + 0 >= t { found = 1 } END { exit !found }' "$log" && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
      done
    fi
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    if kill -9 $pid 2>/dev/null; then
      wait $pid 2>/dev/null
      kills=$((kills + 1))
      echo "kill $kills $moment (run $round started from step ${from:-0}): step $(committed "$out") committed"
    else
      wait $pid
      rc=$?
      [ $rc -eq 0 ] || { fail "attempt $attempt exited with $rc before its kill"; cat "$log"; }
      echo "attempt $attempt finished run $round before its kill $moment"
      break
    fi
    if [ -n "$from" ] && grep -q "resuming" "$log"; then
      grep -q "resuming $out at step $from of" "$log" ||
        fail "attempt $attempt did not resume from step $from: $(grep resuming "$log")"
    fi
  done
  # Finishes a run the last kill interrupted (a finished run resumes at its last step).
  "$cujax" train --resume "${run_options[@]}" --out "$out" >"$work/last.log" 2>&1 ||
    { fail "the last --resume of run $round"; cat "$work/last.log"; }
  echo "run $round: $(grep -c '' "$out/metrics.csv") lines in metrics.csv after $kills kills in all"
  [ "$(grep -c '' "$out/metrics.csv")" -eq "$(grep -c '' "$base/ref/metrics.csv")" ] ||
    fail "run $round: metrics.csv lost rows"
  cmp -s <(cut -d, -f1-4 "$base/ref/metrics.csv") <(cut -d, -f1-4 "$out/metrics.csv") ||
    { fail "run $round: metrics.csv differs from the uninterrupted run's (step, train_loss, val_loss, learning_rate)"
      diff <(cut -d, -f1-4 "$base/ref/metrics.csv") <(cut -d, -f1-4 "$out/metrics.csv") | head -10; }
  expect_same_checkpoints "$base/ref" "$out" "$steps" "run $round: "
  rm -rf "$out"
done

if [ "$failures" -ne 0 ]; then echo "$failures failure(s) (seed $seed)"; exit 1; fi
echo "cli_train_crash_test: all checks passed"
