#!/usr/bin/env bash
# What CI can check of scripts/gpu-check.sh without a GPU or JAX: the Python it runs compiles,
# --dry-run prints every stage with its limit and the table's layout (running nothing), a packed
# archive is unpacked and used, and the table reads figures from stage logs into the right cells
# and ratios.
# Usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="$1"
build="$2"
source "$src/tests/cli_test_lib.sh"
cd "$src" || exit 1

PYTHONPYCACHEPREFIX="$work/pycache" python3 -m py_compile bench/table.py bench/jax/*.py \
  tools/jax_bridge/*.py || fail "the Python files of the harness do not compile"

scripts/gpu-check.sh --dry-run "$build" >"$work/dry" 2>&1 || fail "--dry-run: exit status $?"
for stage in doctor train-tiny jax-train-tiny train-gpt2 jax-train-gpt2 attention jax-attention \
  decode jax-decode dispatch jax-dispatch interop cudnn-attention gpu-tests conformance serve; do
  grep -qE "^$stage +dry run +limit +[0-9]+s$" "$work/dry" || fail "--dry-run lists no stage $stage"
done
grep -q "^=== cujax against JAX" "$work/dry" || fail "--dry-run prints no table"
grep -q "^train gpt2: tokens/s, f32 .* not run .* not run" "$work/dry" ||
  fail "--dry-run's table has no 'not run' row for gpt2"
grep -q "^cujax-restores-orbax (ocdbt) .*not run" "$work/dry" || fail "no interop row in --dry-run"
grep -q "^=== doctor" "$work/dry" && grep -q "(limit 30s) $build/cujax doctor" "$work/dry" ||
  fail "--dry-run does not print the doctor stage's command"
[ -z "$(grep -l 'steady-state' "$work/dry")" ] || fail "--dry-run ran a stage"

# A packed folder carried as one archive (--pack's DIR.tar.xz) is unpacked beside itself and used.
mkdir "$work/packed" && echo binary >"$work/packed/cujax"
tar -C "$work/packed" -cJf "$work/gpu-bin.tar.xz" . || fail "cannot make an archive to unpack"
scripts/gpu-check.sh --dry-run "$work/gpu-bin.tar.xz" >"$work/dry-archive" 2>&1 ||
  fail "--dry-run with an archive: exit status $?"
[ "$(cat "$work/gpu-bin/cujax" 2>/dev/null)" = binary ] || fail "the archive was not unpacked"
grep -q "(limit 30s) $work/gpu-bin/cujax doctor" "$work/dry-archive" ||
  fail "--dry-run with an archive does not run the unpacked folder's cujax"

# The table from made-up logs: one cell and one ratio of each kind.
log="$work/log"
mkdir "$log"
printf 'step,train_loss,val_loss,learning_rate,tokens_per_s,elapsed_s\n5,5,nan,0.003,900,1\n10,4,nan,0.003,2000,2\n15,3,nan,0.003,3000,3\n' \
  >"$log/metrics-tiny.csv"
echo "(the first, with compilation: 2.50 s)" >"$log/train-tiny.txt"
cat >"$log/jax-train-tiny.txt" <<'LOG'
jax 0.11.0 on NVIDIA H200: config tiny (842496 parameters), 20 steps of 16 x 128 tokens
RESULT jax.train.tiny.float32.tokens_per_s=1250 unit=tokens/s
RESULT jax.train.tiny.float32.compile_s=1.25 unit=s
LOG
echo "RESULT cujax.attention.cudnn.T4096=300 unit=TFLOP/s" >"$log/attention-cudnn.txt"
echo "RESULT jax.attention.cudnn.T4096=600 unit=TFLOP/s" >"$log/jax-attention.txt"
printf 'max-batch 8        96     9.52    610.1      812      901      35.1      12.00     0\n' >"$log/serve.txt"
echo "RESULT jax.decode.small.b8=3 unit=ms/token" >"$log/jax-decode.txt"
echo "CHECK cujax-restores-orbax (zarr) pass max |diff| 1e-06" >"$log/interop.txt"
python3 bench/table.py "$log" >"$work/table" 2>&1 || fail "table.py: exit status $?"
expect_row() {  # expect_row PATTERN: a line of the table matches
  grep -qE "$1" "$work/table" || fail "no table line matches: $1"
}
# cujax tokens/s: the median of the windows after the first (2000 and 3000), 2500.
expect_row "^train tiny: tokens/s, f32 +tokens/s +2,500 +1,250 +2\.00 "
expect_row "^train tiny: MFU of the bf16 peak +% +[0-9.]+ +not run"
expect_row "^train tiny: cold compile of the step +s +2\.5 +1\.25 +2\.00 "
expect_row "^attention T=4096, implementation=cudnn +TFLOP/s +300 +600 +0\.50 "
expect_row "^serve small, 8 slot\(s\): TPOT +ms/token +12 +3 +4\.00 "
expect_row "^cujax-restores-orbax \(zarr\) +pass "
expect_row "NVIDIA H200; bf16 peak 989 TFLOP/s"
[ "$failures" -eq 0 ] || cat "$work/table"
finish gpu_check
