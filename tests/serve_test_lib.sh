# Sourced by the serve tests after they set `cujax`. serve_start LOG ARGS... runs `cujax serve
# --port 0 ARGS...` in the background (pid), reads the port it bound from its "listening on"
# line (port, url) and waits up to 60 s for /healthz 200; it returns 1 if the server exits or
# is not ready by then. The kernel picks the port: a port chosen by the test could be taken by
# another test's connection before the server binds it.
serve_start() {
  local log="$1"
  shift
  "$cujax" serve --port 0 "$@" >"$log" 2>&1 &
  pid=$!
  port=""
  url=""
  for _ in $(seq 600); do
    if [ -z "$port" ]; then
      port=$(sed -n 's|^cujax serve: listening on http://.*:\([0-9][0-9]*\)$|\1|p' "$log")
      [ -n "$port" ] && url="http://127.0.0.1:$port"
    fi
    [ -n "$url" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
