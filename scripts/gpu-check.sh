#!/usr/bin/env bash
# The checks that need a GPU, run on a machine that has one from binaries built and packed here
# (--pack; never built there: configure and build take longer than the device tool's 600 s
# command), correctness first, then cujax measured against JAX on the same GPU, interop last:
#   check:       cujax doctor (driver, the cuDNN it loads and from where), cujax devices;
#   correctness: cuda_test without its cuDNN attention and linear-algebra tests (gpu-tests);
#                cuSOLVER/cuSPARSE against the cpu backend and JAX's cuda exports (cuda-linalg,
#                needs shared/interop/jax-backcompat for the latter); cuDNN's fused
#                attention against the cpu reference, forward cases (CudnnAttention.Forward*)
#                then gradient cases (CudnnAttention.Gradient*), two stages so that a rejected
#                backward graph hides no forward result; the StableHLO conformance suite on
#                cuda, then the complex/chlo (ext) and interpreter folders;
#   benchmark:   cujax train tiny and small (f32, batches written with --dump-batches) and
#                bench/jax/bench.py train on those batches (JAX, bf16 and f32); cujax bench
#                attention (default, xla, cudnn) and JAX's; decode at batch 1 and 8; the jitted
#                call's overhead; cuda_bench; bench serve; bench scaling; gpt2 (the longest);
#   interop:     tools/jax_bridge/interop_check.py: JAX exports run by cujax and the reverse
#                (a cujax artifact under XLA, `cujax export --format jax` through
#                jax.export.deserialize), Orbax and cujax checkpoints both ways (zarr, OCDBT,
#                Orbax's defaults), the PRNG; its fixtures.
# Time: everything from the script's start (unpacking the archive included) fits one budget,
# 480 s unless --budget S (or GPU_CHECK_BUDGET) says otherwise, at most 540 s: with the caller's
# own steps the command stays under the device tool's 600 s, and with a machine start of 1-2
# minutes inside a 15-minute session. Each stage runs under `timeout` with the smaller of its own
# cap and what the budget has left after the 20 s kept to write the results; a stage left under
# 10 s is skipped and recorded so. At the default budget every correctness stage gets its whole
# cap even if every stage before it runs out its limit (--dry-run checks this).
# Results: the device tool returns at most 8 files from $OUT, at most 2 folders down, so logs,
# tables and fixtures (3 folders down) go to a work folder, and $OUT (a temporary folder where OUT
# is unset) gets two files, replaced after every stage so that a killed run keeps what it did:
#   gpu-check.tgz        the folder gpu-check/: every stage's log, stages.txt, table.txt,
#                        env.txt, metrics and memory samples, fixtures/ (to commit under
#                        tests/fixtures); files over 4 MiB are left out and listed;
#   gpu-check-table.txt  the table: cuDNN's folder, the summary, cujax/JAX ratios (bench/table.py),
#                        the interop checks, and each stage's kind, outcome, seconds, limit, cap
#                        and start.
# The run fails if $OUT then holds more than 8 files, anything deeper, or a name the tool drops.
# cuDNN: the C++ side loads libcudnn.so.9 from CUJAX_CUDNN_DIR; where it is unset, it is set to
# the first folder holding libcudnn.so.9 of pip's nvidia/cudnn/lib, /usr/local/cuda/lib64 and
# /usr/lib/x86_64-linux-gnu. JAX's side runs where `import jax, flax, optax, orbax.checkpoint`
# works (JAX_PYTHON overrides python3). Every cujax stage runs with CUJAX_HOST_FALLBACK=error
# (an op without a device kernel fails its program), but the ext and interpreter conformance
# folders, some of whose complex and narrow ops have none yet.
# Usage: scripts/gpu-check.sh [--budget S] [BIN]   BIN: a packed folder or its .tar.xz (unpacked
#                                 beside itself), or a build folder (default: build-gpu-bin,
#                                 else build-gpu-bin.tar.xz, else build)
#        scripts/gpu-check.sh --dry-run [--budget S] [BIN]   runs nothing: prints each stage's
#                                 command and its limit in the worst case (every stage before it
#                                 running out its limit), writes the results as a run would, and
#                                 fails if the stage order, the budget or $OUT's limits are off
#        scripts/gpu-check.sh --pack [DIR]   strips cujax, cuda_test and cuda_bench from build/
#                                 (the default preset) into DIR (build-gpu-bin) with the shared
#                                 libraries they need beyond libc and libstdc++ (OpenBLAS, zstd,
#                                 OpenMPI, httplib; not CUDA's) in DIR/lib, packs DIR.tar.xz
#                                 (xz -9: the binaries share most of their code) and prints the
#                                 sizes; fails if the archive, the working tree and the
#                                 conformance data would carry over 48 MiB (the tool takes 64)
set -uo pipefail
start=$SECONDS  # the budget counts from here: unpacking the archive is part of the run
default_budget=480
command_limit="${GPU_CHECK_COMMAND_LIMIT:-600}"  # the device tool's limit on one command
caller_margin=60  # the caller's own steps in the same command (copying data, installing wheels)
reserve=20        # kept after the last stage for the table and the archive
grace=3           # `timeout -k`: a stage that ignores SIGTERM is killed this long after its limit
min_stage=10      # a stage starts only with at least this long to run
setup_allowance=30  # the dry run's worst case for unpacking and probing before the first stage
carry_limit_mib="${GPU_CHECK_CARRY_LIMIT_MIB:-48}"

mode=run
budget="${GPU_CHECK_BUDGET:-$default_budget}"
bin=""
pack_dir="build-gpu-bin"
while [ $# -gt 0 ]; do
  case "$1" in
    --pack)
      mode=pack
      [ $# -ge 2 ] && pack_dir="$2" && shift
      shift
      ;;
    --dry-run) mode=dry && shift ;;
    --budget)
      [ $# -ge 2 ] || { echo "gpu-check: --budget needs seconds" >&2; exit 2; }
      budget="$2" && shift 2
      ;;
    --budget=*) budget="${1#--budget=}" && shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    -*) echo "gpu-check: unknown option $1 (see --help)" >&2 && exit 2 ;;
    *) bin="$1" && shift ;;
  esac
done
max_budget=$((command_limit - caller_margin))
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -lt 60 ] || [ "$budget" -gt "$max_budget" ]; then
  echo "gpu-check: budget '$budget' s: give 60 to $max_budget (the device tool runs a command" \
    "at most ${command_limit} s, ${caller_margin} s of which are kept for the caller's steps)" >&2
  exit 2
fi
# $OUT as given by the caller, before changing to the repository root.
[ -n "${OUT:-}" ] && mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/.." || exit 1
shared="${CUJAX_SHARED_DIR:-$(pwd)/../shared}"
[ -d "$shared" ] || shared="$(pwd)/shared"  # a checkout with shared/ inside it (the device tool)

if [ "$mode" = pack ]; then
  out="$pack_dir"
  mkdir -p "$out/lib"
  for f in cujax tests/cuda_test cuda_bench; do strip -o "$out/$(basename "$f")" "build/$f" || exit 1; done
  ldd "$out"/cujax "$out"/cuda_test "$out"/cuda_bench | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
  rm -f "$out.tar.xz"
  XZ_OPT="-9 -T2" tar -C "$out" -cJf "$out.tar.xz" . || exit 1
  mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
  folder=$(du -sb "$out" | cut -f1)
  libs=$(du -sb "$out/lib" | cut -f1)
  archive=$(stat -c %s "$out.tar.xz")
  # What travels with it: the working tree (tracked and untracked-not-ignored files) and the
  # conformance data (copied into shared/ inside the checkout, unless it is there already).
  tree=$(git ls-files -z --cached --others --exclude-standard 2>/dev/null |
    du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  tree=${tree:-0}
  conformance=$(du -sb "$shared/conformance" 2>/dev/null | cut -f1)
  conformance=${conformance:-0}
  extra=$conformance
  if [ "$(realpath -m "$shared")" = "$(pwd)/shared" ] && ! git check-ignore -q shared 2>/dev/null; then
    extra=0  # counted with the working tree
  fi
  total=$((archive + tree + extra))
  echo "pack: $out $(mib "$folder") MiB (lib/ $(mib "$libs") MiB), $out.tar.xz $(mib "$archive") MiB"
  echo "pack: carried with the working tree ($(mib "$tree") MiB) and the conformance data" \
    "($(mib "$conformance") MiB): $(mib "$total") MiB of the device tool's 64 MiB"
  if [ "$total" -gt $((carry_limit_mib * 1048576)) ]; then
    echo "pack: over ${carry_limit_mib} MiB: too close to the tool's 64 MiB (GPU_CHECK_CARRY_LIMIT_MIB)" >&2
    exit 1
  fi
  exit 0
fi
dry() { [ "$mode" = dry ]; }

# Where the results go: $OUT gets gpu-check.tgz and gpu-check-table.txt; the work folder
# everything else. Runs, checkpoints (gpt2's are 1.5 GB), kernel caches and the interop's work
# files go to scratch, which nothing archives.
[ -n "${OUT:-}" ] || OUT="$(mktemp -d -t gpu-check-out.XXXXXX)"
work="$(mktemp -d)"
scratch="$(mktemp -d)"
trap 'rm -rf "$work" "$scratch"' EXIT
log="$work/gpu-check"
mkdir -p "$log"

if [ -z "$bin" ]; then
  if [ -x build-gpu-bin/cujax ]; then bin="build-gpu-bin"
  elif [ -f build-gpu-bin.tar.xz ]; then bin="build-gpu-bin.tar.xz"
  else bin=build; fi
fi
build="$bin"
if [[ "$build" == *.tar.xz ]]; then  # a packed folder, carried as one archive
  dir="${build%.tar.xz}"
  mkdir -p "$dir"
  tar -C "$dir" -xJf "$build" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$build" "$dir" ||
    { echo "gpu-check: cannot unpack $build" >&2; exit 1; }
  build="$dir"
fi
cuda_test="$build/tests/cuda_test"
[ -e "$cuda_test" ] || cuda_test="$build/cuda_test"  # a packed folder
py="${JAX_PYTHON:-python3}"

# cuDNN, found before the packed libraries join the library path (the probes run Python).
cudnn_source=""
if [ -n "${CUJAX_CUDNN_DIR:-}" ]; then
  cudnn_source="set by the caller"
  [ -e "$CUJAX_CUDNN_DIR/libcudnn.so.9" ] || cudnn_source="$cudnn_source; it holds no libcudnn.so.9"
else
  probe='import os, nvidia.cudnn as m
print(os.path.dirname(m.__file__) if getattr(m, "__file__", None) else list(m.__path__)[0])'
  for p in "$py" python3; do
    d="$(timeout 20 "$p" -c "$probe" 2>/dev/null)"
    if [ -n "$d" ] && [ -e "$d/lib/libcudnn.so.9" ]; then
      CUJAX_CUDNN_DIR="$d/lib" cudnn_source="pip's nvidia-cudnn, $p"
      break
    fi
    [ "$p" = "$py" ] && [ "$py" = python3 ] && break
  done
  if [ -z "$cudnn_source" ]; then
    for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
      if [ -e "$d/libcudnn.so.9" ]; then
        CUJAX_CUDNN_DIR="$d" cudnn_source="the machine's $d"
        break
      fi
    done
  fi
fi
if [ -n "$cudnn_source" ]; then
  export CUJAX_CUDNN_DIR
  cudnn_line="cuDNN: CUJAX_CUDNN_DIR=$CUJAX_CUDNN_DIR ($cudnn_source)"
else
  cudnn_line="cuDNN: none found (searched pip's nvidia/cudnn/lib, /usr/local/cuda/lib64,"
  cudnn_line="$cudnn_line /usr/lib/x86_64-linux-gnu); fused attention will be unavailable"
fi
echo "$cudnn_line"

export CUJAX_HOST_FALLBACK=error PYTHONUNBUFFERED=1
# A packed folder's libraries, NVIDIA's pip packages (NCCL, cuBLAS, cuDNN) and cuDNN's folder
# for cujax; JAX's stages keep the library path they were given (interop_check.py runs cujax
# with CUJAX_LD_LIBRARY_PATH).
jax_ld_path="${LD_LIBRARY_PATH:-}"
cujax_ld_path="$jax_ld_path"
[ -d "$build/lib" ] && cujax_ld_path="$(cd "$build/lib" && pwd)${cujax_ld_path:+:$cujax_ld_path}"
for d in $(timeout 20 python3 -c 'import nvidia, os; [print(os.path.join(p, s, "lib")) for p in nvidia.__path__ for s in os.listdir(p)]' 2>/dev/null) \
  ${CUJAX_CUDNN_DIR:-}; do
  [ -d "$d" ] && [[ ":$cujax_ld_path:" != *":$d:"* ]] && cujax_ld_path="${cujax_ld_path:+$cujax_ld_path:}$d"
done
export LD_LIBRARY_PATH="$cujax_ld_path" CUJAX_LD_LIBRARY_PATH="$cujax_ld_path"
jobs="$(nproc)"
[ "$jobs" -gt 8 ] && jobs=8
gpu_name="$(timeout 10 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
[ -n "$gpu_name" ] && echo "$gpu_name" >"$log/gpu-name.txt"
{
  echo "bin: $bin"
  echo "$cudnn_line"
  echo "GPU: ${gpu_name:-none found by nvidia-smi}"
  echo "LD_LIBRARY_PATH (cujax): $cujax_ld_path"
  echo "LD_LIBRARY_PATH (JAX): $jax_ld_path"
  echo "budget: ${budget}s, reserve ${reserve}s, grace ${grace}s, min stage ${min_stage}s," \
    "command limit ${command_limit}s, caller margin ${caller_margin}s"
} >"$log/env.txt"

# The stage table. Each row: name, kind, outcome, seconds taken, limit, cap, start (seconds
# since the script's start). The dry run's clock is the worst case: every stage before a stage
# ran out its limit and the `timeout -k` grace after it.
declare -a rows names kinds
sim=$(((SECONDS - start) > setup_allowance ? (SECONDS - start) : setup_allowance))
clock() { if dry; then echo "$sim"; else echo $((SECONDS - start)); fi; }
row() {  # row NAME KIND OUTCOME TOOK LIMIT CAP FROM
  rows+=("$(printf '%-26s %-11s %-34s %5s  limit %3ss  cap %3ss  from %3ss' "$@")")
  names+=("$1")
  kinds+=("$2")
}

# deliver [final]: the table and the archive into $OUT, each replaced whole (written beside,
# then renamed), so that a run killed at any point leaves the last complete pair.
deliver() {
  printf '%s\n' "${rows[@]}" >"$log/stages.txt"
  local table="$work/table.txt"
  {
    echo "gpu-check $(date -u '+%Y-%m-%d %H:%M UTC'): $bin, budget ${budget}s," \
      "$(dry && echo "dry run" || echo "elapsed $((SECONDS - start))s")"
    echo "GPU: ${gpu_name:-none found by nvidia-smi}"
    echo "$cudnn_line"
    if [ "${1:-}" = final ]; then
      cat "$log/summary.txt" 2>/dev/null
      echo
      cat "$log/table.txt" 2>/dev/null
    else
      echo "(run in progress: the stages so far)"
      cat "$log/stages.txt"
    fi
  } >"$table"
  cp "$table" "$OUT/gpu-check-table.txt.part" && mv -f "$OUT/gpu-check-table.txt.part" "$OUT/gpu-check-table.txt"
  (cd "$work" && find gpu-check -type f -size +4M) >"$work/left-out.txt"
  cp "$work/left-out.txt" "$log/left-out.txt"
  tar -C "$work" -czf "$OUT/gpu-check.tgz.part" --exclude-from="$work/left-out.txt" gpu-check &&
    mv -f "$OUT/gpu-check.tgz.part" "$OUT/gpu-check.tgz"
}

stage_rc=0 stage_skipped=0
# stage NAME KIND CAP COMMAND...: runs it under `timeout` (the smaller of CAP and what the budget
# has left), logs to NAME.txt, records ok/skipped/TIMEOUT/FAILED with the time. MEM=1 before it
# samples the GPU's used memory; GTEST=1 reads gtest's counts and fails a run of no test.
stage() {
  local name="$1" kind="$2" cap="$3"
  shift 3
  echo "=== $name"
  local now left limit
  now=$(clock)
  left=$((budget - reserve - grace - now))
  limit=$((cap < left ? cap : left))
  stage_rc=1 stage_skipped=0
  if [ "$limit" -lt "$min_stage" ]; then
    echo "skipped: budget spent"
    stage_skipped=1
    row "$name" "$kind" "skipped: budget spent ($((left > 0 ? left : 0))s left)" - 0 "$cap" "$now"
    deliver
    return
  fi
  if dry; then
    echo "(limit ${limit}s) $*"
    echo "dry run, limit ${limit}s: $*" >"$log/$name.txt"
    row "$name" "$kind" "dry run" - "$limit" "$cap" "$now"
    sim=$((sim + limit + grace))
    stage_rc=0
    deliver
    return
  fi
  local sampler=""
  if [ "${MEM:-0}" = 1 ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
      >"$log/mem-$name.txt" 2>/dev/null &
    sampler=$!
    sleep 0.3
  fi
  local t0=$SECONDS rc=0
  timeout -k "$grace" "$limit" "$@" 2>&1 | tee "$log/$name.txt" || rc=$?
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  local what
  case "$rc" in
    0) what="ok" ;;
    77) what="skipped" ;;
    124) what="TIMEOUT after ${limit}s" ;;
    *) what="FAILED (exit $rc)" ;;
  esac
  # 137: killed, by timeout's grace when the stage held on past its limit (else, say, for memory)
  [ "$rc" = 137 ] && [ $((SECONDS - t0)) -ge "$limit" ] && what="TIMEOUT after ${limit}s, killed"
  if [ "${GTEST:-0}" = 1 ]; then
    local ran passed skipped failed
    count() { sed -nE "s/^\[ *$1 *\] ([0-9]+) tests?.*/\1/p" "$log/$name.txt" | tail -1; }
    ran="$(sed -nE 's/^\[==========\] ([0-9]+) tests? from .* ran.*/\1/p' "$log/$name.txt" | tail -1)"
    passed="$(count PASSED)" skipped="$(count SKIPPED)" failed="$(count FAILED)"
    if [ "$rc" = 0 ] && [ "${ran:-0}" = 0 ]; then
      what="FAILED (no test matched)" rc=1
    elif [ -n "$ran" ]; then
      what="$what: ${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed"
    fi
  fi
  stage_rc=$rc
  row "$name" "$kind" "$what" "$((SECONDS - t0))s" "$limit" "$cap" "$now"
  deliver
}
skip() {  # skip NAME KIND CAP WHY: a stage that cannot run here
  echo "=== $1"
  echo "skipped: $4"
  row "$1" "$2" "skipped: $4" - 0 "$3" "$(clock)"
  deliver
}

if [ ! -x "$build/cujax" ] && ! dry; then
  echo "gpu-check: no cujax in $build. Nothing is built on the GPU machine: build the default" \
    "preset here, pack it (scripts/gpu-check.sh --pack) and carry build-gpu-bin.tar.xz" >&2
  skip binaries check 0 "no cujax in $build (pack it here with --pack)"
  exit 1
fi

# --- check
stage doctor check 15 "$build/cujax" doctor
# cuda is the default backend: devices() lists the GPUs, and `cujax train` runs on cuda:0.
stage devices check 15 "$build/cujax" devices

# --- correctness (the cuda-nogpu tests need no GPU: CI runs them)
GTEST=1 stage gpu-tests correctness 90 "$cuda_test" --gtest_filter='-CudnnAttention.*:CudaLinalg.*'
# cuSOLVER and cuSPARSE (issue 38), unverified until this stage has passed on a GPU (the list is
# in docs/linalg.md): cuda_test's CudaLinalg checks (each cuda-lowered lax.linalg function,
# lapack_?trsm_ffi, stablehlo.cholesky and cu_threefry2x32_ffi against the cpu backend, with no
# host path), then JAX's own cuda exports through `cujax run --platform cuda` with JAX's checks
# (run.py; host fallback logged: some complex ops around the calls have no device kernel yet).
linalg_cases="$shared/interop/jax-backcompat/run.py"
GTEST=1 stage cuda-linalg correctness 23 bash -c '"$1" --gtest_filter="CudaLinalg.*" || exit
  [ -f "$3" ] || { echo "no $3: JAX cuda exports not run"; exit 0; }
  CUJAX_HOST_FALLBACK=log /usr/bin/python3 "$3" --cujax "$2" --platform cuda -j "$4" \
    --timeout 15 -k cuda_cholesky -k cuda_eigh -k cuda_lu -k cuda_qr -k cuda_svd \
    -k cuda_threefry -k cuda_tridiagonal' _ "$cuda_test" "$build/cujax" "$linalg_cases" "$jobs"
GTEST=1 stage cudnn-attention-forward correctness 40 "$cuda_test" \
  --gtest_filter='CudnnAttention.Forward*'
GTEST=1 stage cudnn-attention-gradient correctness 40 "$cuda_test" \
  --gtest_filter='CudnnAttention.Gradient*'
# The JAX-generated suite, then issue 23's folders (complex, chlo, narrow types, the reference
# interpreter's tests), to compare with the CPU's rates in docs/conformance.md; those two allow
# the host path, which some of their complex and narrow ops still take.
for folder in stablehlo-testdata:conformance:110:error stablehlo-testdata-ext:conformance-ext:40:log \
  stablehlo-interpret:conformance-interpret:30:log; do
  IFS=: read -r dir name cap fallback <<<"$folder"
  conformance="$shared/conformance/$dir"
  if [ -d "$conformance" ] || dry; then
    stage "$name" correctness "$cap" env CUJAX_HOST_FALLBACK="$fallback" "$build/cujax" \
      stablehlo-test --platform cuda -j "$jobs" --timeout 60 --min-pass-rate 0 "$conformance"
  else
    skip "$name" correctness "$cap" "no $conformance"
  fi
done

# --- benchmarks
has_jax=0
imports="import jax, flax, optax, orbax.checkpoint"
jax_env=(env -u LD_LIBRARY_PATH)  # the library path JAX was given, not cujax's
[ -n "$jax_ld_path" ] && jax_env=(env LD_LIBRARY_PATH="$jax_ld_path")
stage jax-import benchmark 30 "${jax_env[@]}" "$py" -c "$imports; print('jax', jax.__version__, jax.devices())"
# (skipped for the budget, the JAX stages are skipped for it too, and say so)
[ "$stage_rc" = 0 ] || [ "$stage_skipped" = 1 ] && has_jax=1
jax_stage() {  # jax_stage NAME CAP ARGS...: a JAX stage, skipped where JAX does not import
  local name="$1" cap="$2"
  shift 2
  if [ "$has_jax" = 1 ]; then
    stage "$name" "${KIND:-benchmark}" "$cap" "${jax_env[@]}" "$@"
  else
    skip "$name" "${KIND:-benchmark}" "$cap" "no JAX ($py)"
  fi
}
# Training, cujax then JAX on the batches cujax took (--dump-batches), config by config. Each
# cujax run gets an empty kernel cache, so that its first step's time is a cold compile, and
# TF32 for f32 products, as JAX's default on a GPU.
cat docs/*.md README.md >"$scratch/corpus.txt"
train_pair() {  # train_pair CONFIG BATCH STEPS LOG_EVERY CAP: cujax, then JAX on its batches
  local config="$1" batch="$2" steps="$3" every="$4" cap="$5"
  MEM=1 stage "train-$config" benchmark "$cap" env CUJAX_CACHE_DIR="$scratch/cache-$config" \
    CUJAX_DEFAULT_MATMUL_PRECISION=tensorfloat32 \
    "$build/cujax" train --config "$config" --batch "$batch" --steps "$steps" --log-every "$every" \
    --eval-every "$steps" --eval-batches 1 --data "$scratch/corpus.txt" \
    --out "$scratch/run-$config" --overwrite --dump-batches "$scratch/batches-$config.npy"
  cp "$scratch/run-$config/metrics.csv" "$log/metrics-$config.csv" 2>/dev/null
  MEM=1 jax_stage "jax-train-$config" "$cap" "$py" bench/jax/bench.py train \
    --config "$config" --batches "$scratch/batches-$config.npy"
}
train_pair tiny 16 20 5 90
train_pair small 16 20 5 90
stage attention benchmark 45 "$build/cujax" bench attention --platform cuda
stage attention-xla benchmark 45 "$build/cujax" bench attention --platform cuda --implementation xla
stage attention-cudnn benchmark 45 "$build/cujax" bench attention --platform cuda --implementation cudnn
jax_stage jax-attention 90 "$py" bench/jax/bench.py attention
stage decode benchmark 60 env CUJAX_DEFAULT_MATMUL_PRECISION=tensorfloat32 \
  "$build/cujax" bench decode --platform cuda --config small --batch 1,8
jax_stage jax-decode 60 "$py" bench/jax/bench.py decode --config small --batches 1,8
# a jitted call's host-side cost on the GPU's launch path, arrays resident on cuda:0
stage dispatch benchmark 60 "$build/cujax" bench dispatch --platform cuda
jax_stage jax-dispatch 60 "$py" bench/jax/bench.py dispatch
stage bench benchmark 60 "$build/cuda_bench"
# `cujax serve`'s engine and HTTP server on cuda, the `small` config (random init, max_len 256):
# 8 closed-loop streamed /v1/completions clients against 8 slots, then against 1 slot; TPOT is
# the ms per output token at batch 8 and at batch 1, with tokens/s and time to first token.
stage serve benchmark 90 "$build/cujax" bench serve --platform cuda --config small --max-batch 8 \
  --clients 8 --seconds 8 --max-tokens 64
stage scaling benchmark 60 "$build/cujax" bench scaling --steps 3
# gpt2 (124M parameters, 8 x 1024 tokens a step): the longest stages.
train_pair gpt2 8 8 4 120

# --- interop, last: it reads train-tiny's checkpoint. 165 s: 150 before the jax-format export
# (a cujax export, a cujax run and JAX's deserialize and call of the tiny forward, ~15 s more).
KIND=interop jax_stage interop 165 "$py" tools/jax_bridge/interop_check.py --cujax "$build/cujax" \
  --run-dir "$scratch/run-tiny" --work "$scratch/interop" --fixtures "$log/fixtures" \
  --platform cuda

# --- the plan's own checks: the stage order and, in the dry run, the budget's worst case
problems=()
check_order() {
  local i last_correctness=-1 first_benchmark=${#kinds[@]} correctness=""
  [ "${names[0]}" = doctor ] || problems+=("the first stage is ${names[0]}, not doctor")
  for i in "${!kinds[@]}"; do
    case "${kinds[$i]}" in
      correctness) last_correctness=$i correctness="$correctness ${names[$i]}" ;;
      benchmark) [ "$i" -lt "$first_benchmark" ] && first_benchmark=$i ;;
      interop) [ "$i" = $((${#kinds[@]} - 1)) ] || problems+=("interop stage ${names[$i]} is not last") ;;
    esac
  done
  [ "$last_correctness" -lt "$first_benchmark" ] ||
    problems+=("a correctness stage (${names[$last_correctness]}) runs after a benchmark")
  [ "$correctness" = " gpu-tests cuda-linalg cudnn-attention-forward cudnn-attention-gradient conformance conformance-ext conformance-interpret" ] ||
    problems+=("correctness stages out of order:$correctness")
  [ "${kinds[${#kinds[@]} - 1]}" = interop ] || problems+=("the last stage is not interop")
}
check_order
if dry; then
  [ "$sim" -le $((budget - reserve)) ] ||
    problems+=("worst case ends at ${sim}s, past the budget's $((budget - reserve))s")
  if [ "$budget" -ge "$default_budget" ]; then
    for r in "${rows[@]}"; do
      read -r name kind _ <<<"$r"
      [ "$kind" = correctness ] && [[ "$r" =~ limit\ +([0-9]+)s\ +cap\ +([0-9]+)s ]] &&
        [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ] &&
        problems+=("correctness stage $name cut to ${BASH_REMATCH[1]}s of ${BASH_REMATCH[2]}s in the worst case")
    done
  fi
  caps=0
  for r in "${rows[@]}"; do [[ "$r" =~ cap\ +([0-9]+)s ]] && caps=$((caps + BASH_REMATCH[1])); done
  echo "plan: worst case ends at ${sim}s of a ${budget}s budget (${reserve}s kept for the results);" \
    "every stage at its cap would take ${caps}s, so the benchmarks run in what the checks leave"
fi

# --- the summary and the table, last
if dry; then
  printf 'dry run: nothing ran\n' >"$log/summary.txt"
else {
  grep -h "GPU used\|GPU not used" "$log/doctor.txt" 2>/dev/null
  grep -hi "cudnn" "$log/doctor.txt" 2>/dev/null | head -5
  grep -h "^default backend" "$log/devices.txt" 2>/dev/null
  for f in gpu-tests cuda-linalg cudnn-attention-forward cudnn-attention-gradient; do
    grep -h "^\[  PASSED\|^\[  FAILED  \] [0-9]\|^\[  SKIPPED \] [0-9]" "$log/$f.txt" 2>/dev/null |
      sed "s/^/$f: /"
  done
  for f in conformance conformance-ext conformance-interpret; do
    grep -h "conformance on" "$log/$f.txt" 2>/dev/null | sed "s/^/$f: /"
  done
  grep -h "^FAIL \|^PASS .* cases\|^total" "$log/cuda-linalg.txt" 2>/dev/null | sed "s/^/cuda-linalg: /"
  grep -h "CUJAX_HOST_FALLBACK=error" "$log/conformance.txt" 2>/dev/null | sort | uniq -c | head -20
  grep -h "^training on\|^trained steps\|^device-to-host transfers" "$log"/train-*.txt 2>/dev/null
  grep -h "steady-state\|PyTorch\|target:" "$log/dispatch.txt" 2>/dev/null
  sed -n '/^benchmark/,$p' "$log/bench.txt" 2>/dev/null
  grep -h "^cuda:" "$log/scaling.txt" 2>/dev/null
  sed -n '/^cujax bench serve/,/^batching gain/p' "$log/serve.txt" 2>/dev/null
  grep -h "^FAILED" "$log/serve.txt" 2>/dev/null
  grep -h "^ERROR" "$log"/jax-*.txt "$log/interop.txt" 2>/dev/null
} >"$log/summary.txt"; fi
for p in "${problems[@]}"; do echo "PLAN ERROR: $p"; done >>"$log/summary.txt"
printf '%s\n' "${rows[@]}" >"$log/stages.txt"
if dry; then
  cp "$log/stages.txt" "$log/plan.txt"
  python3 bench/table.py "$log" --dry-run >"$log/table.txt"
else
  python3 bench/table.py "$log" >"$log/table.txt"
fi
deliver final

# $OUT within what the device tool returns: at most 8 files, at most 2 folders down, names of
# letters, digits, '.', '_' and '-', each file at most 16 MiB.
n_files=$(find "$OUT" -mindepth 1 ! -type d | wc -l)
[ "$n_files" -le 8 ] || problems+=("$OUT holds $n_files files; the device tool returns 8")
deep="$(find "$OUT" -mindepth 1 -printf '%d %y %P\n' | awk '$1 >= 4 || ($1 == 3 && $2 == "d") { print $3 }' |
  head -3 | tr '\n' ' ')"
[ -z "$deep" ] || problems+=("in $OUT, deeper than 2 folders: $deep")
odd="$(find "$OUT" -mindepth 1 -printf '%f\n' | grep -v '^[A-Za-z0-9._-]*$' | head -3 | tr '\n' ' ')"
[ -z "$odd" ] || problems+=("in $OUT, names the device tool drops: $odd")
big="$(find "$OUT" -type f -size +16M -printf '%P ' | head -c 300)"
[ -z "$big" ] || problems+=("in $OUT, over 16 MiB: $big")

echo
cat "$OUT/gpu-check-table.txt"
echo
echo "results: $OUT/gpu-check.tgz ($(du -h "$OUT/gpu-check.tgz" | cut -f1), $(tar -tzf "$OUT/gpu-check.tgz" | grep -vc '/$') files)" \
  "and $OUT/gpu-check-table.txt; elapsed $((SECONDS - start))s of ${budget}s"
if [ "${#problems[@]}" -gt 0 ]; then
  for p in "${problems[@]}"; do echo "gpu-check: $p" >&2; done
  exit 1
fi
exit 0
