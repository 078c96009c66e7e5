#!/usr/bin/env bash
# Runs JAX's own exported programs (shared/interop/jax-backcompat) whose names start with one of
# the FILTERs through `cujax run` with run.py (--via artifact, text or bytecode), and fails when
# a case listed in the expected-passes file does not pass. Cases that pass but are not listed
# are reported, to be added to the list. Skips (exit 77) when the data, python3 or numpy is
# absent.
# Usage: jax_backcompat_test.sh CUJAX_BINARY EXPECTED_PASSES_FILE SHARED_DIR VIA FILTER...
set -u
bin="$1"; expected="$2"; shared="${CUJAX_SHARED_DIR:-$3}"; via="$4"
shift 4
filters=()
for f in "$@"; do filters+=(-k "$f"); done
runpy="$shared/interop/jax-backcompat/run.py"
if [ ! -f "$runpy" ]; then
  echo "SKIP: $runpy not found (set CUJAX_SHARED_DIR to the shared/ folder)"
  exit 77
fi
if ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  echo "SKIP: python3 with numpy (Debian: python3-numpy) is needed to run $runpy"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$runpy" --cujax "$bin" -j 2 --timeout 60 --via "$via" "${filters[@]}" \
  --json "$work/results.json"
/usr/bin/python3 - "$work/results.json" "$expected" "$via" "$@" <<'PY'
import json, sys
# run.py selects by substring; the cases are those whose names start with a FILTER.
results = {r["case"]: r for r in json.load(open(sys.argv[1]))["results"]
           if r["case"].startswith(tuple(sys.argv[4:]))}
want = [l.split("#")[0].strip() for l in open(sys.argv[2])]
want = [w for w in want if w]
bad = []
for case in want:
    r = results.get(case)
    if r is None:
        bad.append(f"{case}: not run (the case is missing from the data)")
    elif r["status"] != "PASS":
        bad.append(f"{case}: {r['status']} [{r['reason_class']}] {r['reason']}")
extra = sorted(c for c, r in results.items() if r["status"] == "PASS" and c not in want)
passed = sum(r["status"] == "PASS" for r in results.values())
print(f"--via {sys.argv[3]}: {passed} of {len(results)} selected cases pass; "
      f"{len(want)} listed as expected passes")
for c in extra:
    print(f"NEW PASS (add it to {sys.argv[2]}): {c}")
for b in bad:
    print(f"REGRESSION: {b}")
sys.exit(1 if bad else 0)
PY
