#!/usr/bin/env bash
# Uses the Redis at $REDIS_URL (default redis://127.0.0.1:6379) when one answers; otherwise starts
# a private redis-server from the Debian package on that port, data in .run/redis, with an
# append-only file (fsync every second): Requester needs a Redis that keeps the queue across a
# restart (README, "Running in production"). Idempotent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
read -r HOST PORT < <(url_host_port "${REDIS_URL:-redis://127.0.0.1:6379}" 6379)

if port_open "$HOST" "$PORT"; then
  say "Redis already listening on $HOST:$PORT — reusing it"
  exit 0
fi
command -v redis-server >/dev/null || fail "no Redis answers on $HOST:$PORT and redis-server is not installed (apt-get install redis-server), or set REDIS_URL"
mkdir -p "$RUN_DIR/redis"
say "starting a private Redis on $HOST:$PORT (data: $RUN_DIR/redis)"
redis-server --daemonize yes --bind "$HOST" --port "$PORT" --dir "$RUN_DIR/redis" \
  --save "" --appendonly yes --appendfsync everysec --logfile "$RUN_DIR/redis/redis.log" --pidfile "$RUN_DIR/redis/redis.pid"
wait_port "$HOST" "$PORT" 20 "Redis" "$RUN_DIR/redis/redis.log"
