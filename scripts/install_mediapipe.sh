#!/usr/bin/env bash
# Installs the optional MediaPipe reference system into .venv without the declared deps that cannot
# be installed beside the rest (see scripts/requirements-mediapipe.txt). Idempotent: exits at once when it already works.
# Never fails the caller: without it the MediaPipe tests skip with a printed reason.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# mediapipe works and every line of the requirements file is installed (pip check needs them all)
check='import importlib.metadata as m, re, mediapipe as mp
assert m.version("mediapipe") == "0.10.21", m.version("mediapipe")
for line in open("scripts/requirements-mediapipe.txt"):
    name = re.match(r"[A-Za-z0-9_.-]*", line.split("#")[0].strip())[0]
    name and m.version(name)
from benchmarks.systems.mediapipe_system import require_mediapipe
require_mediapipe(); mp.solutions.pose'
if [ ! -x "$PY" ]; then
  echo "install_mediapipe: no .venv (run scripts/bootstrap.sh first); skipping" >&2
  exit 0
fi
if "$PY" -c "$check" >/dev/null 2>&1; then
  exit 0
fi
before=$("$PY" -c 'import numpy, torch; print(numpy.__version__, torch.__version__)')
if ! "$PY" -m pip install -q --no-deps -c scripts/constraints.txt -r scripts/requirements-mediapipe.txt; then
  echo "install_mediapipe: pip install failed; the MediaPipe reference system stays unavailable" >&2
  exit 0
fi
after=$("$PY" -c 'import numpy, torch; print(numpy.__version__, torch.__version__)')
if [ "$before" != "$after" ]; then
  echo "install_mediapipe: numpy/torch changed ($before -> $after); check the environment" >&2
  exit 1
fi
if ! "$PY" -c "$check" >/dev/null 2>&1; then
  echo "install_mediapipe: mediapipe installed but does not import or lacks its models:" >&2
  "$PY" -c "$check" 2>&1 | tail -3 >&2
  exit 0
fi
echo "install_mediapipe: mediapipe 0.10.21 ready"
