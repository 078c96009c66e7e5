#!/usr/bin/env bash
# Runs the StableHLO conformance suite on one platform. Skips (exit 77) when the data is absent.
# Usage: run_conformance.sh CUJAX_BINARY PLATFORM MIN_PASS_RATE
set -u
bin="$1"; platform="$2"; rate="$3"
dir="${CUJAX_SHARED_DIR:-@CUJAX_SHARED_DIR@}/conformance/stablehlo-testdata"
if [ ! -d "$dir" ]; then
  echo "SKIP: conformance data not found at $dir (set CUJAX_SHARED_DIR to the shared/ folder)"
  exit 77
fi
exec "$bin" stablehlo-test --platform "$platform" -j "$(nproc)" --min-pass-rate "$rate" "$dir"
