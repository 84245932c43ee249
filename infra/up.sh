#!/usr/bin/env bash
# Brings up the local infrastructure Requester needs: Kafka (always from this project's scripts),
# Redis and PostgreSQL (reused when they answer). Idempotent: run it as often as you like.
# (What only the tests need — promtool, Chromium — `./dev test` installs itself.)
set -euo pipefail
here="$(dirname "$0")"
bash "$here/redis.sh"
bash "$here/postgres.sh"
bash "$here/kafka.sh" start
