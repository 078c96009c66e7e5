#!/usr/bin/env bash
# --platform on every command: `--platform cpu` is accepted (and the cheap commands run on it
# end to end), and on a machine where cuda cannot start `--platform cuda` or CUJAX_PLATFORMS=cuda
# is one error line with exit status 2 that gives the reason `cujax devices` gives.
# Usage: cli_platform_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"

# `cujax devices` names the default backend, and why cuda is not it.
"$cujax" devices >"$work/devices" 2>&1 || fail "cujax devices: exit status $?"
default=$(sed -n 's/^default backend: \([a-z]*\).*/\1/p' "$work/devices")
[ -n "$default" ] || { fail "cujax devices names no default backend"; cat "$work/devices"; }
reason=$(sed -n 's/^default backend: cpu (cuda unavailable: \(.*\); see `cujax doctor`)$/\1/p' "$work/devices")
if [ "$default" = cpu ] && [ -z "$reason" ]; then fail "cujax devices gives no reason for cpu"; fi

# The cheap commands run end to end on --platform cpu.
corpus="$work/corpus.txt"
write_corpus "$corpus"
"$cujax" train --config tiny --data "$corpus" --batch 2 --seq 16 --steps 2 --log-every 1 \
  --eval-every 2 --eval-batches 1 --platform cpu --out "$work/run" >"$work/train.log" 2>&1 ||
  { fail "train --platform cpu"; cat "$work/train.log"; }
grep -q "^training on cpu:0 (cpu)$" "$work/train.log" || { fail "train names no device"; cat "$work/train.log"; }
"$cujax" generate --model "$work/run" --prompt "The " --max-tokens 3 --platform cpu >"$work/gen" 2>&1 ||
  { fail "generate --platform cpu"; cat "$work/gen"; }
"$cujax" export --model "$work/run" --fn forward --batch 1 --seq 4 --out "$work/f.cujax" \
  --platform cpu >"$work/export" 2>&1 || { fail "export --platform cpu"; cat "$work/export"; }
/usr/bin/python3 - "$work/tokens.npy" <<'PY'
import struct, sys
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 4), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<4i", 84, 104, 101, 32))
PY
"$cujax" run "$work/f.cujax" --input "$work/tokens.npy" --print --platform cpu >"$work/run.out" 2>&1 ||
  { fail "run --platform cpu"; cat "$work/run.out"; }
grep -q "f32\[1,4," "$work/run.out" || { fail "run printed no logits"; cat "$work/run.out"; }
timeout 120 "$cujax" stablehlo-test --platform cpu "$src/tests/fixtures/platform_check.mlir" \
  >"$work/shlo" 2>&1 || { fail "stablehlo-test --platform cpu"; cat "$work/shlo"; }
# The bad-input checks of each command come after its options are read, so the error they give
# (rather than "unknown option --platform") shows that --platform cpu is accepted by the
# commands that take long. serve and bench serve are built with cpp-httplib only.
with_serve=yes
"$cujax" serve 2>&1 | grep -q "unknown command 'serve'" && with_serve=
if [ -n "$with_serve" ]; then
  expect_usage_error "serve --platform cpu" "unexpected argument 'extra'" serve --platform cpu extra
  expect_usage_error "bench serve --platform cpu" "unexpected argument 'extra'" bench serve --platform cpu extra
fi
expect_usage_error "bench train --platform cpu" "unexpected argument 'extra'" bench train --platform cpu extra
expect_usage_error "bench scaling --platform cpu" "must divide by" bench scaling --platform cpu --batch 3
expect_usage_error "bench dispatch --platform cpu" "unexpected argument 'extra'" bench dispatch --platform cpu extra
expect_usage_error "unknown platform" "unknown platform 'tpu' (known: cpu, cuda)" train --platform tpu

if [ "$default" = cuda ]; then
  echo "cuda is usable here: the checks of its error are for machines without a GPU"
  finish cli_platform
fi

# Without a usable GPU: every command refuses cuda with the reason, before it does any work.
expect_cuda_error() {
  expect_usage_error "$1" "cuda cannot start: " "${@:2}"
  grep -qF -- "$reason" "$work/err" || { fail "$1: the error lacks the reason '$reason'"; cat "$work/err"; }
}
expect_cuda_error "train" train --platform cuda --out "$work/never"
expect_cuda_error "generate" generate --platform cuda --model "$work/run"
expect_cuda_error "export" export --platform cuda --model "$work/run" --out "$work/never.cujax"
expect_cuda_error "run" run "$work/f.cujax" --input "$work/tokens.npy" --print --platform cuda
expect_cuda_error "stablehlo-test" stablehlo-test --platform cuda "$src/tests/fixtures/platform_check.mlir"
for bench in dispatch train scaling; do
  expect_cuda_error "bench $bench" bench "$bench" --platform cuda
done
if [ -n "$with_serve" ]; then
  expect_cuda_error "serve" serve --platform cuda --model "$work/run"
  expect_cuda_error "bench serve" bench serve --platform cuda
fi
[ -e "$work/never" ] && fail "train --platform cuda wrote its output folder"

# The environment chooses the same way, and --platform overrides it.
CUJAX_PLATFORMS=cuda expect_cuda_error "CUJAX_PLATFORMS=cuda train" train --out "$work/never"
grep -q "CUJAX_PLATFORMS=cuda" "$work/err" || fail "the error does not name CUJAX_PLATFORMS"
CUJAX_PLATFORMS=cuda "$cujax" generate --platform cpu --model "$work/run" --max-tokens 2 \
  >"$work/gen2" 2>&1 || { fail "--platform cpu does not override CUJAX_PLATFORMS=cuda"; cat "$work/gen2"; }
CUJAX_PLATFORMS=cuda,cpu "$cujax" generate --model "$work/run" --max-tokens 2 >"$work/gen3" 2>&1 ||
  { fail "CUJAX_PLATFORMS=cuda,cpu does not fall back to cpu"; cat "$work/gen3"; }
CUJAX_PLATFORMS=cuda "$cujax" devices >"$work/devices2" 2>&1 && fail "devices with CUJAX_PLATFORMS=cuda: exit 0"
grep -qF "default backend: none (CUJAX_PLATFORMS=cuda: cuda cannot start: $reason" "$work/devices2" ||
  { fail "devices does not say why CUJAX_PLATFORMS=cuda fails"; cat "$work/devices2"; }
finish cli_platform
