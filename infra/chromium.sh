#!/usr/bin/env bash
# Debian's headless-capable Chromium for the operator UI's browser tests
# (packages/requester/test/e2e/operator-ui.test.ts drives it with playwright-core). Idempotent:
# nothing to do when /usr/bin/chromium exists. Needs root (or sudo) and apt. Run by `./dev test`
# only: serving Requester does not need a browser.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ -x /usr/bin/chromium ]; then exit 0; fi
command -v apt-get >/dev/null || fail "chromium missing and no apt-get here: install Chromium at /usr/bin/chromium"
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
say "Chromium is missing (the operator UI tests run in it): apt-get install -y chromium"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >&2
say "installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
