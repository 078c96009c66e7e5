#!/usr/bin/env python3
"""Time a normal request to `cujax serve` while N connections hold half-sent requests open.

Usage: serve_slow_clients.py URL [N ...] [--limit SECONDS]

For each N: opens N connections that send half a request head and wait (slowloris), then
times POST /v1/generate {"prompt": "Hi", "max_tokens": 4} on a fresh connection, and closes
them. Prints one line per N: the seconds it took, or "timeout" past --limit. Exit status 1
when a request failed or timed out. docs/serving.md has the figures.
"""
import json
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def main():
    args = sys.argv[1:]
    limit = 30.0
    if "--limit" in args:
        i = args.index("--limit")
        limit = float(args[i + 1])
        del args[i : i + 2]
    url = args[0]
    counts = [int(n) for n in args[1:]] or [0, 8, 16, 32, 64]
    host = urllib.parse.urlparse(url)
    failed = False
    for n in counts:
        held = []
        for _ in range(n):
            s = socket.create_connection((host.hostname, host.port))
            s.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Le")
            held.append(s)
        time.sleep(0.2)
        body = json.dumps({"prompt": "Hi", "max_tokens": 4}).encode()
        request = urllib.request.Request(url + "/v1/generate", body,
                                         {"Content-Type": "application/json"})
        start = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=limit) as r:
                r.read()
            print(f"{n:4d} half-sent connections: answered in {time.monotonic() - start:.3f} s")
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            print(f"{n:4d} half-sent connections: no answer within {limit:.0f} s ({e})")
            failed = True
        for s in held:
            s.close()
        time.sleep(0.5)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
