"""The input normalisation of every pipeline: the ImageNet RGB mean and std, in 0-255 units.

The official pipelines normalise with these; :mod:`sapiens2.inference` applies them and
:func:`sapiens2.models.hf_config.hf_preprocessor_config` writes them (over 255) into a converted model's
``preprocessor_config.json``.

Example:
    >>> [round(m / 255, 3) for m in MEAN]
    [0.485, 0.456, 0.406]
"""

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
