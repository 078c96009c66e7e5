#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset, clang) and runs each for SECONDS (default 60)
# on a working corpus seeded from fuzz/corpus/<target>, printing per target its executions per
# second, coverage (cov: edges, ft: features) and crashes. Crashing inputs land in
# build-fuzz/findings/<target>/; copy each one to tests/fixtures/fuzz/<target>/ once fixed, where
# fuzz_regression_test replays it.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (JOBS=2: targets run at once; niced)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parser bytecode exported jax_export npy bundle checkpoint ocdbt zarr3
  msgpack safetensors config server)
jobs="${JOBS:-2}"

# The uninstrumented rest of the library comes from the cpu preset's build (fuzz/CMakeLists.txt).
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$(nproc)" --target libcujax.a
cmake --preset fuzz -DCUJAX_FUZZ_BASE_LIBRARY="$PWD/build-cpu/libcujax.a" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/%/_fuzzer}"

run() {
  local t="$1" work="build-fuzz/corpus/$1" out="build-fuzz/findings/$1"
  mkdir -p "$work" "$out"
  # -rss_limit_mb: a reader must not need more than this for any input; -timeout: nor hang.
  nice -n 19 "build-fuzz/fuzz/${t}_fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=20 -print_final_stats=1 -artifact_prefix="$out/" "$work" "fuzz/corpus/$t" \
    >"build-fuzz/findings/$t.log" 2>&1 || true
  local last execs cov ft crashes
  last="$(grep -E '^#[0-9]+' "build-fuzz/findings/$t.log" | tail -1)"
  execs="$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "build-fuzz/findings/$t.log" | grep -oE '[0-9]+$' || echo ?)"
  cov="$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo ?)"
  ft="$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo ?)"
  crashes="$(find "$out" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)"
  printf '%-11s %6ss  exec/s %-6s cov %-6s ft %-7s findings %s\n' "$t" "$seconds" "$execs" "$cov" \
    "$ft" "$crashes"
}

printf '%-11s %7s  %-13s %-10s %-10s %s\n' target time speed coverage features findings
running=0
for t in "${targets[@]}"; do
  run "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
