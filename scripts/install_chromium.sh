#!/usr/bin/env bash
# Installs Debian's headless Chromium and its WebDriver (chromium-driver) for the leaderboard browser
# test, which drives them with Selenium (the 'test' extra). Skipped when both are present.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "install_chromium: not root; install Debian's 'chromium' and 'chromium-driver' packages to run" \
       "the browser test" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium chromium-driver fonts-dejavu-core >/dev/null
