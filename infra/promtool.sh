#!/usr/bin/env bash
# Installs promtool and prometheus (Debian's `prometheus` package) when missing: the tests check
# /metrics, the alert rules and their unit tests with promtool, and scrape a running role with a
# real Prometheus. Idempotent: does nothing when both are on the PATH.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then exit 0; fi
apt_install "promtool/prometheus (Debian's prometheus package) missing: the observability tests need them" prometheus
# The package enables a Prometheus service on :9090 where systemd runs; the tests start their own.
if command -v systemctl >/dev/null && systemctl is-enabled prometheus >/dev/null 2>&1; then
  say "stopping and disabling the package's prometheus service (the tests run their own)"
  $SUDO systemctl disable --now prometheus >&2 || true
fi
say "promtool: $(promtool --version 2>&1 | head -n 1)"
