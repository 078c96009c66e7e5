#!/usr/bin/env bash
# `cujax checkpoint show`: every leaf of Orbax's own OCDBT checkpoints (zarr v2 and v3, with and
# without _METADATA, composite) and of safetensors files, against values computed here (seq,
# Python); --values; the critical fixture variants fail naming the missing file.
# Usage: cli_checkpoint_show_test.sh CUJAX SOURCE_DIR SHARED_DIR
set -uo pipefail
cujax="$1"
src="$2"
shared="${CUJAX_SHARED_DIR:-$3}"
source "$src/tests/cli_test_lib.sh"

expect_usage_error "no action" "checkpoint show PATH" checkpoint
expect_usage_error "unknown action" "checkpoint show PATH" checkpoint list /tmp

# A safetensors file written by Python's struct and json: f32 arange(100) and i64 [-3, 5].
python3 - "$work/t.safetensors" <<'PY'
import json, struct, sys
a = struct.pack("<100f", *range(100))
b = struct.pack("<2q", -3, 5)
h = json.dumps({"w": {"dtype": "F32", "shape": [10, 10], "data_offsets": [0, 400]},
                "n": {"dtype": "I64", "shape": [2], "data_offsets": [400, 416]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + a + b)
PY
"$cujax" checkpoint show "$work/t.safetensors" >"$work/out" 2>&1 || fail "show safetensors: $(cat "$work/out")"
grep -qx "w  float32\[10,10\]  min 0 max 99 mean 49.5 sum 4950" "$work/out" ||
  fail "safetensors stats: $(cat "$work/out")"
grep -qx "n  int64\[2\]  \[-3, 5\]" "$work/out" || fail "safetensors small leaf: $(cat "$work/out")"
"$cujax" checkpoint show "$work/t.safetensors" --values >"$work/out" 2>&1
grep -qx "w  float32\[10,10\]  \[$(seq -s ', ' 0 99)\]" "$work/out" || fail "--values: $(cat "$work/out")"
head -c 100 "$work/t.safetensors" >"$work/bad.safetensors"
"$cujax" checkpoint show "$work/bad.safetensors" >"$work/out" 2>&1
[ $? -eq 1 ] && grep -q "bad.safetensors" "$work/out" || fail "truncated file: $(cat "$work/out")"

orbax="$shared/interop/orbax"
if [ ! -d "$orbax" ]; then
  echo "SKIP (Orbax part): no fixtures at $orbax (set CUJAX_SHARED_DIR)"
  finish cli_checkpoint_show
  exit 0
fi
a="a  int32[8]  [$(seq -s ', ' 0 7)]"
bc="b.c  int32[3]  [$(seq -s ', ' 1 3)]"
shown=0
while IFS= read -r dir; do
  case "$dir" in */critical_metadata_alterations/*) continue ;; esac
  "$cujax" checkpoint show "$dir" >"$work/out" 2>&1 || { fail "show $dir: $(cat "$work/out")"; continue; }
  grep -qxF "$a" "$work/out" && grep -qxF "$bc" "$work/out" || fail "values of $dir: $(cat "$work/out")"
  grep -q "orbax ocdbt, 2 leaves" "$work/out" || fail "format of $dir: $(head -1 "$work/out")"
  shown=$((shown + 1))
done < <(find "$orbax" -name _CHECKPOINT_METADATA -printf '%h\n' | sort)
[ "$shown" -ge 4 ] || fail "only $shown Orbax checkpoints shown"
while IFS= read -r dir; do
  "$cujax" checkpoint show "$dir" >"$work/out" 2>&1
  rc=$?
  missing="${dir##*/missing_pytree_data_}"; missing="${missing#dir_}"; missing="${missing#file_}"
  [ $rc -eq 1 ] && grep -qF "$dir/$missing" "$work/out" || fail "critical $dir (rc $rc): $(cat "$work/out")"
done < <(find "$orbax" -path '*/critical_metadata_alterations/*' -name _CHECKPOINT_METADATA -printf '%h\n')
# convert: an Orbax fixture through every format written, back to safetensors byte for byte.
src_ckpt="$orbax/v0_checkpoints/direct_checkpoint/checkpoint_metadata_present/pytree_checkpointable_has_metadata"
"$cujax" checkpoint convert "$src_ckpt" "$work/ref.safetensors" --to safetensors || fail "convert to safetensors"
prev="$work/ref.safetensors"
for to in ocdbt zarr msgpack safetensors; do
  "$cujax" checkpoint convert "$prev" "$work/chain.$to" --to $to || fail "convert $prev to $to"
  prev="$work/chain.$to"
done
cmp -s "$work/ref.safetensors" "$prev" || fail "convert through ocdbt, zarr and msgpack changed a leaf"
"$cujax" checkpoint show "$work/chain.ocdbt" >"$work/out" 2>&1
grep -qxF "$a" "$work/out" && grep -qxF "$bc" "$work/out" || fail "show after convert: $(cat "$work/out")"
expect_usage_error "convert --to npz" "--to must be" checkpoint convert "$src_ckpt" "$work/x" --to npz
expect_usage_error "convert onto an existing path" "already exists" \
  checkpoint convert "$src_ckpt" "$work/ref.safetensors" --to msgpack
finish cli_checkpoint_show
