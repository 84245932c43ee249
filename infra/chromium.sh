#!/usr/bin/env bash
# Debian's headless-capable Chromium for the operator UI's browser tests
# (packages/requester/test/e2e/operator-ui.test.ts drives it with playwright-core). Idempotent:
# nothing to do when /usr/bin/chromium exists. Needs root (or sudo) and apt.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
log() { printf '\033[1;32m[chromium]\033[0m %s\n' "$*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
log "Chromium is missing (the operator UI tests run in it): apt-get install -y chromium"
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >&2
log "installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
