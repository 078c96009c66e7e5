#!/usr/bin/env bash
# Installs the test dependencies (scripts/setup.sh --tests: nothing when present), builds cujax
# and runs every test (unit tests and the StableHLO conformance suite) through CTest.
# Usage: scripts/test.sh [preset]   (default: `default`, with CUDA, when a CUDA toolkit and an
# NVIDIA GPU are here, else `cpu`; see scripts/preset.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${1:-}" ]; then CUJAX_PRESET="$1"; fi
source scripts/preset.sh
bash scripts/setup.sh --tests
jobs="$(nproc)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs" --no-tests=error
