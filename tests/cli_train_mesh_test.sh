#!/usr/bin/env bash
# `cujax train --mesh`: data-parallel (data=2) and data x tensor-parallel (data=2,model=2) runs
# of the same steps give the single-device run's losses (metrics.csv, one row per step) within
# 1e-4 relative: only the order of the sums over the batch and the split kernels differs.
# A log row's loss is the mean over its steps. Bad meshes give one error line and exit status 2.
# Usage: cli_train_mesh_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"
# The count comes from --mesh here, not from the caller's environment.
unset CUJAX_NUM_CPU_DEVICES XLA_FLAGS

corpus="$work/corpus.txt"
write_corpus "$corpus"
small=(train --config tiny --data "$corpus" --batch 4 --seq 32 --steps 5 --log-every 1 --eval-every 5 --eval-batches 1)

expect_usage_error "bad syntax" "must look like data=N" "${small[@]}" --mesh data --out "$work/x"
expect_usage_error "zero size" "must look like data=N" "${small[@]}" --mesh data=0 --out "$work/x"
expect_usage_error "unknown axis" "unknown mesh axis 'batch'" "${small[@]}" --mesh batch=2 --out "$work/x"
expect_usage_error "axis twice" "axis 'data' is given twice" "${small[@]}" --mesh data=2,data=2 --out "$work/x"
expect_usage_error "batch does not divide" "--batch 4 does not divide by the mesh's data axis (3)" \
  "${small[@]}" --mesh data=3 --out "$work/x"
expect_usage_error "heads do not divide" "4 heads and d_ff 512 must divide" "${small[@]}" --mesh model=3 --out "$work/x"
CUJAX_NUM_CPU_DEVICES=8 expect_usage_error "device count conflict" "needs 2 cpu devices, but" \
  "${small[@]}" --mesh data=2 --out "$work/x"

"$cujax" "${small[@]}" --out "$work/one" >"$work/one.log" 2>&1 || { fail "single-device run"; cat "$work/one.log"; }
for mesh in data=2 data=2,model=2; do
  "$cujax" "${small[@]}" --mesh "$mesh" --out "$work/$mesh" >"$work/$mesh.log" 2>&1 ||
    { fail "--mesh $mesh run"; cat "$work/$mesh.log"; continue; }
  grep -q "^mesh: Mesh('data': 2" "$work/$mesh.log" || fail "--mesh $mesh did not print the mesh"
  losses_match "$work/one/metrics.csv" "$work/$mesh/metrics.csv" 5 ||
    fail "--mesh $mesh losses differ from one device's"
done

# One log row for all five steps: its train_loss is the mean of the five steps' losses (the
# first step, which compiles, is timed apart but still counted in the loss).
"$cujax" "${small[@]}" --log-every 5 --mesh data=2 --out "$work/window" >"$work/window.log" 2>&1 ||
  { fail "--log-every 5 run"; cat "$work/window.log"; }
awk -F, 'NR == FNR { if (FNR > 1) sum += $2; next }
  FNR == 2 { d = $2 - sum / 5; if (d < 0) d = -d; if ($1 != 5 || d > 1e-4 * $2) {
    printf "step %s: logged %s, mean of the steps %s\n", $1, $2, sum / 5; exit 1 } }' \
  "$work/one/metrics.csv" "$work/window/metrics.csv" || fail "a log's train_loss is not its steps' mean"

finish cli_train_mesh_test
