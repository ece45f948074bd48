# Sourced by the serving device scripts after $bin (sits-serve's folder),
# $W, $FINAL, $NAME and say() exist: sits-serve on a free port and
# bench/serve_load.py against it.
#   SERVE_ENGINE   the engine start_server serves (set before each start)
#   SERVE_MODEL    its model name in the API (default m)
#   SERVE_MAX_QUEUE  --max-queue (default 256)
#   LOAD_JSON_DIR  where load writes load-LABEL.json and the server's
#                  metrics after it, metrics-LABEL.txt (default $FINAL)
server_pid=""
port=""
# start_server [sits-serve options...]: sets $port and $server_pid; ends the
# script when the server does not come up in 30 s.
start_server() {
  "$bin/sits-serve" "$SERVE_ENGINE" --port=0 --model-name="${SERVE_MODEL:-m}" \
    --max-queue="${SERVE_MAX_QUEUE:-256}" "$@" >"$W/server.out" \
    2>>"$FINAL/server.err" &
  server_pid=$!
  port="" last_metrics=""
  for _ in $(seq 300); do
    port=$(grep -o '127.0.0.1:[0-9]*' "$W/server.out" | head -1 | cut -d: -f2)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  say "server did not start: $(tail -3 "$FINAL/server.err")"
  exit 1
}
stop_server() { kill -TERM "$server_pid"; wait "$server_pid"; }
# load LABEL [serve_load options...]: its line into the script's log.
load() {
  local label=$1
  shift
  python3 bench/serve_load.py --url "http://127.0.0.1:$port" \
    --model "${SERVE_MODEL:-m}" --vocab 512 --label "$label" \
    --json "${LOAD_JSON_DIR:-$FINAL}/load-$label.json" "$@" |
    tee -a "$FINAL/$NAME.log"
  # The level's steps by kind: the change since the server's previous
  # level (or its start).
  local metrics=${LOAD_JSON_DIR:-$FINAL}/metrics-$label.txt
  curl -s "http://127.0.0.1:$port/metrics" >"$metrics"
  python3 bench/step_kinds.py "$metrics" $last_metrics | tee -a "$FINAL/$NAME.log"
  last_metrics=$metrics
}
