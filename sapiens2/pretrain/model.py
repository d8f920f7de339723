"""The Sapiens2 pretraining model: student (backbone, MAE decoder, prototype head), EMA teacher
(backbone, head), centring, and the objective L = w_mae L_MAE + w_cl L_CL + w_koleo KoLeo.

The student runs the global views masked (one pass serves both the MAE reconstruction and the
student [CLS] of the global views) and the local views unmasked; the teacher runs the global views
unmasked. With ``w_mae = 0`` nothing is masked and no decoder is built; with ``w_cl = 0`` no head or
teacher is built (the objective ablations).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from sapiens2.pretrain.distill import (
    Centering,
    distillation_loss,
    ema_update,
    sinkhorn_knopp,
    teacher_temperature,
)
from sapiens2.pretrain.encoder import check_backbone, encode, target_patch_size
from sapiens2.pretrain.koleo import koleo_loss
from sapiens2.pretrain.mae import mae_loss, mae_targets
from sapiens2.pretrain.registry import PRETRAIN_MODELS, build


@dataclass
class StudentOutput:
    """What the student pass returns (tensors keep their graph).

    Attributes:
        pred: G*B x N x P pixel predictions (``None`` without MAE).
        cls_global: G*B x C student [CLS] of the global views.
        logits: student head logits of every view, global views first (``None`` without CL).
    """

    pred: Tensor | None
    cls_global: Tensor
    logits: Tensor | None


class Student(nn.Module):
    """The trained part (wrapped in DDP under torchrun): backbone, optional decoder and head."""

    def __init__(self, backbone: nn.Module, decoder: nn.Module | None, head: nn.Module | None):
        super().__init__()
        self.backbone, self.decoder, self.head = backbone, decoder, head

    def forward(self, globals_: Tensor, locals_: Tensor | None, ids_keep: Tensor | None) -> StudentOutput:
        tokens, grid = encode(self.backbone, globals_, ids_keep if self.decoder is not None else None)
        pred = None
        if self.decoder is not None:
            pred = self.decoder(tokens, ids_keep, grid, self.backbone.num_extra_tokens)
        cls_global = tokens[:, 0]
        logits = None
        if self.head is not None:
            cls_all = cls_global
            if locals_ is not None:
                cls_all = torch.cat((cls_global, encode(self.backbone, locals_)[0][:, 0]))
            logits = self.head(cls_all)
        return StudentOutput(pred=pred, cls_global=cls_global, logits=logits)


class Teacher(nn.Module):
    """EMA copy of the student's backbone and head (no gradients)."""

    def __init__(self, backbone: nn.Module, head: nn.Module):
        super().__init__()
        self.backbone, self.head = backbone, head
        self.requires_grad_(False)

    @torch.no_grad()
    def forward(self, globals_: Tensor) -> Tensor:
        return self.head(encode(self.backbone, globals_)[0][:, 0])


@PRETRAIN_MODELS.register_module()
class Sapiens2Pretrainer(nn.Module):
    """Builds the student and teacher and computes the losses.

    Args:
        backbone: backbone config (``type="Sapiens2"``; any arch, the 4K tokenizer included).
        decoder: ``MAEDecoder`` config (``in_dims``/``out_dims`` are filled in).
        head: ``DINOHead`` config (``in_dims`` is filled in).
        masking: mask generator config (``MixedBlockMasking``).
        loss_weights: ``mae``, ``cl`` and ``koleo`` weights (1.0, 0.4, 0.04 in the paper).
        n_global: number of global views (2).
        teacher_momentum: EMA momentum (0.992).
        center_momentum: centring momentum (0.9).
        student_temp: student temperature (0.1).
        teacher_temp: (start, end) teacher temperature ((0.065, 0.07)).
        teacher_temp_warmup_steps: steps over which the teacher temperature goes from start to end.
        norm_eps: epsilon of the per-patch target normalisation.
        teacher_centering: ``"momentum"`` (the paper: subtract a running centre, then softmax) or
            ``"sinkhorn"`` (DINOv2/v3's Sinkhorn-Knopp targets; an option, not the paper's recipe).
    """

    def __init__(self, backbone: dict, decoder: dict, head: dict, masking: dict,
                 loss_weights: dict | None = None, n_global: int = 2, teacher_momentum: float = 0.992,
                 center_momentum: float = 0.9, student_temp: float = 0.1, teacher_temp=(0.065, 0.07),
                 teacher_temp_warmup_steps: int = 1000, norm_eps: float = 1e-6,
                 teacher_centering: str = "momentum"):
        super().__init__()
        if teacher_centering not in ("momentum", "sinkhorn"):
            raise ValueError(f"teacher_centering must be 'momentum' or 'sinkhorn', got {teacher_centering!r}")
        self.teacher_centering = teacher_centering
        weights = {"mae": 1.0, "cl": 0.4, "koleo": 0.04, **(loss_weights or {})}
        unknown = sorted(set(weights) - {"mae", "cl", "koleo"})
        if unknown:
            raise ValueError(f"loss_weights: unknown terms {unknown}; known: mae, cl, koleo")
        if not any(v > 0 for v in weights.values()) or any(v < 0 for v in weights.values()):
            raise ValueError(f"loss_weights must be >= 0 with at least one > 0, got {weights}")
        self.weights = {k: float(v) for k, v in weights.items()}
        self.n_global = int(n_global)
        if self.weights["cl"] > 0 and self.n_global < 2:
            raise ValueError("the cross-view distillation needs n_global >= 2")
        student_backbone = build(backbone)
        check_backbone(student_backbone, f"model.backbone ({backbone.get('type')})")
        dims = int(student_backbone.embed_dims)
        self.patch = target_patch_size(student_backbone)
        dec = None
        if self.weights["mae"]:
            dec = build(decoder, in_dims=dims, out_dims=self.patch * self.patch * 3)
        hd = build(head, in_dims=dims) if self.weights["cl"] else None
        self.student = Student(student_backbone, dec, hd)
        self.teacher = Teacher(copy.deepcopy(student_backbone), copy.deepcopy(hd)) if hd is not None else None
        self.centering = Centering(hd.out_dim, center_momentum) if hd is not None else None
        self.masking = build(masking) if self.weights["mae"] else None
        self.teacher_momentum = float(teacher_momentum)
        self.student_temp = float(student_temp)
        self.teacher_temp = (float(teacher_temp[0]), float(teacher_temp[1]))
        self.teacher_temp_warmup_steps = int(teacher_temp_warmup_steps)
        self.norm_eps = float(norm_eps)

    def losses(self, out: StudentOutput, batch: dict, step: int) -> dict[str, Tensor]:
        """The weighted objective and its terms; updates the centre (teacher logits of this step).

        Args:
            out: the student pass on ``batch``.
            batch: a batch of :class:`~sapiens2.pretrain.data.StepBatches`.
            step: 0-based step (for the teacher temperature).

        Returns:
            ``{"loss", "mae", "cl", "koleo"}`` (terms with weight 0 are absent).
        """
        terms: dict[str, Tensor] = {}
        if out.pred is not None:
            target = mae_targets(batch["globals"], self.patch, self.norm_eps)
            terms["mae"] = mae_loss(out.pred, target, batch["mask"].to(out.pred.device))
        if self.teacher is not None:
            t_logits = self.teacher(batch["globals"]).float()
            temp = teacher_temperature(step, *self.teacher_temp, self.teacher_temp_warmup_steps)
            if self.teacher_centering == "sinkhorn":
                t_probs = sinkhorn_knopp(t_logits, temp).chunk(self.n_global)
            else:
                t_probs = self.centering.probs(t_logits, temp).chunk(self.n_global)
            per_view = t_logits.shape[0] // self.n_global
            s_logits = out.logits.split(per_view)
            terms["cl"] = distillation_loss(list(s_logits), list(t_probs), self.student_temp)
            if self.teacher_centering == "momentum":
                self.centering.update(t_logits)
        if self.weights["koleo"] > 0:
            terms["koleo"] = torch.stack([koleo_loss(c) for c in out.cls_global.chunk(self.n_global)]).mean()
        loss = sum(self.weights[k] * v for k, v in terms.items())
        return {"loss": loss, **terms}

    @torch.no_grad()
    def update_teacher(self) -> None:
        """EMA step of the teacher towards the student (after the optimiser step)."""
        if self.teacher is None:
            return
        ema_update(self.teacher.backbone, self.student.backbone, self.teacher_momentum)
        ema_update(self.teacher.head, self.student.head, self.teacher_momentum)

    def export_backbone(self, which: str = "teacher") -> nn.Module:
        """The backbone to ship: the EMA teacher's (when there is one) or the student's."""
        if which not in ("teacher", "student"):
            raise ValueError(f"export must be 'teacher' or 'student', got {which!r}")
        if which == "teacher" and self.teacher is not None:
            return self.teacher.backbone
        return self.student.backbone
