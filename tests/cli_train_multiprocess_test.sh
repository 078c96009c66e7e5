#!/usr/bin/env bash
# `cujax train --mesh data=2` as 2 processes of 1 cpu device each, over TCP through a
# coordinator and under `mpirun -np 2` (and `--mesh model=2` over TCP: kernels split across the
# processes, gathered for the checkpoints), against one process:
# - the same run on 2 virtual devices in one process (the same --mesh): every step's loss, the
#   validation loss and the final parameters' checkpoint chunks are identical, bit for bit
#   (the same partitioned program, and collectives that sum in group order wherever the
#   devices are);
# - the run on one device (no --mesh): losses within 1e-4 relative, final parameters within
#   1e-3 (|a - b| / max(1, |b|)). Only the order of the sums differs, but Adam divides each
#   gradient by its own scale, so where a gradient is nearly zero (the attention's key bias
#   gets none: softmax ignores it) rounding differences become updates of up to the learning
#   rate (3e-3); measured 5e-5.
# Process 0 alone prints and writes the run. Exits 77 (skipped) after the TCP runs when mpirun
# or MPI is missing.
# Usage: cli_train_multiprocess_test.sh CUJAX SOURCE_DIR CHECKPOINT_DIFF
set -uo pipefail
cujax="$1"
src="$2"
checkpoint_diff="$3"
source "$src/tests/cli_test_lib.sh"
unset CUJAX_NUM_CPU_DEVICES XLA_FLAGS
export CUJAX_COLLECTIVE_TIMEOUT=60

corpus="$work/corpus.txt"
write_corpus "$corpus"
steps=4
small=(train --config tiny --data "$corpus" --batch 4 --seq 32 --steps $steps --log-every 1
  --eval-every $steps --eval-batches 1)
params() { echo "$1/checkpoints/$steps/default"; }

"$cujax" "${small[@]}" --out "$work/one" >"$work/one.log" 2>&1 ||
  { fail "one-device run"; cat "$work/one.log"; }
for mesh in data=2 model=2; do
  "$cujax" "${small[@]}" --mesh $mesh --out "$work/$mesh" >"$work/$mesh.log" 2>&1 ||
    { fail "one-process --mesh $mesh run"; cat "$work/$mesh.log"; }
done

# The run in $1 with --mesh $2 (written by process 0 of 2; the processes' output in $1.log)
# against the one-process runs.
check_run() {
  local run="$1" mesh="$2" what="$3"
  local axis="${mesh%=*}"
  [ "$(grep -c "^mesh: Mesh('$axis': 2) on cpu:0..1 across 2 processes of 1 device(s)" "$run.log")" -eq 1 ] ||
    fail "$what: not one mesh line from process 0"
  # step, train_loss, val_loss: the same text as the one-process mesh run's.
  cmp -s <(cut -d, -f1-3 "$work/$mesh/metrics.csv") <(cut -d, -f1-3 "$run/metrics.csv") ||
    { fail "$what: losses differ from the one-process --mesh $mesh run's"; \
      paste -d' ' "$work/$mesh/metrics.csv" "$run/metrics.csv"; }
  same_leaves "$(params "$work/$mesh")" "$(params "$run")" ||
    fail "$what: parameters differ from the one-process --mesh $mesh run's"
  losses_match "$work/one/metrics.csv" "$run/metrics.csv" "$steps" ||
    fail "$what: losses differ from the one-device run's"
  "$checkpoint_diff" "$(params "$work/one")" "$(params "$run")" 1e-3 ||
    fail "$what: parameters differ from the one-device run's"
}

# Two processes meeting at a coordinator on localhost (no MPI needed): train ARGS... into
# $run; the exit statuses in $statuses, the processes' output in $run.log.
tcp_train() {
  local pids=() port i p
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
    port=$((20000 + ($$ * 7 + RANDOM) % 20000))
  for i in 0 1; do
    CUJAX_NUM_CPU_DEVICES=1 timeout 180 "$cujax" "${small[@]}" "$@" --out "$run" \
      --coordinator 127.0.0.1:$port --num-processes 2 --process-id $i >"$run.$i.log" 2>&1 &
    pids+=($!)
  done
  statuses=""
  for p in "${pids[@]}"; do wait "$p"; statuses+="$? "; done
  cat "$run.0.log" "$run.1.log" >"$run.log"
}
for mesh in data=2 model=2; do
  run="$work/tcp-$mesh"
  tcp_train --mesh "$mesh"
  if [ "$statuses" != "0 0 " ]; then fail "--mesh $mesh as 2 processes over TCP: exit statuses $statuses"; cat "$run.log"; continue; fi
  check_run "$run" "$mesh" "--mesh $mesh over TCP"
  [ -s "$run.1.log" ] && fail "process 1 printed: $(head -3 "$run.1.log")"
done
# Into an existing run without --overwrite: every process stops at once with the error (none
# is left waiting for the others in a collective).
run="$work/tcp-data=2"
SECONDS=0
tcp_train --mesh data=2
[ "$statuses" = "2 2 " ] && [ "$(grep -c "already holds a training run" "$run.log")" -eq 2 ] &&
  [ $SECONDS -lt 30 ] || { fail "existing run: statuses $statuses after $SECONDS s"; cat "$run.log"; }

skip=""
if ! command -v mpirun >/dev/null; then
  skip="no mpirun on PATH (install openmpi-bin)"
else
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_plm_rsh_agent=""  # one machine: no ssh
  CUJAX_NUM_CPU_DEVICES=1 timeout 180 mpirun -np 2 --oversubscribe --mca btl self,tcp \
    -x CUJAX_NUM_CPU_DEVICES -x CUJAX_COLLECTIVE_TIMEOUT \
    "$cujax" "${small[@]}" --mesh data=2 --out "$work/mpi" >"$work/mpi.log" 2>&1
  rc=$?
  if grep -q "built without MPI" "$work/mpi.log"; then
    skip="cujax was built without MPI (install libopenmpi-dev and reconfigure)"
  elif [ $rc -ne 0 ]; then
    fail "mpirun -np 2 exited with $rc"; cat "$work/mpi.log"
  else
    check_run "$work/mpi" data=2 "--mesh data=2 under mpirun"
  fi
fi

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
if [ -n "$skip" ]; then echo "TCP runs passed; mpirun runs SKIPPED: $skip"; exit 77; fi
echo "cli_train_multiprocess_test: all checks passed"
