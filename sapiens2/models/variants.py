"""The one table of named Sapiens model variants (like timm's ``default_cfgs``).

Which Sapiens2 and Sapiens (v1) backbones exist is answered here and only here: the official
variants come from the shipped reference data (``sapiens2/data/official_archs.json``: arch
hyper-parameters, constructor, exact parameter count, model-card values, copied from the official
code), the test-sized ones (``*_tiny``) are added below. Derived from this table: the arch tables
and ``OFFICIAL_BACKBONES`` of ``sapiens2.models.backbones`` (so ``build_model(name)``), the probe's
backbone presets (``--backbone``, ``--list-backbones``) and its tiny archs, and the model card
(``sapiens2-bench model-card``: the official Sapiens2 variants).

Example:
    >>> v = get_variant("sapiens2_1b_4k")
    >>> v.family, v.arch, v.constructor["img_size"], v.probe
    ('sapiens2', 'sapiens2_1b', (4096, 3072), False)
    >>> [v.name for v in variants(family="sapiens", official=True)]
    ['sapiens_0.3b', 'sapiens_0.6b', 'sapiens_1b', 'sapiens_2b']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

from sapiens2.errors import UnknownNameError
from sapiens2.reference import official_archs

FAMILIES = {"sapiens2": "Sapiens2", "sapiens": "Sapiens"}  # family -> registered MODELS type
_GROUPS = {"sapiens2": "archs", "sapiens": "sapiens_v1_archs"}  # family -> group of official_archs.json


@dataclass(frozen=True)
class ModelVariant:
    """One named backbone variant.

    Attributes:
        name: the variant's name (``sapiens2_0.4b``, ``sapiens2_1b_4k``, ``sapiens_tiny``).
        family: ``"sapiens2"`` or ``"sapiens"`` (v1); its class is ``FAMILIES[family]``.
        arch: the name of its arch hyper-parameters (the 4K model shares ``sapiens2_1b``'s).
        settings: the arch hyper-parameters (``embed_dims``, ``num_layers``, ``num_heads``, ...).
        constructor: keyword arguments of the backbone class besides ``arch`` (``img_size`` as a
            tuple, ``use_tokenizer`` for the 4K model); ``patch_size`` is the class default (16).
        official: released by the authors (False: a test-sized variant, no weights exist).
        probe: a ``--backbone`` preset of the probe.
        num_params: exact parameter count at ``constructor`` (official variants; None otherwise).
        params_b_card, tflops_card: the official model card's printed values (None where none).
    """

    name: str
    family: str
    arch: str
    settings: Mapping[str, int]
    constructor: Mapping[str, object] = field(default_factory=dict)
    official: bool = True
    probe: bool = True
    num_params: int | None = None
    params_b_card: float | None = None
    tflops_card: float | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"variant {self.name!r}: family {self.family!r} not in {sorted(FAMILIES)}")
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "constructor", MappingProxyType(dict(self.constructor)))

    def backbone_config(self) -> dict:
        """The ``MODELS`` config of the variant (type, arch name, constructor arguments)."""
        return dict(type=FAMILIES[self.family], arch=self.arch, **self.constructor)


# Not offered to the probe: the 4K model (its window tokenizer is for 4096x3072 inputs, the probe's
# crops are 256x192).
_NOT_PROBED = ("sapiens2_1b_4k",)

# Test-sized variants (not official, no weights): smoke runs and unit tests of the probe.
_TINY = (
    ModelVariant("sapiens2_tiny", "sapiens2", "sapiens2_tiny", dict(
        embed_dims=64, num_layers=4, num_heads=4, feedforward_channels=128, num_tokenizer_layers=1),
        official=False),
    ModelVariant("sapiens_tiny", "sapiens", "sapiens_tiny", dict(
        embed_dims=64, num_layers=4, num_heads=4, feedforward_channels=128), official=False),
)


@cache
def _table() -> dict[str, ModelVariant]:
    ref = official_archs()
    table: dict[str, ModelVariant] = {}
    for family, group in _GROUPS.items():
        for name, entry in ref[group].items():
            ctor = {k: tuple(v) if isinstance(v, list) else v for k, v in entry["constructor"].items()
                    if k not in ("arch", "patch_size")}
            arch = entry["constructor"].get("arch", name)
            table[name] = ModelVariant(
                name, family, arch, entry["settings"], ctor, official=True, probe=name not in _NOT_PROBED,
                num_params=entry.get("num_params"), params_b_card=entry.get("params_b_card"),
                tflops_card=entry.get("tflops_card"),
            )
    for v in _TINY:
        table[v.name] = v
    return table


def variants(family: str | None = None, *, official: bool | None = None,
             probe: bool | None = None) -> tuple[ModelVariant, ...]:
    """The variants of the table (official ones in reference order, then the test-sized ones).

    Args:
        family: only this family (``"sapiens2"`` or ``"sapiens"``); None: both.
        official: only official (True) or only test-sized (False) variants; None: both.
        probe: only probe presets (True) or only the others (False); None: both.
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown backbone family {family!r}; expected one of {sorted(FAMILIES)} or None")
    return tuple(v for v in _table().values()
                 if (family is None or v.family == family) and (official is None or v.official == official)
                 and (probe is None or v.probe == probe))


def get_variant(name: str) -> ModelVariant:
    """The variant called ``name`` (case-insensitive).

    Raises:
        sapiens2.errors.UnknownNameError: no such variant (the message lists them).
    """
    table = _table()
    key = str(name).lower()
    if key not in table:
        raise UnknownNameError("model variant", name, list(table))
    return table[key]


def arch_table(family: str, official: bool = True) -> dict[str, dict[str, int]]:
    """``{arch name: hyper-parameters}`` of a family's variants that have an arch of their own."""
    return {v.arch: dict(v.settings) for v in variants(family, official=official) if v.arch == v.name}
