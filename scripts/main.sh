#!/usr/bin/env bash
# The main job: build cujax, train the tiny transformer language model on Debian's fortunes
# corpus on the CPU for a few minutes, then sample from it with the KV cache.
#   CUJAX_STEPS (default 1000), CUJAX_RUN_DIR (default runs/tiny), CUJAX_PROMPT
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$(nproc)"
./build-cpu/cujax devices
run="${CUJAX_RUN_DIR:-runs/tiny}"
./build-cpu/cujax train --config tiny --steps "${CUJAX_STEPS:-1000}" --out "$run" --overwrite
echo "--- a sample (cujax generate --model $run --temperature 0.8 --top-k 40 --seed 0):"
./build-cpu/cujax generate --model "$run" --prompt "${CUJAX_PROMPT:-The }" --max-tokens 120 \
  --temperature 0.8 --top-k 40 --seed 0
echo "--- loss curve: $run/loss.svg, metrics: $run/metrics.csv"
