#!/usr/bin/env bash
# Uses the PostgreSQL at $DATABASE_URL (default postgres://postgres@127.0.0.1:5432/requester) when
# one answers; otherwise starts the machine's Debian cluster, or initialises a private one in
# .run/postgres (trust auth on loopback). The database itself is created by `requester` on start.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
read -r HOST PORT < <(url_host_port "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/requester}" 5432)

if port_open "$HOST" "$PORT"; then
  say "PostgreSQL already listening on $HOST:$PORT — reusing it"
  exit 0
fi
# The Debian cluster listens on 5432: start it only when that is the port asked for.
if [ "$PORT" = 5432 ] && command -v pg_ctlcluster >/dev/null && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  say "starting the machine's PostgreSQL $version cluster"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  port_open "$HOST" "$PORT" && exit 0
fi
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || fail "no PostgreSQL answers on $HOST:$PORT and none is installed (apt-get install postgresql), or set DATABASE_URL"
data="$RUN_DIR/postgres"
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); mkdir -p "$data"; chown postgres "$data"; fi
if [ ! -f "$data/PG_VERSION" ]; then
  say "initialising a private PostgreSQL in $data"
  "${as_pg[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust >/dev/null
fi
say "starting a private PostgreSQL on $HOST:$PORT"
"${as_pg[@]}" "$bin/pg_ctl" -D "$data" -l "$data/postgres.log" -w \
  -o "-h $HOST -p $PORT -k /tmp" start >/dev/null
wait_port "$HOST" "$PORT" 30 "PostgreSQL" "$data/postgres.log"
