#!/usr/bin/env bash
# The checks that need a GPU, for a machine that has one: builds with the `default` preset (or
# uses the build folder given, e.g. one carried over), then runs `cujax doctor`, `cujax devices`
# and the devices_env tests (cuda is the default backend), a short `cujax train` on it, the
# gpu-labelled tests (every kernel and fusion against the CPU backend, NCCL's collectives), the
# jitted-call overhead on cuda, `cujax bench scaling`, the benchmarks, `cujax bench serve` on
# cuda and the StableHLO conformance suite on the cuda backend, and prints a short table last.
# Each stage has a time limit; the whole run should take about 6 minutes on an H200 (most of it
# the conformance suite, which starts CUDA once per file), 15 at worst.
# Every stage runs with CUJAX_HOST_FALLBACK=error: an op that would run on the host fails its
# program instead of running there (docs/cuda.md).
# Usage: scripts/gpu-check.sh [BUILD_DIR]     (default: build, configured with --preset default)
#        scripts/gpu-check.sh --dry-run [BUILD_DIR]   prints the stages' commands, runs none
#        scripts/gpu-check.sh --pack [DIR]   strips cujax, cuda_test and cuda_bench from build/
#                                            into DIR (default build-gpu-bin) with the shared
#                                            libraries they need beyond libc and libstdc++
#                                            (OpenBLAS, zstd, OpenMPI, httplib; not CUDA's, and
#                                            NVRTC comes from the toolkit or NVIDIA's pip
#                                            packages there) in DIR/lib, to carry to a GPU
#                                            machine without those packages; then run
#                                            scripts/gpu-check.sh DIR there.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--pack" ]; then
  out="${2:-build-gpu-bin}"
  mkdir -p "$out/lib"
  for f in cujax tests/cuda_test cuda_bench; do strip -o "$out/$(basename "$f")" "build/$f" || exit 1; done
  ldd "$out"/cujax "$out"/cuda_test "$out"/cuda_bench | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
  du -sh "$out" "$out/lib"
  exit 0
fi
dry_run=0
if [ "${1:-}" = "--dry-run" ]; then
  dry_run=1
  shift
fi
build="${1:-build}"
export CUJAX_HOST_FALLBACK=error
# A packed folder's libraries, and NVIDIA's pip packages (NCCL, cuBLAS, cuDNN) where the
# toolkit has none of its own.
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$(cd "$build/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in $(python3 -c 'import nvidia, os; [print(os.path.join(p, s, "lib")) for p in nvidia.__path__ for s in os.listdir(p)]' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH
jobs="$(nproc)"
shared="${CUJAX_SHARED_DIR:-$(pwd)/../shared}"
[ -d "$shared" ] || shared="$(pwd)/shared"  # a checkout with shared/ inside it
log="$(mktemp -d)"
declare -a table

stage() {  # stage NAME LIMIT_SECONDS COMMAND...: runs it, records pass/fail/skip and the time
  local name="$1" limit="$2"
  shift 2
  echo "=== $name"
  if [ "$dry_run" = 1 ]; then
    echo "(limit ${limit}s) CUJAX_HOST_FALLBACK=$CUJAX_HOST_FALLBACK $*"
    table+=("$(printf '%-22s %-22s' "$name" "dry run")")
    return
  fi
  local t0=$SECONDS rc=0
  timeout "$limit" "$@" 2>&1 | tee "$log/$name.txt" || rc=$?
  local what="ok"
  case "$rc" in
    0) what="ok" ;;
    77) what="skipped" ;;
    124) what="TIMEOUT after ${limit}s" ;;
    *) what="FAILED (exit $rc)" ;;
  esac
  table+=("$(printf '%-22s %-22s %5ss' "$name" "$what" "$((SECONDS - t0))")")
}

if [ ! -x "$build/cujax" ] && [ "$dry_run" = 0 ]; then
  stage configure 60 cmake --preset default
  stage build 300 cmake --build "$build" -j "$jobs"
fi

stage doctor 30 "$build/cujax" doctor
# cuda is the default backend: devices() lists the GPUs, and `cujax train` runs on cuda:0.
stage devices 30 "$build/cujax" devices
if [ -f "$build/CTestTestfile.cmake" ]; then
  stage devices-env 60 ctest --test-dir "$build" -R '^devices_env\.' --output-on-failure
fi
stage train 120 "$build/cujax" train --config tiny --steps 30 --log-every 10 --eval-every 30 \
  --data README.md --out "$log/run"
# (The cuda-nogpu tests need no GPU: CI runs them, so GPU time goes to what needs one.)
if [ -f "$build/CTestTestfile.cmake" ]; then
  stage gpu-tests 90 ctest --test-dir "$build" -L gpu --output-on-failure -j 4
else  # a packed folder: the test binaries alone
  stage gpu-tests 90 "$build/cuda_test"
fi
# a jitted call's host-side cost on the GPU's launch path, arrays resident on cuda:0
stage dispatch 60 "$build/cujax" bench dispatch --platform cuda
stage scaling 120 "$build/cujax" bench scaling --steps 3
stage bench 60 "$build/cuda_bench"
# `cujax serve`'s engine and HTTP server on cuda, the `small` config (random init, max_len 256):
# 8 closed-loop streamed /v1/completions clients against 8 slots, then against 1 slot; TPOT is
# the ms per output token at batch 8 and at batch 1, with tokens/s and time to first token.
stage serve 90 "$build/cujax" bench serve --platform cuda --config small --max-batch 8 \
  --clients 8 --seconds 8 --max-tokens 64
conformance="$shared/conformance/stablehlo-testdata"
if [ -d "$conformance" ]; then
  stage conformance 240 "$build/cujax" stablehlo-test --platform cuda -j "$jobs" --timeout 60 \
    --min-pass-rate 0 "$conformance"
else
  table+=("$(printf '%-22s %-22s' conformance "skipped: no $conformance")")
fi

echo
echo "=== summary"
for row in "${table[@]}"; do echo "$row"; done
grep -h "GPU used\|GPU not used" "$log/doctor.txt" 2>/dev/null
grep -h "^default backend" "$log/devices.txt" 2>/dev/null
grep -h "^training on\|^trained steps\|^device-to-host transfers" "$log/train.txt" 2>/dev/null
grep -h "tests passed\|tests failed\|^\[  PASSED\|^\[  FAILED  \] [0-9]" "$log/gpu-tests.txt" 2>/dev/null
skipped="$(grep -c "(Skipped)\|^\[  SKIPPED \] .*ms)" "$log/gpu-tests.txt" 2>/dev/null)"
[ "${skipped:-0}" -gt 0 ] && echo "gpu tests skipped: $skipped (no usable device: see doctor)"
grep -h "conformance on" "$log/conformance.txt" 2>/dev/null
grep -h "CUJAX_HOST_FALLBACK=error" "$log/conformance.txt" 2>/dev/null | sort | uniq -c | head -20
grep -h "steady-state\|PyTorch\|target:" "$log/dispatch.txt" 2>/dev/null
sed -n '/^benchmark/,$p' "$log/bench.txt" 2>/dev/null
grep -h "^cuda:" "$log/scaling.txt" 2>/dev/null
sed -n '/^cujax bench serve/,/^batching gain/p' "$log/serve.txt" 2>/dev/null
grep -h "^FAILED" "$log/serve.txt" 2>/dev/null
