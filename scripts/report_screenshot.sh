#!/usr/bin/env bash
# The README's picture of the report: a headless-Chromium screenshot of a main job's report page.
#   bash scripts/report_screenshot.sh OUT [WIDTHxHEIGHT]     (OUT: a `sapiens2-bench run --out OUT` folder)
# writes docs/img/report.png (default 1400x900: the top of the page, where the summary is).
set -euo pipefail
out=${1:?usage: bash scripts/report_screenshot.sh OUT_OF_A_MAIN_JOB [WIDTHxHEIGHT]}
size=${2:-1400x900}
page="$(cd "$out" && pwd)/site/index.html"
[ -f "$page" ] || { echo "no report at $page (make one with: sapiens2-bench run --out $out)" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome) \
  || { echo "no Chromium found (bash scripts/install_chromium.sh installs it)" >&2; exit 1; }
cd "$(dirname "$0")/.."
mkdir -p docs/img
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot=docs/img/report.png "file://$page" 2>/dev/null
echo "wrote docs/img/report.png from $page"
