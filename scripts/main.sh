#!/usr/bin/env bash
# The main job: build the cujax command (its target only), train the tiny transformer language
# model on Debian's fortunes corpus for a few minutes, then sample from it with the KV cache. On
# a machine with a CUDA toolkit and an NVIDIA GPU it builds the CUDA backend and trains on the
# GPU (the default backend); elsewhere it builds the CPU backend and trains on the CPU
# (scripts/preset.sh).
#   CUJAX_STEPS (default 1000), CUJAX_RUN_DIR (default runs/tiny), CUJAX_PROMPT, CUJAX_PRESET
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/preset.sh
t0=$SECONDS
echo "main: configuring and building the cujax command (cmake --preset $preset)"
cmake --preset "$preset" >/dev/null
# The `cujax` command alone: the tests and benchmarks are scripts/test.sh's to build.
cmake --build --preset "$preset" -j "$(nproc)" --target cujax_cli
build_s=$((SECONDS - t0))
if [ "$preset" = default ]; then "$bin" doctor | grep "^GPU" || true; fi
"$bin" devices
run="${CUJAX_RUN_DIR:-runs/tiny}"
t0=$SECONDS
"$bin" train --config tiny --steps "${CUJAX_STEPS:-1000}" --out "$run" --overwrite
train_s=$((SECONDS - t0))
t0=$SECONDS
echo "--- a sample (cujax generate --model $run --temperature 0.8 --top-k 40 --seed 0):"
"$bin" generate --model "$run" --prompt "${CUJAX_PROMPT:-The }" --max-tokens 120 \
  --temperature 0.8 --top-k 40 --seed 0
echo "--- main: build ${build_s} s, training ${train_s} s, sample $((SECONDS - t0)) s"
echo "--- loss curve: $run/loss.svg, metrics: $run/metrics.csv"
