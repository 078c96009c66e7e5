#!/usr/bin/env bash
# Builds cujax and runs every test (unit tests and the StableHLO conformance suite) through CTest.
# Usage: scripts/test.sh [preset]   (default preset: cpu; "default" builds CUDA when found)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-cpu}"
jobs="$(nproc)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs"
