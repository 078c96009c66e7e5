#!/usr/bin/env bash
# `cujax serve` under load and at shutdown, on loopback: wrk (Debian's HTTP load generator)
# drives 8 closed-loop connections for 2 s, then 7 s measured, over both APIs (streamed and plain
# /v1/completions, streamed /v1/chat/completions, /v1/generate): every request is answered 2xx,
# no socket errors or timeouts, the server counts no 5xx, and its resident memory grows by at
# most LEAK_BOUND_KB over the load. Then SIGTERM with streams in flight and queued: every
# stream gets all its tokens and [DONE], a new request meanwhile gets 503, the exit status is 0.
# Skips (77) without wrk. In a sanitizer build (CUJAX_TEST_TIME_SCALE > 1: unoptimised and
# instrumented, several times slower, AddressSanitizer's quarantine holding freed memory) the
# times scale and the throughput floor and memory bound are not checked; LeakSanitizer checks
# for leaks at exit there instead. Usage: cli_serve_load_test.sh CUJAX
set -uo pipefail
cujax="$1"
if ! command -v wrk >/dev/null; then
  echo "SKIP: wrk not found (apt-get install wrk, or scripts/setup.sh)"
  exit 77
fi
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
scale="${CUJAX_TEST_TIME_SCALE:-1}"
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
source "$(dirname "$0")/serve_test_lib.sh"

# 2-step models: what they say does not matter, only that they are served. The load runs on
# tiny; the drain on small, whose streams (6 layers, 253 tokens) outlast the time it takes to
# queue four requests: tiny's 125-token streams can all end before the fourth one arrives.
printf 'The model serves text under load.\n%.0s' $(seq 200) >"$work/corpus.txt"
# Both folders are named `model`: the server names a model by its folder, as the requests do.
for config in tiny small; do
  "$cujax" train --config "$config" --data "$work/corpus.txt" --steps 2 --batch 2 --seq 16 \
    --log-every 1 --eval-every 2 --eval-batches 1 --out "$work/$config/model" >/dev/null 2>&1 ||
    { echo "train --config $config failed"; exit 1; }
done
model="$work/tiny/model"

start() {  # start ARGS...: serves $model on a free port ($url) and waits for /healthz 200
  serve_start "$work/serve.log" --model "$model" "$@" && return 0
  echo "FAIL: not ready: $(cat "$work/serve.log")"
  exit 1
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
metric_sum() {  # metric_sum CONDITION: the sum of cujax_requests_total's samples whose status s meets it
  curl -s "$url/metrics" | awk "/^cujax_requests_total/ {
    match(\$0, /status=\"[0-9]+\"/); s = substr(\$0, RSTART + 8, RLENGTH - 9) + 0
    if ($1) n += \$NF } END {print n + 0}"
}

# wrk's Lua script: each connection cycles through four requests, one per kind.
cat >"$work/mix.lua" <<'LUA'
local bodies = {
  {"/v1/completions", '{"model": "model", "prompt": "The model", "max_tokens": 16, "temperature": 0.8, "seed": 1, "stream": true, "stream_options": {"include_usage": true}}'},
  {"/v1/completions", '{"model": "model", "prompt": ["Hello", "a"], "max_tokens": 16, "temperature": 0}'},
  {"/v1/chat/completions", '{"model": "model", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "stream": true}'},
  {"/v1/generate", '{"prompt": "The model", "max_tokens": 16, "temperature": 0.5, "top_p": 0.9}'},
}
local i = 0
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", bodies[i][1], {["Content-Type"] = "application/json"}, bodies[i][2])
end
LUA
load() {  # load SECONDS OUT [URL]: 8 connections on 2 threads, 10 s per-request timeout
  wrk -t 2 -c 8 -d "$1" --timeout $((10 * scale))s -s "$work/mix.lua" "${3:-$url}" >"$2" 2>&1
}
# The checks on wrk's report: it prints these lines only when their counts are not zero.
report_ok() {  # report_ok OUT: "N requests in", no non-2xx answers, no socket errors
  grep -q ' requests in ' "$1" || return 1
  ! grep -q 'Non-2xx or 3xx responses\|Socket errors' "$1"
}

# --max-queue 16 holds every job 8 connections can have (a listed prompt is two), so no 429.
start --max-batch 4 --max-queue 16
# The checks can fail: requests to an unknown model are 404s, which wrk's report shows.
sed 's/"model": "model"/"model": "nope"/' "$work/mix.lua" >"$work/bad.lua"
wrk -t 1 -c 2 -d 1s -s "$work/bad.lua" "$url" >"$work/bad.txt" 2>&1
report_ok "$work/bad.txt" && fail "wrk's report of 404s passed the checks: $(cat "$work/bad.txt")"

# Warm-up (every request kind, every worker thread and its malloc arena), then the load.
load $((2 * scale))s "$work/warm.txt"
report_ok "$work/warm.txt" || fail "warm-up: $(cat "$work/warm.txt")"
settle() {  # the streams wrk left at its deadline free their slots: up to 10 s per scale unit
  # (0.5 s was too short on a loaded 2-core machine: a step there takes ~1 s; polling ends early)
  local tenths=$((100 * scale))
  for ((t = 0; t < tenths; t++)); do
    [ "$(curl -s "$url/metrics" | awk '/^cujax_active_slots/ {print $2}')" = 0 ] && break
    sleep 0.1
  done
}
settle
rss0=$(rss_kb)
ok0=$(metric_sum 's == 200')
load $((7 * scale))s "$work/load.txt"
cat "$work/load.txt"
settle
rss1=$(rss_kb)
report_ok "$work/load.txt" || fail "load: non-2xx answers or socket errors"
requests=$(awk '/ requests in / {print $1}' "$work/load.txt")
# Every request wrk counted was answered 200 by the server; the ones wrk abandoned in flight at
# its deadline (at most one per connection) may have been answered too.
ok=$(($(metric_sum 's == 200') - ok0))
if [ "$scale" = 1 ]; then
  [ "${requests:-0}" -ge 40 ] || fail "only ${requests:-0} requests in 7 s"
else
  [ "${requests:-0}" -ge 1 ] || fail "no request answered in $((7 * scale)) s"
fi
[ "$ok" -ge "${requests:-0}" ] && [ "$ok" -le $((${requests:-0} + 8)) ] ||
  fail "the server answered $ok requests 200, wrk counted ${requests:-0}"
e5xx=$(metric_sum 's >= 500')
[ "$e5xx" = 0 ] || fail "the server answered $e5xx requests 5xx"
active=$(curl -s "$url/metrics" | awk '/^cujax_active_slots/ {print $2}')
[ "$active" = 0 ] || fail "after the load $active slots are still active"
# 8 MB: over the 640..830 requests of 7 s on the 2-core build VM, a leak of 12 KB or more per
# request (a 16-token request's arrays are several times that; the KV cache is 1 MB) exceeds
# it. After the 2-s warm-up the growth measured there was -0.2..+0.3 MB in 5 runs (after a 1-s
# warm-up, up to +4.3 MB: worker threads still taking their first malloc arenas).
LEAK_BOUND_KB=8192
echo "load: $requests requests answered, ${ok} counted 200 by the server, VmRSS $rss0 -> $rss1 kB"
[ "$scale" != 1 ] || [ $((rss1 - rss0)) -le $LEAK_BOUND_KB ] ||
  fail "VmRSS grew by $((rss1 - rss0)) kB over $requests requests (bound $LEAK_BOUND_KB kB)"
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM after the load: nonzero exit"
pid=""

# SIGTERM with streams in flight and queued: one slot, four streams of max_len - 3 tokens each
# (a listed completion is two of them). SIGTERM goes once the first tokens arrive.
model="$work/small/model"
max_len=$(/usr/bin/python3 -c "import json;print(json.load(open('$model/config.json'))['model']['max_len'])")
start --max-batch 1 --max-queue 4
n=$((max_len - 3))
curl -sN "$url/v1/generate" -d "{\"prompt\": \"Hi\", \"max_tokens\": $n, \"stream\": true}" \
  >"$work/s1" &
c1=$!
curl -sN "$url/v1/completions" -d "{\"model\": \"model\", \"prompt\": [\"Hi\", \"a\"], \
  \"max_tokens\": $n, \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
  >"$work/s2" &
c2=$!
curl -sN "$url/v1/chat/completions" -d "{\"model\": \"model\", \"messages\": [{\"role\": \"user\", \
  \"content\": \"Hi\"}], \"max_tokens\": 64, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
  >"$work/s3" &
c3=$!
# SIGTERM once the engine holds all four (one generating, three queued: a request still being
# sent when the server stops listening would be refused, which is not what this checks) and the
# first tokens arrived.
for _ in $(seq $((500 * scale))); do
  held=$(curl -s "$url/metrics" | awk '/^cujax_(active_slots|queue_depth) / {n += $2} END {print n + 0}')
  [ "$held" -ge 4 ] && grep -q '^data: ' "$work/s1" "$work/s2" "$work/s3" 2>/dev/null && break
  sleep 0.02
done
echo "SIGTERM with $held requests held by the engine"
kill -TERM "$pid"
unfinished=$(grep -L '^data: \[DONE\]' "$work/s1" "$work/s2" "$work/s3" | wc -l)
echo "SIGTERM with $unfinished of 3 streams unfinished"
[ "$unfinished" -ge 1 ] || fail "every stream had finished before SIGTERM: the drain is untested"
sleep 0.1
code=$(curl -s -o "$work/late" -w '%{http_code}' "$url/v1/generate" -d '{"prompt": "Hi", "max_tokens": 2}')
[ "$code" = 503 ] || [ "$(grep -L '^data: \[DONE\]' "$work/s1" "$work/s2" "$work/s3" | wc -l)" = 0 ] ||
  fail "a new request while draining: $code $(cat "$work/late" 2>/dev/null), expected 503"
wait "$pid"
rc=$?
pid=""
[ $rc = 0 ] || fail "SIGTERM with streams in flight: exit $rc"
wait "$c1" "$c2" "$c3"
/usr/bin/python3 - "$work/s1" "$work/s2" "$work/s3" "$n" <<'PY' || fail "a stream was cut short by SIGTERM"
import json, sys
n = int(sys.argv[4])
ok = True
for path, choices in ((sys.argv[1], 1), (sys.argv[2], 2), (sys.argv[3], 1)):
    events = [e[len("data: "):] for e in open(path).read().split("\n\n") if e.startswith("data: ")]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    if not events or events[-1] != "[DONE]":
        print(f"{path}: no [DONE] ({len(events)} events)")
        ok = False
    elif path == sys.argv[1]:
        tokens = sum(1 for c in chunks if "token" in c)
        if tokens != n:
            print(f"{path}: {tokens} tokens, expected {n}")
            ok = False
    else:
        usage = chunks[-1].get("usage") or {}
        finished = [c["choices"][0]["index"] for c in chunks
                    if c["choices"] and c["choices"][0].get("finish_reason")]
        # chat may stop early at its end marker; completions run to max_tokens
        want = usage.get("completion_tokens") == choices * n or "chat" in chunks[0]["object"]
        if sorted(finished) != list(range(choices)) or not want:
            print(f"{path}: finished choices {finished}, usage {usage}")
            ok = False
sys.exit(0 if ok else 1)
PY

if ((failures)); then echo "$failures failure(s)"; exit 1; fi
echo "cli_serve_load: all checks passed"
