#!/usr/bin/env bash
# Installs Debian's headless Chromium for the leaderboard browser test (skipped when present).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "install_chromium: not root; install Debian's 'chromium' package to run the browser test" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
