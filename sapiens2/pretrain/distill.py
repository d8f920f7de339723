"""DINOv3-style [CLS] self-distillation: prototype head, centring, teacher temperature schedule,
the cross-view cross-entropy and the EMA teacher update.

Example:
    >>> teacher_temperature(0, 0.065, 0.07, 10), teacher_temperature(10, 0.065, 0.07, 10)
    (0.065, 0.07)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sapiens2.distributed import all_reduce_, get_world_size
from sapiens2.models.backbones.common import trunc_normal_init
from sapiens2.pretrain.registry import PRETRAIN_MODELS


@PRETRAIN_MODELS.register_module()
class DINOHead(nn.Module):
    """MLP projection, L2 normalisation, then cosine similarity to ``out_dim`` learned prototypes.

    The prototypes are normalised row-wise in the forward pass (the weight-normalised last layer of
    DINO with its gain fixed at 1), so the logits are cosines in [-1, 1].

    Args:
        in_dims: backbone width (filled in by the pretrainer).
        out_dim: number of prototypes K.
        hidden_dim: MLP hidden width.
        bottleneck_dim: width of the normalised embedding.
        num_layers: MLP layers (>= 1).
    """

    def __init__(self, in_dims: int, out_dim: int = 65536, hidden_dim: int = 2048, bottleneck_dim: int = 256,
                 num_layers: int = 3):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"DINOHead: num_layers must be >= 1, got {num_layers}")
        dims = [in_dims] + [hidden_dim] * (num_layers - 1) + [bottleneck_dim]
        layers: list[nn.Module] = []
        for i in range(num_layers):
            layers.append(nn.Linear(dims[i], dims[i + 1]))
            if i < num_layers - 1:
                layers.append(nn.GELU())
        self.mlp = nn.Sequential(*layers)
        self.prototypes = nn.Parameter(torch.empty(out_dim, bottleneck_dim))
        self.apply(trunc_normal_init)
        nn.init.trunc_normal_(self.prototypes, std=0.02)
        self.out_dim = out_dim

    def forward(self, x: Tensor) -> Tensor:
        """B x in_dims -> B x K logits (cosines)."""
        z = F.normalize(self.mlp(x), dim=-1, eps=1e-6)
        return z @ F.normalize(self.prototypes, dim=-1, eps=1e-6).t().to(z.dtype)


class Centering(nn.Module):
    """Running centre of the teacher logits, subtracted before the teacher softmax.

    Args:
        out_dim: number of prototypes K.
        momentum: ``center <- momentum * center + (1 - momentum) * batch mean`` (0.9).
    """

    def __init__(self, out_dim: int, momentum: float = 0.9):
        super().__init__()
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"centre momentum must be in [0, 1], got {momentum}")
        self.momentum = float(momentum)
        self.register_buffer("center", torch.zeros(1, out_dim))

    def probs(self, teacher_logits: Tensor, temperature: float) -> Tensor:
        """``softmax((logits - center) / temperature)`` in float32."""
        return F.softmax((teacher_logits.float() - self.center) / temperature, dim=-1)

    @torch.no_grad()
    def update(self, teacher_logits: Tensor) -> None:
        """Move the centre towards the batch mean (averaged over every rank under DDP)."""
        total = teacher_logits.float().sum(dim=0, keepdim=True)
        all_reduce_(total)
        batch_mean = total / (teacher_logits.shape[0] * get_world_size())
        self.center.mul_(self.momentum).add_(batch_mean, alpha=1.0 - self.momentum)


@torch.no_grad()
def sinkhorn_knopp(teacher_logits: Tensor, temperature: float, iterations: int = 3) -> Tensor:
    """Teacher targets by Sinkhorn-Knopp (DINOv2/v3's alternative to centring): ``exp(logits / T)``
    rescaled alternately so that every prototype gets the same total mass over the batch (all ranks)
    and every image a distribution.

    Args:
        teacher_logits: B x K teacher logits of this rank.
        temperature: teacher temperature.
        iterations: alternating normalisations (3, as DINOv2).

    Returns:
        B x K float32 targets; each row sums to 1.

    Example:
        >>> q = sinkhorn_knopp(torch.randn(8, 4), 0.1)
        >>> torch.allclose(q.sum(1), torch.ones(8)), q.shape
        (True, torch.Size([8, 4]))
    """
    logits = teacher_logits.float() / temperature
    peak = logits.max().reshape(1)
    all_reduce_(peak, "max")  # one shift on every rank keeps the ranks' scales equal
    q = torch.exp(logits - peak).t()  # K x B
    k, b = q.shape[0], q.shape[1] * get_world_size()
    total = q.sum().reshape(1)
    all_reduce_(total)
    q /= total
    for _ in range(iterations):
        rows = q.sum(dim=1, keepdim=True)
        all_reduce_(rows)
        q /= rows * k
        q /= q.sum(dim=0, keepdim=True) * b
    return (q * b).t()


def teacher_temperature(step: int, start: float, end: float, warmup_steps: int) -> float:
    """Teacher temperature at ``step``: linear from ``start`` to ``end`` over ``warmup_steps``, then
    ``end``."""
    if warmup_steps <= 0 or step >= warmup_steps:
        return float(end)
    return float(start + (end - start) * step / warmup_steps)


def distillation_pairs(n_global: int, n_views: int) -> list[tuple[int, int]]:
    """(teacher view, student view) pairs: every global teacher view with every other view.

    Views ``0 .. n_global-1`` are global and the rest local; the teacher sees the global views
    only, so pairs are cross-view global<->global and global<->local; a view is never paired with
    itself and local<->local pairs do not exist.

    Example:
        >>> distillation_pairs(2, 4)
        [(0, 1), (0, 2), (0, 3), (1, 0), (1, 2), (1, 3)]
    """
    return [(t, s) for t in range(n_global) for s in range(n_views) if s != t]


def distillation_loss(student_logits: list[Tensor], teacher_probs: list[Tensor],
                      student_temp: float) -> Tensor:
    """Mean over the pairs of :func:`distillation_pairs` of the teacher-to-student cross-entropy.

    Args:
        student_logits: one B x K tensor per view (global views first).
        teacher_probs: one B x K tensor per global view (already centred and sharpened).
        student_temp: student softmax temperature (0.1).

    Returns:
        Scalar: mean over pairs and images of ``-sum_k p_t log softmax(s / T_s)``.
    """
    log_p = [F.log_softmax(s.float() / student_temp, dim=-1) for s in student_logits]
    terms = [-(teacher_probs[t] * log_p[s]).sum(dim=-1).mean()
             for t, s in distillation_pairs(len(teacher_probs), len(student_logits))]
    if not terms:
        raise ValueError("distillation needs at least two views")
    return torch.stack(terms).mean()


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """``teacher <- momentum * teacher + (1 - momentum) * student``, parameter by parameter.

    Raises:
        KeyError: the two modules do not have the same parameter names.
    """
    t_params = dict(teacher.named_parameters())
    s_params = dict(student.named_parameters())
    if t_params.keys() != s_params.keys():
        diff = sorted(set(t_params) ^ set(s_params))[:5]
        raise KeyError(f"EMA: teacher and student parameters differ (e.g. {diff})")
    for name, t in t_params.items():
        t.mul_(momentum).add_(s_params[name].detach().to(t.dtype), alpha=1.0 - momentum)
