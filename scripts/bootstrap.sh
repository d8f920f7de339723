#!/usr/bin/env bash
# Creates .venv and installs sapiens2-bench in editable mode with the extras the test suite uses
# (test, openmmlab, hf, coco, realistic), every package at the exact version of scripts/constraints.txt
# (pyproject.toml itself only declares compatible ranges). The result is a NumPy-1 environment on
# the CPU build of torch 2.13.0. Idempotent: a second run only checks that the environment is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
install=(.venv/bin/python -m pip install -q -c scripts/constraints.txt)
stamp=.venv/.bootstrap-$(cat scripts/constraints.txt pyproject.toml scripts/bootstrap.sh | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  "${install[@]}" --upgrade pip wheel setuptools
  # torch first and alone, so nothing later can pull a CUDA build.
  "${install[@]}" torch
  "${install[@]}" -e '.[test,openmmlab,hf,coco,realistic]'
  # mmpose's declared deps include chumpy, which does not build, and torchvision, which would bring
  # a second torch build; its other needs are in the openmmlab extra (scripts/no-deps-gaps.txt).
  "${install[@]}" --no-deps mmpose
  # Packages that earlier versions of this script installed and nothing needs now. The -headless
  # OpenCV build shares cv2/ with opencv-python, so removing it takes files opencv-python owns:
  # opencv-python is reinstalled after it (one OpenCV build, complete).
  stale=$(.venv/bin/python -m pip list --format=freeze | grep -ioE '^(opencv-python-headless|six|ftfy)==' \
    | cut -d= -f1 || true)
  if [ -n "$stale" ]; then
    .venv/bin/python -m pip uninstall -q -y $stale
    "${install[@]}" --force-reinstall --no-deps opencv-python
  fi
  rm -f .venv/.bootstrap-*
  touch "$stamp"
fi
# The realistic synthetic generator, once: Mitsuba's variant check (its fast LLVM variant needs a
# libLLVM, e.g. Debian's libllvm19: optional, else it renders on scalar_rgb and says so) and anny's
# model cache (built on first use: minutes and about 0.8 GB under ~/.cache/anny; a no-op after).
echo "bootstrap: preparing the realistic synthetic generator (anny's model cache is built once)..."
.venv/bin/python -c "from sapiens2.datasets.synth.realistic.sample import prepare; print('mitsuba variant:', prepare())"
# Optional MediaPipe reference system (never fails the bootstrap; its tests skip with a reason).
bash scripts/install_mediapipe.sh
# pip check: nothing unmet but the listed gaps of the two --no-deps installs.
.venv/bin/python scripts/pip_check.py
