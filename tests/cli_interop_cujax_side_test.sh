#!/usr/bin/env bash
# The cujax side of interop_check.py's issue 36 and 39 rows, which need JAX to finish (a GPU
# session runs them; docs/interop.md): a `cujax train --config tiny` run's checkpoint is OCDBT and
# `cujax checkpoint show` lists exactly the leaves, dtypes and shapes of the Flax NNX twin
# (bench/jax/model.py: nnx.Embed, LayerNorm, LinearGeneral and Linear, worked out here from Flax's
# parameter shapes and the config in bench/jax/common.py); `cujax export --format jax` of its
# forward runs in `cujax run` to the cujax artifact's logits, bit for bit, (2, 32, vocab) f32.
# Usage: cli_interop_cujax_side_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"

write_corpus "$work/corpus.txt"
run="$work/run"
"$cujax" train --config tiny --batch 2 --steps 2 --log-every 1 --eval-every 2 --eval-batches 1 \
  --data "$work/corpus.txt" --out "$run" >"$work/train.log" 2>&1 || fail "train: $(tail -3 "$work/train.log")"

# --- issue 39: the checkpoint Orbax's StandardCheckpointer().restore reads, in OCDBT
ckpt="$run/checkpoints/2/default"
[ -f "$ckpt/manifest.ocdbt" ] || fail "$ckpt has no manifest.ocdbt: not Orbax's default layout"
"$cujax" checkpoint show "$ckpt" >"$work/show" 2>&1 || fail "checkpoint show: $(cat "$work/show")"
grep -q "orbax ocdbt, 68 leaves" "$work/show" || fail "checkpoint show's header: $(head -1 "$work/show")"
sed -nE '2,$s/^([^ ]+)  ([a-z0-9]+\[[0-9,]*\])  .*/\1 \2/p' "$work/show" | sort >"$work/leaves"
python3 - "$src/bench/jax" >"$work/flax-leaves" <<'PY' || fail "the Flax twin's leaves"
import sys
sys.path.insert(0, sys.argv[1])
from common import CONFIGS  # the standard library only
c = CONFIGS["tiny"]
d, H, f, V, T = c["d_model"], c["num_heads"], c["d_ff"], c["vocab_size"], c["max_len"]
h = d // H
leaves = {"embed.embedding": (V, d), "pos_embed.embedding": (T, d),
          "ln_f.scale": (d,), "ln_f.bias": (d,)}
for i in range(c["num_layers"]):
    b = f"blocks.{i}."
    for ln in ("ln1", "ln2"):  # nnx.LayerNorm: scale and bias (d,)
        leaves[b + ln + ".scale"] = leaves[b + ln + ".bias"] = (d,)
    for p in ("query", "key", "value"):  # nnx.LinearGeneral(d, (H, h)): kernel (d, H, h)
        leaves[f"{b}attn.{p}.kernel"], leaves[f"{b}attn.{p}.bias"] = (d, H, h), (H, h)
    leaves[b + "attn.out.kernel"], leaves[b + "attn.out.bias"] = (H, h, d), (d,)
    leaves[b + "mlp.fc.kernel"], leaves[b + "mlp.fc.bias"] = (d, f), (f,)  # nnx.Linear
    leaves[b + "mlp.proj.kernel"], leaves[b + "mlp.proj.bias"] = (f, d), (d,)
# Orbax's paths of an nnx.State end in the Variable's `value`.
for name, shape in sorted(leaves.items()):
    print(f"{name}.value float32[{','.join(map(str, shape))}]")
PY
sort -o "$work/flax-leaves" "$work/flax-leaves"
[ "$(wc -l <"$work/flax-leaves")" = 68 ] || fail "the Flax twin has $(wc -l <"$work/flax-leaves") leaves"
diff "$work/flax-leaves" "$work/leaves" >"$work/leaves.diff" ||
  fail "the checkpoint's leaves differ from the Flax twin's (< Flax, > cujax): $(head -c 600 "$work/leaves.diff")"

# --- issue 36: the jax.export container cujax writes, run by cujax
# int32 tokens (2, 32) as a .npy, written with the standard library (interop_check's shape)
python3 - "$work/tokens.npy" <<'PY' || fail "writing tokens"
import random, struct, sys
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 32), }"
header += " " * (-(10 + len(header) + 1) % 64) + "\n"
rng = random.Random(7)
data = struct.pack("<64i", *(rng.randrange(256) for _ in range(64)))
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) +
                              header.encode() + data)
PY
for format in cujax jax; do
  "$cujax" export --model "$run" --out "$work/forward.$format" --fn forward --format "$format" \
    --batch 2 --seq 32 --platform cpu >"$work/export.log" 2>&1 || fail "export --format $format: $(cat "$work/export.log")"
  "$cujax" run "$work/forward.$format" --input "$work/tokens.npy" --output "$work/logits-$format.npy" \
    --platform cpu >"$work/run.log" 2>&1 || fail "run of --format $format: $(cat "$work/run.log")"
done
cmp -s "$work/forward.cujax" "$work/forward.jax" && fail "--format jax wrote the cujax artifact"
cmp "$work/logits-cujax.npy" "$work/logits-jax.npy" || fail "the jax format's logits differ from the cujax artifact's"
python3 - "$work/logits-jax.npy" <<'PY' || fail "the jax format's logits: not (2, 32, 256) float32 finite values"
import ast, math, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<H", raw[8:10])[0]
h = ast.literal_eval(raw[10:10 + n].decode())
assert h["descr"] == "<f4" and h["shape"] == (2, 32, 256), h
values = struct.unpack(f"<{2 * 32 * 256}f", raw[10 + n:])
assert all(math.isfinite(v) for v in values) and len(set(values)) > 1000
PY
finish cli_interop_cujax_side
