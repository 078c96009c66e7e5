#!/usr/bin/env bash
# Runs one folder of the StableHLO conformance data on one platform. Skips (exit 77) when the
# data is absent.
# Usage: run_conformance.sh CUJAX_BINARY PLATFORM MIN_PASS_RATE [FOLDER]
# FOLDER is a folder of shared/conformance/ (default: stablehlo-testdata).
set -u
bin="$1"; platform="$2"; rate="$3"; folder="${4:-stablehlo-testdata}"
dir="${CUJAX_SHARED_DIR:-@CUJAX_SHARED_DIR@}/conformance/$folder"
if [ ! -d "$dir" ]; then
  echo "SKIP: conformance data not found at $dir (set CUJAX_SHARED_DIR to the shared/ folder)"
  exit 77
fi
exec "$bin" stablehlo-test --platform "$platform" -j "$(nproc)" --min-pass-rate "$rate" "$dir"
