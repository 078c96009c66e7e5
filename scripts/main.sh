#!/usr/bin/env bash
# The main job. Until training lands, it builds cujax, lists the devices and runs the StableHLO
# conformance suite on the CPU backend.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$(nproc)"
./build-cpu/cujax devices
shared="${CUJAX_SHARED_DIR:-$(pwd)/../shared}"
./build-cpu/cujax stablehlo-test -j "$(nproc)" --min-pass-rate 0 "$shared/conformance/stablehlo-testdata" | tail -n 1
