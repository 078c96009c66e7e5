#!/usr/bin/env bash
# The checks that need a GPU, for a machine that has one, and cujax measured against JAX on the
# same GPU in the same run. Builds with the `default` preset (or uses the build folder given,
# e.g. one carried over), then runs, each stage under its own time limit and all within an
# 8-minute budget (a stage that runs out, or finds the budget spent, is reported, not fatal):
#   doctor, devices (cuda is the default backend), the devices_env tests;
#   cujax train on the tiny, small and gpt2 configs (f32), each writing its batches with
#     --dump-batches, and bench/jax/bench.py train on those batches (JAX, bf16 and f32):
#     tokens/s, MFU, cold compile, peak GPU memory (nvidia-smi sampled every 200 ms);
#   cujax bench attention and bench/jax/bench.py attention (causal bf16, head dim 128,
#     T=1024/4096, implementations xla and cudnn); cujax bench decode and bench.py decode (the
#     KV-cache step of the small config at batch 1 and 8); the jitted-call overhead on both;
#   tools/jax_bridge/interop_check.py: JAX exports run by cujax, cujax exports run by XLA,
#     Orbax reading cujax's checkpoints and cujax reading Orbax's (zarr and OCDBT), the PRNG;
#   cuDNN's fused attention against the cpu reference (cuda_test's CudnnAttention tests: causal
#     and full, bias, sequence lengths, GQA/MQA, bf16/f16, forward and backward);
#   the gpu-labelled tests, the StableHLO conformance suite on cuda (one worker process per
#     job, so CUDA starts once per worker) and the complex/chlo and interpreter folders, cuda_bench (with cuDNN attention's TFLOP/s, causal
#     bf16, head dim 128, T=4096), bench serve, bench scaling;
# and prints one table last (bench/table.py): cujax/JAX ratios, the interop checks, the stages.
# Logs, the table (table.txt) and the fixtures the interop check writes (fixtures/: an Orbax
# checkpoint in both layouts and JAX's PRNG draws, to commit under tests/fixtures) go to
# $OUT/gpu-check when OUT is set, else to a temporary folder.
# JAX's side runs where `python3 -c "import jax"` works (JAX_PYTHON overrides python3).
# GPU_CHECK_BUDGET=S changes the 8-minute budget (480 s).
# Every stage runs with CUJAX_HOST_FALLBACK=error: an op that would run on the host fails its
# program instead of running there (docs/cuda.md); only the complex/chlo and interpreter
# folders, some of whose complex ops (reductions other than sums, sort) and narrow ops
# (bitcast_convert) have no device kernels yet, allow it.
# Usage: scripts/gpu-check.sh [BUILD_DIR]     (default: build, configured with --preset default)
#        scripts/gpu-check.sh --dry-run [BUILD_DIR]   prints the stages' commands and limits and
#                                            the table's layout, runs none
#        scripts/gpu-check.sh --pack [DIR]   strips cujax, cuda_test and cuda_bench from build/
#                                            into DIR (default build-gpu-bin) with the shared
#                                            libraries they need beyond libc and libstdc++
#                                            (OpenBLAS, zstd, OpenMPI, httplib; not CUDA's, and
#                                            NVRTC comes from the toolkit or NVIDIA's pip
#                                            packages there) in DIR/lib, to carry to a GPU
#                                            machine without those packages, and into
#                                            DIR.tar.xz (xz -9: the three binaries share most
#                                            of their code, so about a tenth of the folder's
#                                            size, under the device tool's 64 MiB carry limit);
#                                            then run scripts/gpu-check.sh DIR (or DIR.tar.xz,
#                                            which it unpacks beside itself) there.
set -uo pipefail
# $OUT as given by the caller, before changing to the repository root.
[ -n "${OUT:-}" ] && mkdir -p "$OUT/gpu-check" && OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--pack" ]; then
  out="${2:-build-gpu-bin}"
  mkdir -p "$out/lib"
  for f in cujax tests/cuda_test cuda_bench; do strip -o "$out/$(basename "$f")" "build/$f" || exit 1; done
  ldd "$out"/cujax "$out"/cuda_test "$out"/cuda_bench | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
  XZ_OPT="-9 -T2" tar -C "$out" -cJf "$out.tar.xz" . || exit 1
  du -sh "$out" "$out/lib" "$out.tar.xz"
  exit 0
fi
dry_run=0
if [ "${1:-}" = "--dry-run" ]; then
  dry_run=1
  shift
fi
build="${1:-build}"
if [[ "$build" == *.tar.xz ]]; then  # a packed folder, carried as one archive
  dir="${build%.tar.xz}"
  mkdir -p "$dir"
  tar -C "$dir" -xJf "$build" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$build" "$dir" ||
    { echo "gpu-check: cannot unpack $build" >&2; exit 1; }
  build="$dir"
fi
export CUJAX_HOST_FALLBACK=error
# A packed folder's libraries, and NVIDIA's pip packages (NCCL, cuBLAS, cuDNN) where the
# toolkit has none of its own.
# JAX's stages keep the library path they were given; cujax's gets the additions below
# (interop_check.py runs cujax with CUJAX_LD_LIBRARY_PATH).
jax_ld_path="${LD_LIBRARY_PATH:-}"
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$(cd "$build/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in $(python3 -c 'import nvidia, os; [print(os.path.join(p, s, "lib")) for p in nvidia.__path__ for s in os.listdir(p)]' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH
export CUJAX_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
jobs="$(nproc)"
[ "$jobs" -gt 8 ] && jobs=8
shared="${CUJAX_SHARED_DIR:-$(pwd)/../shared}"
[ -d "$shared" ] || shared="$(pwd)/shared"  # a checkout with shared/ inside it
if [ -n "${OUT:-}" ] && [ "$dry_run" = 0 ]; then
  log="$OUT/gpu-check"
else
  log="$(mktemp -d)"
fi
# Runs, checkpoints (gpt2's are 1.5 GB with the optimizer state), kernel caches and the
# interop's work files stay out of $OUT, which gets the logs, the table and the fixtures.
scratch="$(mktemp -d)"
py="${JAX_PYTHON:-python3}"
budget="${GPU_CHECK_BUDGET:-480}"  # seconds for the whole run; each stage gets at most what is left
start=$SECONDS
declare -a table

# stage NAME LIMIT COMMAND...: runs it under `timeout`, logs to $log/NAME.txt and records
# ok/skipped/TIMEOUT/FAILED with the time. MEM=1 before it samples the GPU's used memory.
stage() {
  local name="$1" limit="$2"
  shift 2
  echo "=== $name"
  if [ "$dry_run" = 1 ]; then
    echo "(limit ${limit}s) $*"
    table+=("$(printf '%-22s %-26s limit %4ss' "$name" "dry run" "$limit")")
    return
  fi
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -lt 5 ]; then
    table+=("$(printf '%-22s %-26s' "$name" "skipped: budget spent")")
    return
  fi
  [ "$limit" -gt "$left" ] && limit="$left"
  local sampler=""
  if [ "${MEM:-0}" = 1 ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
      >"$log/mem-$name.txt" 2>/dev/null &
    sampler=$!
    sleep 0.3
  fi
  local t0=$SECONDS rc=0
  timeout "$limit" "$@" 2>&1 | tee "$log/$name.txt" || rc=$?
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  local what="ok"
  case "$rc" in
    0) what="ok" ;;
    77) what="skipped" ;;
    124) what="TIMEOUT after ${limit}s" ;;
    *) what="FAILED (exit $rc)" ;;
  esac
  table+=("$(printf '%-22s %-26s %5ss' "$name" "$what" "$((SECONDS - t0))")")
}

if [ ! -x "$build/cujax" ] && [ "$dry_run" = 0 ]; then
  budget=$((budget + 360))  # the build is not part of the measured run
  stage configure 60 cmake --preset default
  stage build 300 cmake --build "$build" -j "$jobs"
fi
has_jax=0
imports="import jax, flax, optax, orbax.checkpoint"
if [ "$dry_run" = 1 ] ||
  if [ -n "$jax_ld_path" ]; then env LD_LIBRARY_PATH="$jax_ld_path" "$py" -c "$imports"
  else env -u LD_LIBRARY_PATH "$py" -c "$imports"; fi 2>/dev/null; then
  has_jax=1
fi
jax_stage() {  # jax_stage NAME LIMIT ARGS...: a JAX stage, skipped where JAX does not import
  if [ "$has_jax" = 1 ]; then
    local name="$1" limit="$2"
    shift 2
    if [ -n "$jax_ld_path" ]; then
      stage "$name" "$limit" env LD_LIBRARY_PATH="$jax_ld_path" "$@"
    else
      stage "$name" "$limit" env -u LD_LIBRARY_PATH "$@"
    fi
  else
    table+=("$(printf '%-22s %-26s' "$1" "skipped: no JAX ($py)")")
  fi
}
[ "$dry_run" = 1 ] && echo "plan: every stage under its limit, all within a ${budget}s budget"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader \
  >"$log/gpu-name.txt" 2>/dev/null

stage doctor 30 "$build/cujax" doctor
# cuda is the default backend: devices() lists the GPUs, and `cujax train` runs on cuda:0.
stage devices 30 "$build/cujax" devices
if [ -f "$build/CTestTestfile.cmake" ]; then
  stage devices-env 60 ctest --test-dir "$build" -R '^devices_env\.' --output-on-failure
fi

# Training, cujax then JAX on the batches cujax took (--dump-batches), config by config. Each
# cujax run gets an empty kernel cache, so that its first step's time is a cold compile, and
# TF32 for f32 products, as JAX's default on a GPU.
cat docs/*.md README.md >"$scratch/corpus.txt"
train_pair() {  # train_pair CONFIG BATCH STEPS LOG_EVERY LIMIT: cujax, then JAX on its batches
  local config="$1" batch="$2" steps="$3" every="$4" limit="$5"
  MEM=1 stage "train-$config" "$limit" env CUJAX_CACHE_DIR="$scratch/cache-$config" \
    CUJAX_DEFAULT_MATMUL_PRECISION=tensorfloat32 \
    "$build/cujax" train --config "$config" --batch "$batch" --steps "$steps" --log-every "$every" \
    --eval-every "$steps" --eval-batches 1 --data "$scratch/corpus.txt" \
    --out "$scratch/run-$config" --overwrite --dump-batches "$scratch/batches-$config.npy"
  cp "$scratch/run-$config/metrics.csv" "$log/metrics-$config.csv" 2>/dev/null
  MEM=1 jax_stage "jax-train-$config" "$limit" "$py" bench/jax/bench.py train \
    --config "$config" --batches "$scratch/batches-$config.npy"
}
train_pair tiny 16 20 5 90
train_pair small 16 20 5 90
stage attention 45 "$build/cujax" bench attention --platform cuda
stage attention-xla 45 "$build/cujax" bench attention --platform cuda --implementation xla
stage attention-cudnn 45 "$build/cujax" bench attention --platform cuda --implementation cudnn
jax_stage jax-attention 90 "$py" bench/jax/bench.py attention
stage decode 60 env CUJAX_DEFAULT_MATMUL_PRECISION=tensorfloat32 \
  "$build/cujax" bench decode --platform cuda --config small --batch 1,8
jax_stage jax-decode 60 "$py" bench/jax/bench.py decode --config small --batches 1,8
# a jitted call's host-side cost on the GPU's launch path, arrays resident on cuda:0
stage dispatch 60 "$build/cujax" bench dispatch --platform cuda
jax_stage jax-dispatch 60 "$py" bench/jax/bench.py dispatch
jax_stage interop 150 "$py" tools/jax_bridge/interop_check.py --cujax "$build/cujax" \
  --run-dir "$scratch/run-tiny" --work "$scratch/interop" --fixtures "$log/fixtures" \
  --platform cuda

# (The cuda-nogpu tests need no GPU: CI runs them, so GPU time goes to what needs one.)
cuda_test="$build/tests/cuda_test"
[ -f "$build/CTestTestfile.cmake" ] || cuda_test="$build/cuda_test"  # a packed folder
stage cudnn-attention 60 "$cuda_test" --gtest_filter='CudnnAttention.*'
if [ -f "$build/CTestTestfile.cmake" ]; then
  stage gpu-tests 90 ctest --test-dir "$build" -L gpu --output-on-failure -j 4
else  # a packed folder: the test binaries alone
  stage gpu-tests 90 "$build/cuda_test"
fi
# The JAX-generated suite, then issue 23's folders (complex, chlo, narrow types, the reference
# interpreter's tests), to compare with the CPU's rates in docs/conformance.md. Complex and
# narrow values have no device kernels yet and take the host path, so those two folders run
# with CUJAX_HOST_FALLBACK=log.
for folder in stablehlo-testdata:conformance:120:error stablehlo-testdata-ext:conformance-ext:60:log \
  stablehlo-interpret:conformance-interpret:60:log; do
  IFS=: read -r dir name limit fallback <<<"$folder"
  conformance="$shared/conformance/$dir"
  if [ -d "$conformance" ] || [ "$dry_run" = 1 ]; then
    stage "$name" "$limit" env CUJAX_HOST_FALLBACK="$fallback" "$build/cujax" stablehlo-test \
      --platform cuda -j "$jobs" --timeout 60 --min-pass-rate 0 "$conformance"
  else
    table+=("$(printf '%-22s %-26s' "$name" "skipped: no $conformance")")
  fi
done
# gpt2 (124M parameters, 8 x 1024 tokens a step) after the checks above: the longest stages.
train_pair gpt2 8 8 4 120
# `cujax serve`'s engine and HTTP server on cuda, the `small` config (random init, max_len 256):
# 8 closed-loop streamed /v1/completions clients against 8 slots, then against 1 slot; TPOT is
# the ms per output token at batch 8 and at batch 1, with tokens/s and time to first token.
stage serve 90 "$build/cujax" bench serve --platform cuda --config small --max-batch 8 \
  --clients 8 --seconds 8 --max-tokens 64
stage bench 60 "$build/cuda_bench"
stage scaling 60 "$build/cujax" bench scaling --steps 3

echo
echo "=== summary"
grep -h "GPU used\|GPU not used" "$log/doctor.txt" 2>/dev/null
grep -h "^default backend" "$log/devices.txt" 2>/dev/null
grep -h "^training on\|^trained steps\|^device-to-host transfers" "$log"/train-*.txt 2>/dev/null
grep -h "tests passed\|tests failed\|^\[  PASSED\|^\[  FAILED  \] [0-9]" "$log/gpu-tests.txt" 2>/dev/null
skipped="$(grep -c "(Skipped)\|^\[  SKIPPED \] .*ms)" "$log/gpu-tests.txt" 2>/dev/null)"
[ "${skipped:-0}" -gt 0 ] && echo "gpu tests skipped: $skipped (no usable device: see doctor)"
for f in conformance conformance-ext conformance-interpret; do
  grep -h "conformance on" "$log/$f.txt" 2>/dev/null | sed "s/^/$f: /"
done
grep -h "CUJAX_HOST_FALLBACK=error" "$log/conformance.txt" 2>/dev/null | sort | uniq -c | head -20
grep -h "steady-state\|PyTorch\|target:" "$log/dispatch.txt" 2>/dev/null
sed -n '/^benchmark/,$p' "$log/bench.txt" 2>/dev/null
grep -h "^cuda:" "$log/scaling.txt" 2>/dev/null
sed -n '/^cujax bench serve/,/^batching gain/p' "$log/serve.txt" 2>/dev/null
grep -h "^FAILED" "$log/serve.txt" 2>/dev/null
grep -h "^ERROR" "$log"/jax-*.txt "$log/interop.txt" 2>/dev/null

# The table last: cujax against JAX, the interop checks, every stage's outcome.
echo
printf '%s\n' "${table[@]}" >"$log/stages.txt"
if [ "$dry_run" = 1 ]; then
  cp "$log/stages.txt" "$log/plan.txt"
  python3 bench/table.py "$log" --dry-run
else
  python3 bench/table.py "$log" | tee "$log/table.txt"
  echo "logs, table.txt and fixtures/ in $log (elapsed $((SECONDS - start)) s)"
fi
rm -rf "$scratch"
