"""Off-the-shelf reference systems evaluated through our evaluators (optional extras).

A reference system is a real pretrained model from another project, run as it ships, whose
outputs are mapped onto what it shares with the Sapiens2 vocabularies and scored by the same
evaluators as our models. Each system lives in its own module and imports its third-party
package lazily, so this package imports without them.

- ``mediapipe``: MediaPipe 0.10.21 pose landmarker (33 landmarks + person mask) and selfie
  segmentation (:mod:`benchmarks.systems.mediapipe_system`; install with
  ``bash scripts/install_mediapipe.sh``); which of its landmarks a split's keypoint set shares:
  :mod:`benchmarks.systems.mediapipe_keypoints`.
"""

from __future__ import annotations

# system name -> module under benchmarks.systems
SYSTEMS = {"mediapipe": "benchmarks.systems.mediapipe_system"}

__all__ = ["SYSTEMS"]
