#!/usr/bin/env bash
# Installs promtool and prometheus (Debian's `prometheus` package) when missing: the tests check
# /metrics, the alert rules and their unit tests with promtool, and scrape a running role with a
# real Prometheus. Idempotent: does nothing when both are on the PATH.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then exit 0; fi
command -v apt-get >/dev/null ||
  fail "promtool/prometheus missing and no apt-get here: install Prometheus 2.x (promtool and prometheus on the PATH)"
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=sudo; else
    fail "promtool/prometheus missing: run 'sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus'"
  fi
fi
say "installing Debian's prometheus package for promtool and prometheus: apt-get update && apt-get install -y --no-install-recommends prometheus"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >&2
# The package enables a Prometheus service on :9090 where systemd runs; the tests start their own.
if command -v systemctl >/dev/null && systemctl is-enabled prometheus >/dev/null 2>&1; then
  say "stopping and disabling the package's prometheus service (the tests run their own)"
  $sudo systemctl disable --now prometheus >&2 || true
fi
say "promtool: $(promtool --version 2>&1 | head -n 1)"
