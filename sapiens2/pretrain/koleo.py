"""KoLeo regulariser (Kozachenko-Leonenko differential-entropy estimate) on [CLS] features.

Example:
    >>> import torch
    >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> round(float(koleo_loss(x)), 4)  # nearest-neighbour distances sqrt(2), sqrt(2), sqrt(2)
    -0.3466
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def koleo_loss(features: Tensor, eps: float = 1e-8) -> Tensor:
    """``-mean_i log(min_{j != i} ||x_i - x_j||)`` of the L2-normalised features.

    The nearest neighbour is chosen without gradient (largest cosine); the distance to it carries
    the gradient.

    Args:
        features: B x C, B >= 2.
        eps: added to the distance inside the log.

    Returns:
        Scalar loss.
    """
    if features.dim() != 2 or features.shape[0] < 2:
        raise ValueError(f"KoLeo needs a B x C batch with B >= 2, got shape {tuple(features.shape)}")
    x = F.normalize(features.float(), dim=-1, eps=eps)
    with torch.no_grad():
        sim = x @ x.t()
        sim.fill_diagonal_(-float("inf"))
        nearest = sim.argmax(dim=1)
    dist = (x - x[nearest]).norm(dim=-1)
    return -torch.log(dist + eps).mean()
