"""The main job's defaults: its backbones and its embedded synthetic split's size and render settings.

Plain constants, importable without torch or the data stack, so that the command line shows them in
its help without importing what runs the job (``sapiens2-bench run --help``, ``data synth --help``).
:mod:`benchmarks.mainjob` and :mod:`benchmarks.embedded_split` use them and re-export them.
"""

from __future__ import annotations

# The shipped pretrained backbones (the reference objective and its MAE-only ablation, one arch)
# beside their random-init twin, a transformers baseline (random init: no weights can be downloaded
# here), the pixels and the ground-truth ceiling.
DEFAULT_BACKBONES = ("gt-oracle", "floor", "sapiens2_cpu_small", "sapiens2_cpu_small_mae",
                     "sapiens2_cpu_small-random", "dinov2_small", "pixels")
QUICK_BACKBONES = ("gt-oracle", "floor", "sapiens2_tiny", "pixels")

# Scenes of the default synthetic split; the protocol holds out every 4th (test), the rest train.
# 384 -> 96 test scenes (and their pose crops): docs/probing.md says why (interval widths).
DEFAULT_SPLIT_IMAGES = 384
QUICK_SPLIT_IMAGES = 96

# The embedded split's generators: realistic (anny bodies path-traced by Mitsuba) is the default;
# procedural (ray-cast capsule people, no extra dependency) stays by name and under --quick, which
# the tests run. The realistic split's image: path tracing at 64 samples per pixel. 16 left visible
# grain that a real pretrained model trips on (MediaPipe: more people missed, lower body AP and
# person-mask IoU than at 64, while 256 gains nothing: docs/synthetic_data.md, "How real do they
# look?"); 64 costs about 1.6x the render CPU of 16 (benchmarks/results/realistic_render_speed.txt).
# Render processes: one per core, at most two.
SPLIT_RENDER = "path"
SPLIT_SPP = 64
SPLIT_WORKERS = 2
