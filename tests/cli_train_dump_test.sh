#!/usr/bin/env bash
# `cujax train --dump-batches FILE` writes the run's training batches as .npy int32 (steps, 2,
# B, T): read back here without numpy, every row is a window of the corpus (byte tokens), its
# targets are its inputs shifted by one, and the same seed gives the same file.
# Usage: cli_train_dump_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"
corpus="$work/corpus.txt"
write_corpus "$corpus"
train() {  # train OUT SEED
  "$cujax" train --platform cpu --config tiny --steps 4 --batch 3 --seq 24 --log-every 4 \
    --eval-every 4 --eval-batches 1 --data "$corpus" --seed "$2" --out "$work/run-$(basename "$1" .npy)" \
    --dump-batches "$1" >"$work/log" 2>&1 || { fail "cujax train: exit status $?"; cat "$work/log"; }
}
train "$work/a.npy" 0
train "$work/b.npy" 0
train "$work/c.npy" 1
cmp -s "$work/a.npy" "$work/b.npy" || fail "the same seed dumped different batches"
cmp -s "$work/a.npy" "$work/c.npy" && fail "seeds 0 and 1 dumped the same batches"
python3 - "$work/a.npy" "$corpus" <<'PY' || fail "the dumped batches (above)"
import ast, struct, sys
data = open(sys.argv[1], "rb").read()
corpus = open(sys.argv[2], "rb").read()
assert data[:6] == b"\x93NUMPY", "not an .npy file"
major = data[6]
hlen = struct.unpack("<H" if major == 1 else "<I", data[8:10] if major == 1 else data[8:12])[0]
start = 10 if major == 1 else 12
header = ast.literal_eval(data[start:start + hlen].decode())
assert header["descr"] == "<i4" and not header["fortran_order"], header
assert header["shape"] == (4, 2, 3, 24), header["shape"]
values = struct.unpack(f"<{4 * 2 * 3 * 24}i", data[start + hlen:])
row = lambda s, k, b: values[((s * 2 + k) * 3 + b) * 24:((s * 2 + k) * 3 + b + 1) * 24]
for s in range(4):
    for b in range(3):
        inputs, targets = row(s, 0, b), row(s, 1, b)
        assert inputs[1:] == targets[:-1], f"step {s} row {b}: targets are not inputs shifted"
        window = bytes(inputs + targets[-1:])
        assert window in corpus, f"step {s} row {b}: {window!r} is not in the corpus"
print("4 steps x 3 rows of 24 tokens: windows of the corpus, targets shifted by one")
PY
finish cli_train_dump
