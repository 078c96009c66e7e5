#!/usr/bin/env bash
# Installs cujax's dependencies from Debian packages: by default what the library and the
# `cujax` command need (the main job, scripts/main.sh), with --tests also what the tests,
# benchmarks, fuzzers and CI use (scripts/test.sh runs that). Idempotent: packages that are
# already installed are skipped, and apt-get runs only when something is missing.
# Run it as root or as a user who may sudo: `bash scripts/setup.sh [--tests]`; it calls apt-get
# through sudo only when it is not root, and only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  ccache            # CI builds the main job, then the tests, the CUDA build, through one cache
  libopenblas-dev   # BLAS, and the LAPACK that JAX's linear-algebra custom calls run on (docs/linalg.md)
  libzstd-dev
  zlib1g-dev        # gzip chunks (zarr's gzip codec, t5x checkpoints)
  libmsgpack-cxx-dev  # Flax, legacy Orbax and t5x msgpack checkpoints (header-only)
  libflatbuffers-dev flatbuffers-compiler  # jax.export's Exported.serialize() (flatc generates the reader)
  libssl-dev        # SHA-256 through OpenSSL's libcrypto
  nlohmann-json3-dev  # JSON parsing (header-only)
  libcli11-dev      # the `cujax` command's options (header-only)
  libkissfft-dev    # the CPU backend's stablehlo.fft (header-only kissfft.hh, BSD-3-Clause)
  libcpp-httplib-dev  # `cujax serve` (header-only httplib.h)
  fortunes          # the default training corpus (/usr/share/games/fortunes)
  # Collectives across processes (distributed::initialize, mpirun). Optional, but here so that
  # the library is built once with it, not rebuilt when the tests' set-up would add it.
  libopenmpi-dev openmpi-bin
)
test_packages=(
  libgtest-dev libgmock-dev
  wrk               # the load test of `cujax serve` (tests/cli_serve_load_test.sh)
  xz-utils          # gpu-check.sh --pack's archive, and its test (tests/gpu_check_test.sh)
  clang libclang-rt-dev clang-format  # the fuzzers (scripts/fuzz.sh) and formatting
  python3-zarr      # a test reads cujax checkpoints with Python's zarr
  python3-numpy     # complex_test checks RFFT against numpy.fft; jax-backcompat's run.py
)
case "${1:-}" in
  --tests) packages+=("${test_packages[@]}") ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || {
      echo "setup: missing ${missing[*]}; run this script as root (sudo is not installed)" >&2
      exit 1
    }
    sudo="sudo"
  fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

# The CUDA backend builds when a toolkit is found at /usr/local/cuda; it is optional.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found at /usr/local/cuda"
else
  echo "setup: no CUDA toolkit at /usr/local/cuda; building the CPU backend only"
fi
