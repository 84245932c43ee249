#!/usr/bin/env bash
# Stops what infra/up.sh started itself (the Kafka broker; a private Redis/PostgreSQL if any).
# Services that were already running before are left alone.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
bash "$(dirname "$0")/kafka.sh" stop
if [ -f "$RUN_DIR/redis/redis.pid" ] && kill -0 "$(cat "$RUN_DIR/redis/redis.pid")" 2>/dev/null; then
  say "stopping the private Redis"; kill "$(cat "$RUN_DIR/redis/redis.pid")"
fi
if [ -f "$RUN_DIR/postgres/postmaster.pid" ]; then
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  say "stopping the private PostgreSQL"
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$bin/pg_ctl" -D "$RUN_DIR/postgres" stop; else "$bin/pg_ctl" -D "$RUN_DIR/postgres" stop; fi
fi
