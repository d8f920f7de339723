"""Pieces shared by the Sapiens2 and Sapiens (v1) backbones: arch tables, patch embedding,
input-size validation, output formatting and stage freezing."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from sapiens2.models.variants import arch_table, variants

OUT_TYPES = ("raw", "featmap", "cls_token")

# The arch tables and constructors of the official variants, derived from the one variant table
# (sapiens2.models.variants; the 1B-4K model is ``sapiens2_1b`` with the window tokenizer).
SAPIENS2_ARCHS: dict[str, dict[str, int]] = arch_table("sapiens2")
SAPIENS_V1_ARCHS: dict[str, dict[str, int]] = arch_table("sapiens")
OFFICIAL_BACKBONES: dict[str, dict] = {v.name: v.backbone_config() for v in variants(official=True)}


def list_archs(family: str | None = None) -> list[str]:
    """Names of the registered archs.

    Args:
        family: ``'sapiens2'``, ``'sapiens'`` (v1) or ``None`` for both.

    Returns:
        Sorted arch names.
    """
    if family not in (None, "sapiens2", "sapiens"):
        raise ValueError(f"unknown backbone family {family!r}; expected 'sapiens2', 'sapiens' or None")
    names = []
    if family in (None, "sapiens2"):
        names += list(SAPIENS2_ARCHS)
    if family in (None, "sapiens"):
        names += list(SAPIENS_V1_ARCHS)
    return sorted(names)


def arch_settings(name: str) -> dict[str, int]:
    """Hyper-parameters of a registered arch (a copy).

    Args:
        name: arch name such as ``'sapiens2_0.4b'`` or ``'sapiens_1b'`` (case-insensitive).

    Returns:
        Dict with ``embed_dims``, ``num_layers``, ``num_heads``, ``feedforward_channels`` (and
        ``num_tokenizer_layers`` for Sapiens2).

    Raises:
        ValueError: unknown name; the message lists the known ones.
    """
    key = str(name).lower()
    table = {**SAPIENS2_ARCHS, **SAPIENS_V1_ARCHS}
    if key not in table:
        raise ValueError(f"unknown backbone arch {name!r}; known archs: {', '.join(list_archs())}")
    return dict(table[key])


def resolve_arch(arch: str | dict, table: dict[str, dict], required: Sequence[str], family: str) -> dict:
    """Turn an arch name or settings dict into a validated settings dict.

    Args:
        arch: a name from ``table`` or a dict of settings.
        table: the family's arch table.
        required: keys the settings must have.
        family: class name used in error messages.

    Returns:
        A new settings dict.
    """
    if isinstance(arch, str):
        key = arch.lower()
        if key not in table:
            raise ValueError(f"unknown {family} arch {arch!r}; known archs: {', '.join(sorted(table))}")
        return dict(table[key])
    if not isinstance(arch, dict):
        raise TypeError(f"{family} arch must be a name or a settings dict, got {type(arch).__name__}")
    missing = [k for k in required if k not in arch]
    if missing:
        raise ValueError(f"{family} arch settings lack {missing}; required keys: {list(required)}")
    settings = dict(arch)
    for k in required:
        if not isinstance(settings[k], int) or settings[k] <= 0:
            raise ValueError(f"{family} arch setting {k!r} must be a positive int, got {settings[k]!r}")
    if settings["embed_dims"] % settings["num_heads"]:
        raise ValueError(
            f"{family}: embed_dims {settings['embed_dims']} is not divisible by num_heads "
            f"{settings['num_heads']}"
        )
    return settings


def to_2tuple(value) -> tuple[int, int]:
    """``v -> (v, v)``; a pair stays a pair."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        value = tuple(value)
        if len(value) != 2:
            raise ValueError(f"expected a scalar or a pair, got {value!r}")
        return value
    return (value, value)


def normalize_out_indices(out_indices, num_layers: int) -> list[int]:
    """Map (possibly negative) block indices to ``0 .. num_layers - 1``.

    Raises:
        ValueError: an index outside ``-num_layers .. num_layers - 1``.
    """
    if isinstance(out_indices, int):
        out_indices = [out_indices]
    if len(out_indices) == 0:
        raise ValueError("out_indices is empty; give at least one block index")
    result = []
    for index in out_indices:
        i = int(index)
        j = i + num_layers if i < 0 else i
        if not 0 <= j < num_layers:
            raise ValueError(
                f"out index {i} is outside the {num_layers} blocks (valid: {-num_layers}..{num_layers - 1})"
            )
        result.append(j)
    return result


def check_input_size(h: int, w: int, multiple: int, what: str) -> None:
    """Raise a ValueError naming the nearest valid sizes when ``h`` or ``w`` is not a multiple.

    Args:
        h: input height in pixels.
        w: input width in pixels.
        multiple: the size both sides must be a multiple of.
        what: why the multiple is needed (for the message).
    """
    if h > 0 and w > 0 and h % multiple == 0 and w % multiple == 0:
        return

    def nearest(v: int) -> str:
        lo, hi = (v // multiple) * multiple, -(-v // multiple) * multiple
        options = sorted({s for s in (lo, hi) if s > 0}) or [multiple]
        return " or ".join(str(s) for s in options)

    raise ValueError(
        f"input size {h}x{w} (HxW) is not valid: both sides must be positive multiples of {multiple} "
        f"({what}); nearest valid heights: {nearest(h)}; nearest valid widths: {nearest(w)}"
    )


class PatchEmbed(nn.Module):
    """Non-overlapping patch projection (``projection`` conv, as in the official checkpoints).

    Args:
        in_channels: image channels.
        embed_dims: token width.
        patch_size: kernel and stride.
        padding: conv padding (0 in Sapiens2).
    """

    def __init__(self, in_channels: int, embed_dims: int, patch_size: int, padding: int = 0):
        super().__init__()
        self.projection = nn.Conv2d(
            in_channels, embed_dims, kernel_size=patch_size, stride=patch_size, padding=padding, bias=True
        )

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        x = self.projection(x)
        hw = (x.shape[2], x.shape[3])
        return x.flatten(2).transpose(1, 2), hw


def check_image_batch(x: Tensor, in_channels: int) -> None:
    """Reject anything but a B x C x H x W floating batch with the right channels."""
    if not isinstance(x, Tensor):
        raise TypeError(f"backbone input must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4 or x.shape[1] != in_channels:
        raise ValueError(
            f"backbone input must be B x {in_channels} x H x W, got tensor of shape {tuple(x.shape)}"
        )


def format_tokens(x: Tensor, out_type: str, hw: tuple[int, int], num_prefix: int) -> Tensor:
    """Turn the B x (prefix + N) x C sequence into the requested output type."""
    if out_type == "raw":
        return x
    if out_type == "cls_token":
        return x[:, 0]
    b, _, c = x.shape
    return x[:, num_prefix:].reshape(b, hw[0], hw[1], c).permute(0, 3, 1, 2)


def resolve_intermediate_indices(indices, num_layers: int) -> list[int]:
    """``int n`` -> the last ``n`` blocks; a sequence -> those blocks (negatives allowed)."""
    if isinstance(indices, int):
        if not 1 <= indices <= num_layers:
            raise ValueError(f"asked for the last {indices} blocks of {num_layers}")
        return list(range(num_layers - indices, num_layers))
    return normalize_out_indices(list(indices), num_layers)


def freeze(module: nn.Module | nn.Parameter | None) -> None:
    """Stop gradients of a module or parameter and put a module in eval mode."""
    if module is None:
        return
    if isinstance(module, nn.Parameter):
        module.requires_grad_(False)
        return
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)


def check_out_type(out_type: str) -> str:
    if out_type not in OUT_TYPES:
        raise ValueError(f"unsupported out_type {out_type!r}; choose from {OUT_TYPES}")
    return out_type


def trunc_normal_init(module: nn.Module) -> None:
    """Initialisation of the official code: truncated normal (std 0.02) for linear and conv weights,
    zero biases, unit norm weights."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
        if module.weight is not None:
            nn.init.ones_(module.weight)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


class ViTBackboneBase(nn.Module):
    """The uniform backbone contract shared by Sapiens2 and Sapiens (v1): output formatting,
    probing intermediates and stage freezing.

    Subclasses set ``embed_dims``, ``num_layers``, ``in_channels``, ``out_type``, ``out_indices``,
    ``num_extra_tokens``, ``frozen_stages``, ``cls_token`` (or ``None``) and ``ln1`` (the final norm
    or ``None``), and implement :meth:`valid_input_size`, :meth:`_embed_tokens`,
    :meth:`_block_list` and :meth:`_stem`.
    """

    def valid_input_size(self, h: int, w: int) -> tuple[int, int]:
        raise NotImplementedError

    def _embed_tokens(self, x: Tensor) -> tuple[Tensor, tuple[int, int], dict]:
        """Turn a checked image batch into ``(tokens, (h, w), keyword args for every block)``."""
        raise NotImplementedError

    def _block_list(self) -> Sequence[nn.Module]:
        raise NotImplementedError

    @property
    def fast_attention(self) -> bool:
        """SDPA (True) or the eager attention path (False) in every attention of the backbone."""
        return self._fast_attention

    @fast_attention.setter
    def fast_attention(self, value: bool) -> None:
        self._fast_attention = bool(value)
        for m in self.modules():  # the blocks' attentions and any in the stem (Sapiens2's tokenizer)
            if m is not self and hasattr(m, "fast"):
                m.fast = self._fast_attention

    def _stem(self) -> list:
        """Modules and parameters before the blocks, frozen with any ``frozen_stages > 0``; its
        parameters are also the ones :meth:`init_weights` initialises (in this order)."""
        raise NotImplementedError

    def _init_outputs(self, family: str, out_type: str, out_indices, with_cls_token: bool,
                      frozen_stages: int, init_cfg: dict | None) -> None:
        """Validate and store the output and freezing options (``num_layers`` must be set)."""
        self.out_type = check_out_type(out_type)
        self.out_indices = normalize_out_indices(out_indices, self.num_layers)
        self.with_cls_token = with_cls_token
        if not with_cls_token and out_type == "cls_token":
            raise ValueError(f"{family}: with_cls_token must be True when out_type='cls_token'")
        self.frozen_stages = frozen_stages
        self.init_cfg = init_cfg

    def init_weights(self) -> None:
        """Random initialisation of the official code (truncated normal, std 0.02)."""
        for p in self._stem():
            if isinstance(p, nn.Parameter):
                nn.init.trunc_normal_(p, std=0.02)
        self.apply(trunc_normal_init)

    def _finish_init(self) -> None:
        """Initialise the weights and freeze the requested stages (end of ``__init__``)."""
        self.init_weights()
        self._frozen: list[nn.Module] = []
        if self.frozen_stages > 0:
            self._freeze_stages()

    def _freeze_stages(self) -> None:
        if self.frozen_stages > self.num_layers:
            raise ValueError(f"frozen_stages {self.frozen_stages} exceeds the {self.num_layers} blocks")
        frozen = self._stem() + list(self._block_list()[: self.frozen_stages])
        if self.frozen_stages == self.num_layers:
            frozen.append(self.ln1)
        for m in frozen:
            freeze(m)
        self._frozen = [m for m in frozen if isinstance(m, nn.Module)]

    def train(self, mode: bool = True):
        super().train(mode)
        if mode:
            for m in self._frozen:
                m.eval()
        return self

    def _run_blocks(self, x: Tensor, indices: list[int]):
        """Yield ``(index, tokens, hw)`` after each requested block (final norm on the last one)."""
        check_image_batch(x, self.in_channels)
        self.valid_input_size(x.shape[2], x.shape[3])
        tokens, hw, block_kwargs = self._embed_tokens(x)
        last_needed, wanted = max(indices), set(indices)
        for i, blk in enumerate(self._block_list()):
            tokens = blk(tokens, **block_kwargs)
            if i == self.num_layers - 1 and self.ln1 is not None:
                tokens = self.ln1(tokens)
            if i in wanted:
                yield i, tokens, hw
            if i == last_needed:
                break

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        """Run the backbone.

        Args:
            x: images, B x C x H x W (see :meth:`valid_input_size`).

        Returns:
            One output per out index, formatted by :attr:`out_type`.
        """
        check_out_type(self.out_type)
        if self.out_type == "cls_token" and self.cls_token is None:
            raise ValueError("out_type 'cls_token' needs with_cls_token=True")
        return tuple(
            format_tokens(t, self.out_type, hw, self.num_extra_tokens)
            for _, t, hw in self._run_blocks(x, self.out_indices)
        )

    def forward_intermediates(self, x: Tensor, indices=None) -> tuple[list[Tensor], list[Tensor]]:
        """Feature maps and CLS tokens after the chosen blocks (for probing).

        Args:
            x: images, B x C x H x W.
            indices: block indices (negatives count from the end) or an int ``n`` for the last
                ``n`` blocks; ``None`` uses :attr:`out_indices`.

        Returns:
            ``(featmaps, cls_tokens)``: lists of B x C x h x w and B x C tensors in the order of
            ``indices`` (``cls_tokens`` is empty without a CLS token). The last block's output
            has the final norm applied, as in :meth:`forward`.
        """
        order = (
            self.out_indices if indices is None else resolve_intermediate_indices(indices, self.num_layers)
        )
        found = {i: (t, hw) for i, t, hw in self._run_blocks(x, order)}
        feats = [format_tokens(found[i][0], "featmap", found[i][1], self.num_extra_tokens) for i in order]
        cls = [found[i][0][:, 0] for i in order] if self.cls_token is not None else []
        return feats, cls
