"""What a read-out is: a registered kind, named by ``TaskSettings.decoder``, that builds a task's decoder.

A read-out module subclasses :class:`ProbeReadout` and registers it with :func:`register_readout`
(``PROBE_READOUTS``, :mod:`benchmarks.probe.registry`). The class declares the protocol groups it
reads, so a task's protocol id covers exactly them, and whether it trains anything; it builds the
task's :class:`~benchmarks.probe.readout.decoders.ProbeDecoder` and the notes of its records. The
closed-form fit every read-out starts from (:mod:`benchmarks.probe.readout.shortcut`) and the output
sizes (:class:`~benchmarks.probe.readout.shortcut.ReadoutGeometry`) are shared, not per read-out.

Example:
    >>> from benchmarks.probe.readout.base import get_readout, readout_names
    >>> readout_names()
    ('linear', 'pixelshuffle')
    >>> get_readout("pixelshuffle").protocol_groups, get_readout("linear").trains
    (('readout', 'body'), False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from torch import nn

from benchmarks.probe.readout.decoders import ProbeDecoder
from benchmarks.probe.registry import PROBE_READOUTS
from sapiens2.errors import UnknownNameError

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView


@dataclass(frozen=True)
class DecoderShape:
    """The sizes a decoder is built for.

    Attributes:
        in_channels: channels of the assembled features.
        out_channels: predicted maps.
        patch_size: stride of the features.
        output_stride: stride of the predicted maps
            (:class:`~benchmarks.probe.readout.shortcut.ReadoutGeometry`).
    """

    in_channels: int
    out_channels: int
    patch_size: int
    output_stride: int


class ProbeReadout:
    """A read-out kind (subclass it, set the class attributes, register it with :func:`register_readout`).

    Attributes:
        name: the value of ``TaskSettings.decoder`` that picks it.
        description: what the records' ``protocol.description`` says of it.
        protocol_groups: the protocol's groups it reads besides the shared ones
            (:data:`benchmarks.probe.protocol.READOUT_GROUPS`); a task's protocol id covers them.
        trains: whether it has a trained part (then a task needs a loss, its train split is spilled
            to disk and each seed trains its own decoder), and its id covers the task's
            ``BODY_ONLY_FIELDS`` (the loss and its weights).
        needs_shortcut: whether it is the closed-form fit alone, so it needs ``shortcut="ridge"``.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    protocol_groups: ClassVar[tuple[str, ...]] = ()
    trains: ClassVar[bool] = False
    needs_shortcut: ClassVar[bool] = False

    @classmethod
    def build_layers(cls, shape: DecoderShape,
                     protocol: ProtocolView) -> tuple[nn.Module | None, nn.Module | None]:
        """(body, head) of the trained part, or (None, None) when nothing is trained."""
        return None, None

    @classmethod
    def build_decoder(cls, shape: DecoderShape, protocol: ProtocolView,
                      zero_init_output: bool = False) -> ProbeDecoder:
        """The task's decoder (a fitted shortcut is attached by the caller as ``decoder.shortcut``).

        Args:
            shape: the sizes it maps between.
            protocol: the protocol (its groups in :attr:`protocol_groups` are read).
            zero_init_output: start the trained part's prediction at zero (a residual on the shortcut).
        """
        body, head = cls.build_layers(shape, protocol)
        if zero_init_output and head is not None:
            for m in head.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.zeros_(m.weight)
                    nn.init.zeros_(m.bias)
        return ProbeDecoder(shape.output_stride, body, head)

    @classmethod
    def notes(cls, info: dict) -> str:
        """What the read-out did, for a record's ``notes`` (``info``: the decoder's training info)."""
        return (f"decoder trained from iteration {info['resumed_from']}; "
                f"final train loss {info['final_loss']:.5g}")


def register_readout(cls: type[ProbeReadout]) -> type[ProbeReadout]:
    """Class decorator: register a :class:`ProbeReadout` subclass under its ``name``.

    Raises:
        ValueError: no name, or not a ``ProbeReadout`` subclass.
        KeyError: a read-out of that name is registered already (mmengine's message).
    """
    if not (isinstance(cls, type) and issubclass(cls, ProbeReadout)) or not cls.name:
        raise ValueError(f"read-out {cls!r}: expected a named ProbeReadout subclass")
    PROBE_READOUTS.register_module(name=cls.name, module=cls)
    return cls


def unregister_readout(name: str) -> None:
    """Remove a read-out from the registry (a test that registers a toy one cleans up with this)."""
    PROBE_READOUTS.module_dict.pop(name, None)


def readout_names() -> tuple[str, ...]:
    """Names of the registered read-outs (the shipped ones first, then plug-ins in registration order)."""
    PROBE_READOUTS.import_from_location()
    return tuple(PROBE_READOUTS.module_dict)


def get_readout(name: str) -> type[ProbeReadout]:
    """The registered read-out ``name``.

    Raises:
        UnknownNameError: no read-out of that name is registered.
    """
    names = readout_names()
    if name not in names:
        raise UnknownNameError("read-out (tasks.<task>.decoder)", name, names)
    return PROBE_READOUTS.module_dict[name]
