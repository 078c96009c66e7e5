#!/usr/bin/env bash
# What CI can check of scripts/gpu-check.sh without a GPU or JAX: the Python it runs compiles;
# --dry-run (running nothing) lists every stage with its command, correctness stages before
# benchmarks and interop last; the worst-case time limits add up within the budget and match
# min(cap, what is left), the correctness stages whole at the default budget; budgets past the
# device tool's command limit are refused; $OUT ends with the archive and the table only, within
# the tool's 8 files and 2 folders (and the run fails when $OUT would not be); CUJAX_CUDNN_DIR is
# set from pip's cuDNN; a packed archive is unpacked and used; the table reads figures from stage
# logs into the right cells and ratios.
# Usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="$1"
build="$2"
source "$src/tests/cli_test_lib.sh"
cd "$src" || exit 1
# The defaults under test, whatever the caller's environment sets.
unset GPU_CHECK_BUDGET GPU_CHECK_COMMAND_LIMIT GPU_CHECK_CARRY_LIMIT_MIB JAX_PYTHON CUJAX_CUDNN_DIR

PYTHONPYCACHEPREFIX="$work/pycache" python3 -m py_compile bench/table.py bench/jax/*.py \
  tools/jax_bridge/*.py || fail "the Python files of the harness do not compile"

# dry_run NAME ARGS...: runs --dry-run with OUT=$work/NAME, its output in $work/NAME.log, the
# table's stage rows (name kind ... limit L cap C from S) in $work/NAME.rows; returns its status.
dry_run() {
  local name="$1"
  shift
  OUT="$work/$name" scripts/gpu-check.sh --dry-run "$@" >"$work/$name.log" 2>&1
  local rc=$?
  sed -n '/^=== stages$/,$p' "$work/$name/gpu-check-table.txt" 2>/dev/null | sed 1d >"$work/$name.rows"
  return $rc
}
# out_within_limits DIR: at most 8 files, nothing more than 2 folders down, names the device
# tool keeps (counted here independently of the script's own check).
out_within_limits() {
  local n
  n=$(find "$1" -mindepth 1 ! -type d | wc -l)
  [ "$n" -le 8 ] || fail "$1 holds $n files (the device tool returns 8)"
  [ -z "$(find "$1" -mindepth 4)" ] || fail "$1 has files more than 2 folders down"
  [ -z "$(find "$1" -mindepth 3 -type d)" ] || fail "$1 has folders 3 down"
  [ -z "$(find "$1" -mindepth 1 -printf '%f\n' | grep -v '^[A-Za-z0-9._-]*$')" ] ||
    fail "$1 has names the device tool drops"
}
# budget_adds_up NAME BUDGET: each row's limit is min(cap, BUDGET - reserve - grace - start), or 0
# and 'skipped: budget spent' under the minimum; each start is the last one plus its limit and
# grace (the worst case); the last ends within BUDGET - reserve. Constants from env.txt.
budget_adds_up() {
  local name="$1" want="$2" env
  env="$(tar -xzOf "$work/$name/gpu-check.tgz" gpu-check/env.txt)" || { fail "$name: no env.txt"; return; }
  [[ "$env" =~ budget:\ ([0-9]+)s,\ reserve\ ([0-9]+)s,\ grace\ ([0-9]+)s,\ min\ stage\ ([0-9]+)s ]] ||
    { fail "$name: env.txt gives no budget line"; return; }
  local budget="${BASH_REMATCH[1]}" reserve="${BASH_REMATCH[2]}" grace="${BASH_REMATCH[3]}"
  local min="${BASH_REMATCH[4]}"
  [ "$budget" = "$want" ] || fail "$name: budget $budget, expected $want"
  awk -v B="$budget" -v R="$reserve" -v G="$grace" -v M="$min" -v name="$name" '
    function bad(why) { print "FAIL: " name ": " $1 ": " why; errors++ }
    match($0, /limit +[0-9]+s +cap +[0-9]+s +from +[0-9]+s$/) {
      split(substr($0, RSTART), f, /[ s]+/)  # limit L cap C from S
      limit = f[2]; cap = f[4]; from = f[6]
      if (n++ && from != next_from) bad("starts at " from "s, the worst case is " next_from "s")
      if (from < 0) bad("starts before the script")
      left = B - R - G - from
      want = cap < left ? cap : left
      if (want < M) {
        if (limit != 0 || $0 !~ /skipped: budget spent/) bad("should be skipped, " left "s left")
      } else if (limit != want) {
        bad("limit " limit "s, expected min(cap " cap ", left " left ") = " want)
      } else if ($0 !~ /dry run/) {
        bad("not planned")
      }
      next_from = from + (limit > 0 ? limit + G : 0)
    }
    END {
      if (n < 20) { print "FAIL: " name ": only " n " stage rows"; errors++ }
      if (next_from > B - R) { print "FAIL: " name ": ends at " next_from "s, past " B - R "s"; errors++ }
      exit errors > 0
    }' "$work/$name.rows" || failures=$((failures + 1))
}
# position NAME STAGE: the stage's row number in NAME's table (0 when missing)
position() { awk -v s="$2" '$1 == s { print NR; found = 1; exit } END { if (!found) print 0 }' "$work/$1.rows"; }

# --- the default budget
dry_run dry "$build" || fail "--dry-run: exit status $?"
for stage in doctor devices gpu-tests cuda-linalg cudnn-attention-forward cudnn-attention-gradient \
  conformance conformance-ext conformance-interpret jax-import train-tiny jax-train-tiny attention \
  attention-cudnn jax-attention decode jax-decode dispatch jax-dispatch bench serve scaling \
  train-gpt2 jax-train-gpt2 interop; do
  grep -q "^=== $stage$" "$work/dry.log" || fail "--dry-run lists no stage $stage"
  [ "$(position dry "$stage")" -gt 0 ] || fail "the table has no row for stage $stage"
done
# The order: doctor first, correctness in the issue's order before every benchmark, interop last.
[ "$(position dry doctor)" = 1 ] || fail "doctor is not the first stage"
prev=0
for stage in gpu-tests cuda-linalg cudnn-attention-forward cudnn-attention-gradient conformance \
  conformance-ext conformance-interpret; do
  p=$(position dry "$stage")
  [ "$p" -gt "$prev" ] || fail "correctness stage $stage out of order (row $p)"
  prev=$p
  grep -qE "^$stage +correctness " "$work/dry.rows" || fail "$stage is not a correctness stage"
done
first_benchmark=$(awk '$2 == "benchmark" { print NR; exit }' "$work/dry.rows")
[ "${first_benchmark:-0}" -gt "$prev" ] || fail "a benchmark runs before the correctness stages end"
[ "$(awk 'END { print $1, $2 }' "$work/dry.rows")" = "interop interop" ] || fail "interop is not last"
[ "$(grep -c ' interop ' "$work/dry.rows")" = 1 ] || fail "more than one interop stage"
# The gtest filters and the commands.
grep -qE "^\(limit [0-9]+s\) .*cuda_test --gtest_filter=-CudnnAttention\.\*:CudaLinalg\.\*$" \
  "$work/dry.log" || fail "gpu-tests does not leave out the CudnnAttention and CudaLinalg tests"
grep -qE "^\(limit [0-9]+s\) .*cuda_test --gtest_filter=CudnnAttention\.Forward\*$" "$work/dry.log" ||
  fail "no forward-only cuDNN attention stage"
grep -qE "^\(limit [0-9]+s\) .*cuda_test --gtest_filter=CudnnAttention\.Gradient\*$" "$work/dry.log" ||
  fail "no gradient cuDNN attention stage"
grep -q "(limit 15s) $build/cujax doctor" "$work/dry.log" || fail "--dry-run does not print the doctor stage's command"
grep -q "cmake" "$work/dry.log" && fail "--dry-run plans a configure or build step (nothing is built on the GPU machine)"
[ -z "$(grep -l 'steady-state' "$work/dry.log")" ] || fail "--dry-run ran a stage"
# The budget: the arithmetic, and at the default budget every correctness stage whole.
budget_adds_up dry 480
awk '$2 == "correctness" && !/dry run/ { print "FAIL: " $1 " not planned"; e++ }
     $2 == "correctness" && match($0, /limit +[0-9]+s +cap +[0-9]+s/) {
       split(substr($0, RSTART, RLENGTH), f, /[ s]+/)
       if (f[2] != f[4]) { print "FAIL: " $1 " cut to " f[2] "s of its " f[4] "s"; e++ } }
     END { exit e > 0 }' "$work/dry.rows" || failures=$((failures + 1))
grep -q "^plan: worst case ends at [0-9]*s of a 480s budget" "$work/dry.log" || fail "no plan line"
# The results: two files in $OUT, the archive holding every stage's log.
out_within_limits "$work/dry"
[ "$(cd "$work/dry" && ls | tr '\n' ' ')" = "gpu-check-table.txt gpu-check.tgz " ] ||
  fail "\$OUT holds $(ls "$work/dry" | tr '\n' ' '), not the archive and the table"
tar -tzf "$work/dry/gpu-check.tgz" >"$work/members" || fail "the archive does not list"
for f in stages.txt table.txt env.txt doctor.txt gpu-tests.txt cudnn-attention-forward.txt \
  cudnn-attention-gradient.txt conformance.txt; do
  grep -qx "gpu-check/$f" "$work/members" || fail "the archive has no gpu-check/$f"
done
[ "$(grep -vc '/$' "$work/members")" -gt 8 ] || fail "the archive holds 8 files or fewer: nothing bundled"
grep -q "^=== cujax against JAX" "$work/dry/gpu-check-table.txt" || fail "the table file has no table"
grep -q "^train gpt2: tokens/s, f32 .* not run .* not run" "$work/dry/gpu-check-table.txt" ||
  fail "--dry-run's table has no 'not run' row for gpt2"
grep -q "^cujax-restores-orbax (ocdbt) .*not run" "$work/dry/gpu-check-table.txt" || fail "no interop row in --dry-run"
# interop_check.py's rows (issues 36 and 39 among them) listed without JAX: a jax, flax, orbax
# and numpy that fail on import stand in, so an import at module level fails this.
mkdir -p "$work/nojax"
for m in jax flax orbax numpy; do
  mkdir -p "$work/nojax/$m" && echo "raise ImportError('$m imported by the dry run')" >"$work/nojax/$m/__init__.py"
done
PYTHONPATH="$work/nojax" PYTHONPYCACHEPREFIX="$work/pycache" python3 tools/jax_bridge/interop_check.py \
  --dry-run >"$work/checks" 2>&1 || fail "interop_check.py --dry-run: $(cat "$work/checks")"
for c in jax-export-forward cujax-export-xla jax-deserializes-cujax-export orbax-restores-cujax \
  "cujax-restores-orbax (zarr)" "cujax-restores-orbax (ocdbt)" prng; do
  grep -qxF "check $c" "$work/checks" || fail "interop_check.py --dry-run lists no $c"
  grep -qE "^$(sed 's/[()]/\\&/g' <<<"$c") +not run" "$work/dry/gpu-check-table.txt" ||
    fail "--dry-run's table has no '$c' row"
done
PYTHONPATH="$work/nojax" python3 bench/table.py "$work/nojax" --dry-run >"$work/nojax.table" 2>&1 ||
  fail "bench/table.py needs JAX: $(tail -3 "$work/nojax.table")"

# --- a small budget: the benchmarks and interop skipped, recorded, the arithmetic still right
dry_run small --budget 200 "$build" || fail "--dry-run --budget 200: exit status $?"
budget_adds_up small 200
grep -qE "^interop +interop +skipped: budget spent" "$work/small.rows" || fail "budget 200: interop not skipped"
grep -qE "^gpu-tests +correctness +dry run" "$work/small.rows" || fail "budget 200: gpu-tests not planned"
GPU_CHECK_BUDGET=300 dry_run env "$build" || fail "GPU_CHECK_BUDGET=300: exit status $?"
budget_adds_up env 300
# Budgets the device tool's 600 s command cannot hold, with the caller's margin, are refused.
for b in 541 600 abc 30; do
  OUT="$work/refused" scripts/gpu-check.sh --dry-run --budget "$b" "$build" >"$work/refused.log" 2>&1
  rc=$?
  [ "$rc" = 2 ] && grep -q "budget '$b' s: give 60 to 540" "$work/refused.log" ||
    fail "--budget $b: exit status $rc, not refused: $(head -c 300 "$work/refused.log")"
done
dry_run max --budget 540 "$build" || fail "--budget 540: exit status $?"
budget_adds_up max 540

# --- $OUT past the tool's limits fails the run: 7 files of the caller's own plus the script's
# two, and a file 3 folders down.
mkdir -p "$work/full" && for i in 1 2 3 4 5 6 7; do echo "$i" >"$work/full/caller-$i.txt"; done
dry_run full "$build" && fail "9 files in \$OUT passed"
grep -q "holds 9 files; the device tool returns 8" "$work/full.log" || fail "no message for 9 files in \$OUT"
mkdir -p "$work/deep/a/b/c" && echo x >"$work/deep/a/b/c/x.txt"
dry_run deep "$build" && fail "a file 3 folders down in \$OUT passed"
grep -q "deeper than 2 folders: a/b/c" "$work/deep.log" || fail "no message for a folder 3 down"

# --- cuDNN's folder: pip's first (a stand-in python3 answering the probe), else none of it;
# a folder the caller set is kept.
real_python="$(command -v python3)"
mkdir -p "$work/fakebin" "$work/site/nvidia/cudnn/lib" "$work/nolib/nvidia/cudnn"
touch "$work/site/nvidia/cudnn/lib/libcudnn.so.9"
cat >"$work/fakebin/python3" <<EOF
#!/usr/bin/env bash
case "\$*" in *nvidia.cudnn*) echo "\$FAKE_CUDNN"; exit 0 ;; esac
exec "$real_python" "\$@"
EOF
chmod +x "$work/fakebin/python3"
PATH="$work/fakebin:$PATH" FAKE_CUDNN="$work/site/nvidia/cudnn" JAX_PYTHON='' \
  dry_run pip "$build" || fail "with pip's cuDNN: exit status $?"
grep -q "^cuDNN: CUJAX_CUDNN_DIR=$work/site/nvidia/cudnn/lib (pip's nvidia-cudnn" "$work/pip/gpu-check-table.txt" ||
  fail "pip's cuDNN folder not chosen: $(grep '^cuDNN' "$work/pip/gpu-check-table.txt")"
# (grep -q reads from files here: in a pipeline under pipefail, its early exit fails tar)
tar -xzOf "$work/pip/gpu-check.tgz" gpu-check/env.txt >"$work/pip.env"
grep -q "CUJAX_CUDNN_DIR=$work/site/nvidia/cudnn/lib" "$work/pip.env" ||
  fail "env.txt does not record cuDNN's folder"
PATH="$work/fakebin:$PATH" FAKE_CUDNN="$work/nolib/nvidia/cudnn" JAX_PYTHON='' \
  dry_run nolib "$build" || fail "with a pip cuDNN lacking its library: exit status $?"
grep -q "^cuDNN: .*$work/nolib" "$work/nolib/gpu-check-table.txt" &&
  fail "a pip folder without libcudnn.so.9 was chosen"
CUJAX_CUDNN_DIR="$work/site/nvidia/cudnn/lib" dry_run given "$build" || fail "with CUJAX_CUDNN_DIR set: exit status $?"
grep -q "^cuDNN: CUJAX_CUDNN_DIR=$work/site/nvidia/cudnn/lib (set by the caller)" "$work/given/gpu-check-table.txt" ||
  fail "the caller's CUJAX_CUDNN_DIR not kept"

# A packed folder carried as one archive (--pack's DIR.tar.xz) is unpacked beside itself and used.
mkdir "$work/packed" && echo binary >"$work/packed/cujax"
tar -C "$work/packed" -cJf "$work/gpu-bin.tar.xz" . || fail "cannot make an archive to unpack"
dry_run archive "$work/gpu-bin.tar.xz" || fail "--dry-run with an archive: exit status $?"
[ "$(cat "$work/gpu-bin/cujax" 2>/dev/null)" = binary ] || fail "the archive was not unpacked"
grep -q "(limit 15s) $work/gpu-bin/cujax doctor" "$work/archive.log" ||
  fail "--dry-run with an archive does not run the unpacked folder's cujax"
grep -q "(limit [0-9]*s) $work/gpu-bin/cuda_test --gtest_filter=CudnnAttention.Forward" "$work/archive.log" ||
  fail "--dry-run with an archive does not run the packed folder's cuda_test"

# --- a real run of stand-in binaries (shell scripts) under a 60 s budget: gtest's counts read,
# a filter matching no test failed, a stage ignoring SIGTERM killed at its limit, the stages after
# it skipped, the whole run within its budget, and the results in $OUT while it runs and after.
bin="$work/standin"
mkdir -p "$bin" "$work/shared/conformance/stablehlo-testdata" \
  "$work/shared/conformance/stablehlo-testdata-ext" "$work/shared/conformance/stablehlo-interpret"
cat >"$bin/cujax" <<'EOF'
#!/usr/bin/env bash
case "$1" in
  doctor) echo "GPU used: stand-in" ;;
  devices) echo "default backend: cuda" ;;
  stablehlo-test) echo "conformance on cuda: 3 of 3 files passed" ;;
  train) trap '' TERM && sleep 300 ;;  # ignores SIGTERM, as a hung stage might
  *) echo "stand-in cujax: $*" && exit 1 ;;
esac
EOF
cat >"$bin/cuda_test" <<'EOF'
#!/usr/bin/env bash
case "$1" in
  --gtest_filter=-CudnnAttention.\*:CudaLinalg.\*)
    printf '[==========] 3 tests from 2 test suites ran. (5 ms total)\n[  PASSED  ] 2 tests.\n'
    printf '[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] CudaVsCpu.Something\n' ;;
  --gtest_filter=CudaLinalg.\*)
    printf '[==========] 1 test from 1 test suite ran. (1 ms total)\n[  PASSED  ] 1 test.\n' ;;
  --gtest_filter=CudnnAttention.Forward\*)
    printf '[==========] 0 tests from 0 test suites ran. (0 ms total)\n[  PASSED  ] 0 tests.\n' ;;
  --gtest_filter=CudnnAttention.Gradient\*)
    printf '[==========] 2 tests from 1 test suite ran. (9 ms total)\n[  PASSED  ] 1 test.\n'
    printf '[  FAILED  ] 1 test, listed below:\n[  FAILED  ] CudnnAttention.GradientCausal\n'
    exit 1 ;;
  *) echo "stand-in cuda_test: unexpected $*" && exit 2 ;;
esac
EOF
chmod +x "$bin/cujax" "$bin/cuda_test"
CUJAX_SHARED_DIR="$work/shared" JAX_PYTHON=false OUT="$work/real" \
  scripts/gpu-check.sh --budget 60 "$bin" >"$work/real.log" 2>&1 &
run=$!
for _ in $(seq 100); do  # while train-tiny hangs: the results so far are in $OUT already
  grep -q "^conformance-interpret " "$work/real/gpu-check-table.txt" 2>/dev/null && break
  sleep 0.5
done
grep -q "run in progress" "$work/real/gpu-check-table.txt" 2>/dev/null ||
  fail "no table of the stages so far while the run goes on"
tar -tzf "$work/real/gpu-check.tgz" >"$work/real.members" 2>/dev/null
grep -qx gpu-check/doctor.txt "$work/real.members" ||
  fail "no archive of the logs so far while the run goes on"
wait "$run" || fail "the stand-in run: exit status $?"
sed -n '/^=== stages$/,$p' "$work/real/gpu-check-table.txt" | sed 1d >"$work/real.rows"
real_row() {  # real_row STAGE PATTERN: the stage's row's outcome matches
  grep -qE "^$1 +[a-z]+ +$2" "$work/real.rows" || fail "stage $1: not '$2': $(grep "^$1 " "$work/real.rows")"
}
real_row doctor "ok +[0-9]+s"
real_row gpu-tests "ok: 2 passed, 1 skipped, 0 failed"
real_row cuda-linalg "ok: 1 passed, 0 skipped, 0 failed"
real_row cudnn-attention-forward "FAILED \(no test matched\)"
real_row cudnn-attention-gradient "FAILED \(exit 1\): 1 passed, 0 skipped, 1 failed"
real_row conformance-interpret "ok"
real_row jax-import "FAILED \(exit 1\)"
real_row jax-train-tiny "skipped: no JAX \(false\)"
real_row train-tiny "TIMEOUT after [0-9]+s"
real_row train-small "skipped: budget spent"
real_row interop "skipped: no JAX"
# train-tiny held on after SIGTERM: killed by the grace, so the run ended within its budget.
[[ "$(grep "^results: " "$work/real.log")" =~ elapsed\ ([0-9]+)s\ of\ 60s ]] &&
  [ "${BASH_REMATCH[1]}" -le 60 ] || fail "the stand-in run: $(grep "^results: " "$work/real.log")"
grep -q "^gpu-tests: \[  PASSED  \] 2 tests" "$work/real/gpu-check-table.txt" || fail "no gtest summary"
out_within_limits "$work/real"
tar -xzOf "$work/real/gpu-check.tgz" gpu-check/doctor.txt >"$work/real.doctor"
grep -q "GPU used: stand-in" "$work/real.doctor" ||
  fail "the archive lacks doctor's log"
# Nothing to run: no build there, nothing built.
mkdir "$work/empty"
OUT="$work/none" scripts/gpu-check.sh "$work/empty" >"$work/none.log" 2>&1 && fail "a folder without cujax ran"
grep -q "pack it here with --pack" "$work/none/gpu-check-table.txt" || fail "no row saying the binaries are missing"

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
[ "$failures" -eq 0 ] || { cat "$work/table"; tail -40 "$work/dry.log"; }
finish gpu_check
