#!/usr/bin/env bash
# Brings up the local infrastructure Requester needs: Kafka (always from this project's scripts),
# Redis and PostgreSQL (reused when they answer), and installs promtool/prometheus for the
# observability tests when missing. Idempotent: run it as often as you like.
set -euo pipefail
here="$(dirname "$0")"
bash "$here/redis.sh"
bash "$here/postgres.sh"
bash "$here/kafka.sh" start
# Not fatal for `./dev start`: without it only the observability tests fail (saying why).
bash "$here/promtool.sh" || printf '\033[1;33m[infra] warning:\033[0m promtool not installed; the observability tests will fail\n' >&2
