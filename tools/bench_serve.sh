#!/usr/bin/env bash
# Measures `cujax serve` on loopback: req/s, tok/s, p50/p99 latency and the count of 5xx.
# Usage: tools/bench_serve.sh CUJAX MODEL_DIR MAX_BATCH CLIENTS SECONDS (closed-loop curl clients)
cujax=$1 model=$2 mb=$3 clients=$4 secs=$5 port=$((30000 + RANDOM % 10000))
w=$(mktemp -d)
"$cujax" serve --model "$model" --port $port --max-batch $mb --max-queue 64 2>/dev/null &
pid=$!
until [ "$(curl -s -o /dev/null -w '%{http_code}' localhost:$port/healthz)" = 200 ]; do sleep 0.1; done
end=$((SECONDS + secs))
for c in $(seq $clients); do
  ( while [ $SECONDS -lt $end ]; do
      curl -s -o /dev/null -w '%{http_code} %{time_total}\n' localhost:$port/v1/generate \
        -d '{"prompt": "The model", "max_tokens": 32, "temperature": 0.8, "seed": 1}'
    done >"$w/c$c" ) &
done
wait $(jobs -p | grep -v "^$pid$")
kill -TERM $pid; wait $pid
cat "$w"/c* | /usr/bin/python3 -c "
import sys, statistics
rows = [l.split() for l in sys.stdin]
ok = [float(t) for c, t in rows if c == '200']
bad = sum(1 for c, _ in rows if c.startswith('5'))
ok.sort()
print(f'max-batch $mb clients $clients: {len(ok)/$secs:.2f} req/s, {32*len(ok)/$secs:.1f} tok/s, p50 {1000*ok[len(ok)//2]:.0f} ms, p99 {1000*ok[min(len(ok)-1, int(0.99*len(ok)))]:.0f} ms, 5xx {bad}')
"
rm -rf "$w"
