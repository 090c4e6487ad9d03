#!/bin/bash
# Start or stop greenupd for the test cluster. Usage: greenupd.sh start|stop
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
BIN=${GREENUPD_BIN:-$GC_BIN_DIR/greenupd}
case "${1:-}" in
  start)
    mkdir -p "$GC_RUN" "$GC_LOG" /var/lib/greenup-test
    gc_stop_pidfile "$GC_RUN/greenupd.pid"
    [ -x "$BIN" ] || { echo "greenupd.sh: $BIN not built" >&2; exit 1; }
    # Reclaim passes every 2 s for jobs open 3 s or more, so the reclaim test need not
    # wait the production defaults (60 s, 120 s).
    nohup "$BIN" --config $GC_ETC/greenup.yaml --reclaim-every 2 --reclaim-min-age 3 \
      > "$GC_LOG/greenupd.log" 2>&1 &
    echo $! > "$GC_RUN/greenupd.pid"
    for _ in $(seq 1 50); do
      [ -S "$GC_RUN/greenupd.sock" ] && (exec 3<>/dev/tcp/127.0.0.1/17470) 2>/dev/null && exit 0
      kill -0 "$(cat "$GC_RUN/greenupd.pid")" 2>/dev/null || break
      sleep 0.1
    done
    echo "greenupd.sh: greenupd did not start; see $GC_LOG/greenupd.log" >&2
    tail -5 "$GC_LOG/greenupd.log" >&2
    exit 1 ;;
  stop) gc_stop_pidfile "$GC_RUN/greenupd.pid" ;;
  *) echo "usage: greenupd.sh start|stop" >&2; exit 2 ;;
esac
