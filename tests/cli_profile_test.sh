#!/usr/bin/env bash
# --profile DIR and `cujax doctor --trace DIR`: a short training run's trace is valid trace-event
# JSON as Perfetto reads it (checked with Python's json module: the fields every event needs,
# spans nested per thread, the expected spans), generate writes one too, and the doctor reports
# the run's steps and its first-step compilation.
# Usage: cli_profile_test.sh CUJAX SOURCE_DIR
set -uo pipefail
cujax="$1"
src="$2"
source "$src/tests/cli_test_lib.sh"

corpus="$work/corpus.txt"
write_corpus "$corpus"
"$cujax" train --config tiny --data "$corpus" --batch 2 --seq 16 --steps 3 --log-every 3 \
  --eval-every 3 --eval-batches 1 --platform cpu --out "$work/run" --profile "$work/trace" \
  >"$work/train.log" 2>&1 || { fail "train --profile"; cat "$work/train.log"; }
grep -q "wrote the trace $work/trace/plugins/profile/.*/perfetto_trace.json" "$work/train.log" ||
  { fail "train --profile names no trace file"; cat "$work/train.log"; }

# check_trace FILE STEPS: the trace opens in Perfetto's JSON importer (every event has the
# fields it needs), its spans nest per thread, and it has the spans a training run records.
check_trace() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
from collections import Counter, defaultdict
trace = json.load(open(sys.argv[1]))
steps_wanted = int(sys.argv[2])
errors = []
events = trace["traceEvents"]
for e in events:
    for field in ("ph", "name", "pid", "tid"):
        if field not in e:
            errors.append(f"event without {field}: {e}")
    if e.get("ph") == "M":
        if not isinstance(e.get("args", {}).get("name"), str):
            errors.append(f"metadata event without args.name: {e}")
        continue
    if e.get("ph") not in ("X", "i"):
        errors.append(f"unexpected phase: {e}")
    if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
        errors.append(f"event without a timestamp: {e}")
    if e.get("ph") == "X" and (not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0):
        errors.append(f"complete event without a duration: {e}")
    if not isinstance(e.get("cat"), str):
        errors.append(f"event without a category: {e}")
# Spans of one thread nest: none overlaps another partly.
threads = defaultdict(list)
for e in events:
    if e.get("ph") == "X":
        threads[(e.get("pid"), e.get("tid"))].append(e)
for spans in threads.values():
    spans.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in spans:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 1e-3:
            stack.pop()
        if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + 1e-3:
            errors.append(f"{e['name']} overlaps {stack[-1]['name']} partly")
        stack.append(e)
cats = Counter(e.get("cat") for e in events)
for cat in ("compile", "dispatch", "device", "op", "transfer"):
    if cats[cat] == 0:
        errors.append(f"no {cat} spans")
steps = sorted(e["args"]["step_num"] for e in events if e.get("cat") == "step")
if steps_wanted >= 0 and steps != list(range(steps_wanted)):
    errors.append(f"step spans {steps}, expected 0..{steps_wanted - 1}")
for e in events:
    if e.get("cat") == "transfer" and (not isinstance(e["args"].get("bytes"), int) or
                                       e["args"].get("direction") not in
                                       ("host_to_device", "device_to_host", "device_to_device")):
        errors.append(f"transfer without bytes or direction: {e}")
for error in errors[:20]:
    print(error)
sys.exit(1 if errors else 0)
PY
}
trace_file=$(ls "$work"/trace/plugins/profile/*/perfetto_trace.json 2>/dev/null | head -1)
if [ -z "$trace_file" ]; then
  fail "no trace under $work/trace"
else
  check_trace "$trace_file" 3 || fail "train's trace is not what Perfetto reads"
fi

# The doctor reads the log directory: three steps, and the first one's compilation.
"$cujax" doctor --trace "$work/trace" >"$work/doctor" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { fail "doctor --trace: exit status $rc, expected 1 (a pitfall found)"; cat "$work/doctor"; }
grep -q "^3 step(s)" "$work/doctor" || { fail "doctor --trace counts no 3 steps"; cat "$work/doctor"; }
grep -q "\[first-step-compilation\]" "$work/doctor" ||
  { fail "doctor --trace misses the first step's compilation"; cat "$work/doctor"; }
grep -q "top ops by time" "$work/doctor" || { fail "doctor --trace lists no ops"; cat "$work/doctor"; }

# generate --profile: a trace without steps, valid all the same.
"$cujax" generate --model "$work/run" --prompt "The " --max-tokens 3 --platform cpu \
  --profile "$work/gen-trace" >"$work/gen.log" 2>&1 || { fail "generate --profile"; cat "$work/gen.log"; }
gen_file=$(ls "$work"/gen-trace/plugins/profile/*/perfetto_trace.json 2>/dev/null | head -1)
if [ -z "$gen_file" ]; then
  fail "generate --profile wrote no trace"
else
  check_trace "$gen_file" 0 || fail "generate's trace is not what Perfetto reads"
fi

expect_usage_error "doctor --trace of a missing path" "neither a trace file nor a directory" \
  doctor --trace "$work/missing"
expect_usage_error "doctor --trace of a folder without a trace" "no trace in" doctor --trace "$work/run"
expect_usage_error "--profile without a value" "profile" train --profile

finish cli_profile
