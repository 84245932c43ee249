#!/usr/bin/env bash
# Debian's headless-capable Chromium for the operator UI's browser tests
# (packages/requester/test/e2e/operator-ui.test.ts drives it with playwright-core). Idempotent:
# nothing to do when /usr/bin/chromium exists. Needs root (or sudo) and apt. Run by `./dev test`
# only: serving Requester does not need a browser.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ -x /usr/bin/chromium ]; then exit 0; fi
apt_install "Chromium is missing (the operator UI tests run in it)" chromium
say "installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
