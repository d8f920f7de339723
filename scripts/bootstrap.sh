#!/usr/bin/env bash
# Creates .venv and installs sapiens2-bench with every pinned dependency. Idempotent: a second run
# only checks that the environment is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.bootstrap-$(cat scripts/requirements.txt pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip wheel setuptools
  # torch first and alone, so nothing later can pull a CUDA build.
  .venv/bin/python -m pip install -q torch==2.13.0
  .venv/bin/python -m pip install -q -r scripts/requirements.txt
  # mmpose's declared deps include chumpy, which does not build; its real needs are in requirements.txt.
  .venv/bin/python -m pip install -q --no-deps mmpose==1.3.2
  .venv/bin/python -m pip install -q --no-deps -e .
  rm -f .venv/.bootstrap-*
  touch "$stamp"
fi
# Optional MediaPipe reference system (never fails the bootstrap; its tests skip with a reason).
bash scripts/install_mediapipe.sh
