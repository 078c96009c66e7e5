#!/usr/bin/env bash
# `cujax train` and `cujax generate` end to end: bad input gives one error line and exit status
# 2; a short run writes its outputs; --resume after losing the last checkpoint ends with the
# same parameters as the uninterrupted run; generate is deterministic per seed.
# Usage: cli_train_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"

corpus="$work/corpus.txt"
write_corpus "$corpus"
: >"$work/empty.txt"
small=(--config tiny --data "$corpus" --batch 4 --seq 32 --log-every 4 --eval-every 6 --eval-batches 2)

expect_usage_error "missing data" "no-such-file" train --data "$work/no-such-file" --out "$work/r0"
expect_usage_error "empty data" "empty" train --data "$work/empty.txt" --out "$work/r0"
expect_usage_error "batch too large" "larger than the training set" train --data "$corpus" --batch 100000 --out "$work/r0"
expect_usage_error "unknown config" "unknown config 'huge'" train --config huge --out "$work/r0"
expect_usage_error "zero steps" "--steps must be at least 1" train --steps 0 --out "$work/r0"
expect_usage_error "negative steps" "--steps must be at least 1" train --steps -5 --out "$work/r0"
expect_usage_error "bad number" "--lr must be a number" train --lr fast --out "$work/r0"
expect_usage_error "unknown option" "unknown option --epochs" train --epochs 3
expect_usage_error "generate without model" "does not exist" generate --model "$work/none"

# An uninterrupted run of 12 steps.
"$cujax" train "${small[@]}" --steps 12 --checkpoint-every 6 --out "$work/a" >"$work/a.log" 2>&1 ||
  { fail "train a"; cat "$work/a.log"; }
for f in config.json metrics.csv loss.svg checkpoints/12/default opt_state/12/default; do
  [ -e "$work/a/$f" ] || fail "train wrote no $f"
done
grep -q "unigram baseline" "$work/a.log" || fail "train did not report the unigram baseline"
# No host sync hides inside the steps: the losses stay on the device until a log fetches them.
grep -q "^device-to-host transfers: 0 inside the steps after the first" "$work/a.log" ||
  fail "train made device-to-host transfers inside its steps: $(grep device-to-host "$work/a.log")"
expect_usage_error "existing run" "already holds a training run" train "${small[@]}" --steps 12 --out "$work/a"

# Checkpoints are saved at their steps whether or not a log falls there.
"$cujax" train "${small[@]}" --steps 6 --checkpoint-every 3 --log-every 4 --out "$work/c" >"$work/c.log" 2>&1 ||
  { fail "train c"; cat "$work/c.log"; }
[ -e "$work/c/checkpoints/3/default" ] || fail "no checkpoint at step 3 between logs"

# The same run, interrupted after its step-6 checkpoint (step 12 lost), then resumed.
"$cujax" train "${small[@]}" --steps 12 --checkpoint-every 6 --out "$work/b" >"$work/b.log" 2>&1 || fail "train b"
rm -rf "$work/b/checkpoints/12" "$work/b/opt_state/12"
"$cujax" train --resume --out "$work/b" >"$work/b2.log" 2>&1 || { fail "resume"; cat "$work/b2.log"; }
grep -q "resuming .* at step 6 of 12" "$work/b2.log" || fail "resume did not start at step 6"
expect_usage_error "resume with a changed option" "--batch cannot be changed" train --resume --out "$work/b" --batch 8
# Parameters: every leaf's dtype, shape and bytes (same_leaves).
same_leaves "$work/a/checkpoints/12/default" "$work/b/checkpoints/12/default" ||
  fail "resumed parameters differ"
[ -s "$work/a.safetensors" ] || fail "no parameters compared"

g=(generate --model "$work/a" --prompt "The " --max-tokens 20 --temperature 0.8 --top-k 10 --seed 3)
"$cujax" "${g[@]}" >"$work/g1" 2>&1 || { fail "generate"; cat "$work/g1"; }
"$cujax" "${g[@]}" >"$work/g2" 2>&1
cmp -s "$work/g1" "$work/g2" || fail "generate with one seed gave two texts"
[ "$(head -c 4 "$work/g1")" = "The " ] || fail "generate does not echo the prompt"

# export: the forward pass and the KV-cache decode step of the same checkpoint, run by `cujax run`
# without the model's code; decoding position by position must give the forward pass's logits.
"$cujax" export --model "$work/a" --fn forward --batch 1 --seq 8 --out "$work/fwd.cujax" >/dev/null || fail "export forward"
"$cujax" export --model "$work/a" --fn generate_step --batch 1 --out "$work/step.cujax" >/dev/null || fail "export generate_step"
expect_usage_error "export unknown fn" "--fn must be forward, generate_step or serve" export --model "$work/a" --fn train --out "$work/x"
expect_usage_error "export too long" "exceeds the model's max_len" export --model "$work/a" --seq 4096 --out "$work/x"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 - "$cujax" "$work" <<'PY' || fail "generate_step artifact disagrees with forward artifact"
import subprocess, sys, numpy as np
cujax, work = sys.argv[1], sys.argv[2]
tokens = np.array([[84, 104, 101, 32, 99, 97, 116, 46]], dtype=np.int32)
np.save(f"{work}/tokens.npy", tokens)
subprocess.run([cujax, "run", f"{work}/fwd.cujax", "--input", f"{work}/tokens.npy",
                "--output", f"{work}/logits.npy"], check=True)
full = np.load(f"{work}/logits.npy")[0]
# The cache leaves in order: cached_key, cached_value, cache_index per layer.
names = [f"{work}/cache{i}.npy" for i in range(12)]
for layer in range(4):
    np.save(names[3 * layer], np.zeros((1, 128, 4, 32), np.float32))
    np.save(names[3 * layer + 1], np.zeros((1, 128, 4, 32), np.float32))
    np.save(names[3 * layer + 2], np.array(0, np.int32))
for p in range(8):
    np.save(f"{work}/token.npy", tokens[:, p:p + 1])
    np.save(f"{work}/position.npy", np.array(p, np.int32))
    args = [cujax, "run", f"{work}/step.cujax"]
    for n in names + [f"{work}/token.npy", f"{work}/position.npy"]:
        args += ["--input", n]
    for n in [f"{work}/step_logits.npy"] + names:
        args += ["--output", n]
    subprocess.run(args, check=True)
    err = np.abs(np.load(f"{work}/step_logits.npy")[0] - full[p]).max()
    if err > 1e-4:
        sys.exit(f"position {p}: max difference {err}")
PY
else
  echo "skip: the decode-versus-forward export check needs numpy under /usr/bin/python3"
fi

finish cli_train_test
