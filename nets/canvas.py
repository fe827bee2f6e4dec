"""The masked canvas: positions of every board size in one (B, C, S, S) batch (issue 33).

Each position of height H and width W (H, W <= S, default S = 12) lies in the canvas's
rows 0..H-1 and columns 0..W-1 (row 0 at the bottom, as in the per-size planes), zeros
elsewhere, with a board mask (B, 1, S, S): 1 on the H x W rectangle — the forbidden cell
included, since it is on the board — and 0 off it. :class:`CanvasNet` computes the same
function as :class:`nets.model.Net` with the same weights (KataGo's ``NormMask`` and
``KataGPool`` design):

* every 3x3 convolution reads zeros off the board (its input is multiplied by the mask),
  which is what the per-size net's zero padding gives it;
* global pooling is masked: the mean over the board's cells, the size scale
  ``(sqrt(H*W) - 10) / 10`` per sample, the max over the board's post-ReLU values;
* batch norm in training uses statistics over on-board cells only, per group: a batch of
  G equal consecutive groups (the trainer's one group per board size) normalises each
  group by its own statistics and updates the running statistics from the groups in order,
  unbiased variance, as G per-size passes would. So a padded batch of several sizes trains
  exactly as the per-size net does size by size (the trainer's per-size step; issue 33's
  first version pooled the statistics over all sizes: docs/ABLATIONS.md); in eval mode it
  is the same affine map.

Off-board cells of the residual stream are zeroed after every block, so nothing but
on-board values is ever read. Outputs: policy logits (B, S, S), of which the board's
cells are the per-size net's (the rest is meaningless), and value logits (B, 3) ((B, 4)
with the moves-left head: its 4th column in plies / (H * W) of each position's own board);
built with the training-only ownership head, also its logits (B, 3, S, S), the per-size
head's on the board's cells.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nets.model import Net, OwnershipHead

__all__ = ["CANVAS", "CanvasNet", "board_mask", "canvas_batch", "masked_batch_norm", "masked_global_pool",
           "to_canvas"]

CANVAS = 12  # the largest side c4fast supports


def board_mask(sizes, side: int = CANVAS, device=None, width: int | None = None) -> torch.Tensor:
    """(B, 1, side, width) float32 (width defaults to side): 1 on each position's H x W
    rectangle (rows and columns from 0), 0 elsewhere. `sizes`: B pairs (H, W)."""
    hw = torch.as_tensor(np.asarray(sizes, np.int64).reshape(-1, 2), device=device)
    on_rows = torch.arange(side, device=device)[None, :] < hw[:, :1]  # (B, side)
    on_cols = torch.arange(side if width is None else width, device=device)[None, :] < hw[:, 1:]
    return (on_rows[:, :, None] & on_cols[:, None, :]).float()[:, None]


def to_canvas(batches, side: int = CANVAS) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
    """(x (B, C, side, side) float32, mask (B, 1, side, side), sizes) from a list of
    per-size planes (each (b, C, H, W), numpy or torch); positions keep their order."""
    parts = [torch.as_tensor(np.asarray(b)) if not torch.is_tensor(b) else b for b in batches]
    n = sum(len(p) for p in parts)
    c = parts[0].shape[1]
    x = torch.zeros(n, c, side, side)
    sizes = []
    i = 0
    for p in parts:
        b, _, h, w = p.shape
        if h > side or w > side:
            raise ValueError(f"a {h}x{w} board does not fit a {side}x{side} canvas")
        x[i:i + b, :, :h, :w] = p.float()
        sizes += [(h, w)] * b
        i += b
    return x, board_mask(sizes, side), sizes


def canvas_batch(batches, side: int | None = CANVAS):
    """(one :class:`nets.replay.Batch` of every sample of `batches` on the canvas, board
    mask (B, 1, H, W) float32 numpy): planes, policy targets, legal cells and ownership
    targets (where every batch has them) padded with zeros (off-board cells are never legal
    and hold no stone), the other fields concatenated in order.
    The canvas is side x side, or with `side` None the smallest that holds every batch
    (its largest height by its largest width: a one-size window is not padded at all)."""
    from nets.replay import Batch

    n = sum(len(b.outcome) for b in batches)
    c = batches[0].planes.shape[1]
    if side is None:
        rows, cols = max(b.height for b in batches), max(b.width for b in batches)
    else:
        rows = cols = side
    planes = np.zeros((n, c, rows, cols), np.float32)
    policy = np.zeros((n, rows, cols), np.float32)
    legal = np.zeros((n, rows, cols), bool)
    own = np.zeros((n, rows, cols), np.float32) if all(b.ownership is not None for b in batches) else None
    sizes, i = [], 0
    for b in batches:
        k, h, w = len(b.outcome), b.height, b.width
        planes[i:i + k, :, :h, :w] = b.planes
        policy[i:i + k, :h, :w] = b.policy
        legal[i:i + k, :h, :w] = b.legal
        if own is not None:
            own[i:i + k, :h, :w] = b.ownership
        sizes += [(h, w)] * k
        i += k
    wdl = None if any(b.root_wdl is None for b in batches) else np.concatenate([b.root_wdl for b in batches])
    left = None if any(b.plies_left is None for b in batches) else np.concatenate([b.plies_left for b in batches])
    out = Batch(rows, cols, planes, policy, np.concatenate([b.policy_weight for b in batches]),
                np.concatenate([b.outcome for b in batches]), legal, wdl, left, own)
    return out, board_mask(sizes, rows, width=cols).numpy()


def masked_global_pool(x: torch.Tensor, mask: torch.Tensor, area: torch.Tensor) -> torch.Tensor:
    """(B, C, S, S) post-ReLU values -> (B, 3C): mean over the board, mean * (sqrt(area) - 10)
    / 10, max over the board (`area`: (B,) cells of each board; values >= 0, so the max of
    the masked map is the board's)."""
    xm = x * mask
    mean = xm.sum(dim=(2, 3)) / area[:, None]
    scale = (area.sqrt() - 10.0) / 10.0
    return torch.cat([mean, mean * scale[:, None], xm.amax(dim=(2, 3))], dim=1)


def masked_batch_norm(bn: nn.BatchNorm2d, x: torch.Tensor, mask: torch.Tensor, count: torch.Tensor
                      ) -> torch.Tensor:
    """`bn` applied to `x` (B, C, S, S) with, in training, the statistics of the on-board cells
    of each of G equal consecutive groups of the batch: `count` (G,) holds each group's on-board
    cells (G = 1: the whole batch). The running statistics are updated from the groups in order,
    as G batch-norm calls would (momentum m each: (1 - m)^G of the old value remains)."""
    if not bn.training:
        return F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)
    g = count.shape[0]
    b, c = x.shape[:2]

    def per_group(per_sample):  # (B, C) sums -> (G, C) sums over each group's samples
        return per_sample.reshape(g, -1, c).sum(1)

    def per_sample(per_grp):  # (G, C) -> (B, C): each sample its group's row
        return per_grp[:, None, :].expand(g, b // g, c).reshape(b, c)

    xm = x * mask
    mean = per_group(xm.sum(dim=(2, 3))) / count[:, None]  # (G, C)
    centred = x - per_sample(mean)[:, :, None, None]
    var = per_group(((centred * mask) ** 2).sum(dim=(2, 3))) / count[:, None]
    with torch.no_grad():
        m = bn.momentum if bn.momentum is not None else 0.1
        age = torch.arange(g - 1, -1, -1, device=x.device, dtype=torch.float32)  # later groups weigh more
        w = (m * (1 - m) ** age)[:, None]
        unbiased = var.detach() * (count / (count - 1.0).clamp(min=1.0))[:, None]  # no host sync
        keep = (1 - m) ** g
        bn.running_mean.mul_(keep).add_((w * mean.detach()).sum(0))
        bn.running_var.mul_(keep).add_((w * unbiased).sum(0))
        bn.num_batches_tracked.add_(g)
    scale = per_sample(torch.rsqrt(var + bn.eps) * bn.weight)  # (B, C)
    return centred * scale[:, :, None, None] + bn.bias[None, :, None, None]


class CanvasNet(nn.Module):
    """A :class:`nets.model.Net`'s function on the masked canvas (its modules, shared: one
    set of weights serves both; see the module docstring), and with `own_head` that training-
    only head's too (:class:`nets.model.OwnershipHead`, shared with the per-size step)."""

    def __init__(self, net: Net, own_head: OwnershipHead | None = None):
        super().__init__()
        self.net = net
        self.own_head = own_head
        self.config = net.config

    def forward(self, x: torch.Tensor, mask: torch.Tensor, groups: int = 1) -> tuple[torch.Tensor, ...]:
        """x: (B, C, S, S) planes, zeros off the board; mask: (B, 1, S, S) board mask; `groups`:
        in training, batch-norm statistics per each of that many equal consecutive groups of the
        batch (B divisible by it; the trainer's one group per board size).
        Returns (policy logits (B, S, S), value logits (B, 3), or (B, 4) with the moves-left head),
        and with the ownership head its logits (B, 3, S, S) third (meaningless off the board)."""
        if not x.is_floating_point():
            x = x.float()
        if x.shape[0] % groups:
            raise ValueError(f"a batch of {x.shape[0]} does not split into {groups} equal groups")
        net = self.net
        area = mask.sum(dim=(1, 2, 3))
        count = area.reshape(groups, -1).sum(1)  # on-board cells per group

        def bn(mod, t):
            return masked_batch_norm(mod, t, mask, count)

        def act(mod, t):  # relu(bn(t)), zero off the board (the next conv's padding)
            return F.relu(bn(mod, t)) * mask

        h = net.input_conv(x * mask) * mask
        for blk in net.blocks:
            t = blk.reduce(act(blk.norm_in, h))
            for rb in blk.inner:
                u = act(rb.norm1, t)
                a = rb.conv1(u)
                if rb.c_gpool:
                    g = masked_global_pool(act(rb.gnorm, rb.gconv(u)), mask, area)
                    a = a + rb.glinear(g)[:, :, None, None]
                t = t + rb.conv2(act(rb.norm2, a))
            h = (h + blk.expand(act(blk.norm_out, t))) * mask
        trunk = act(net.trunk_norm, h)
        ph, vh = net.policy_head, net.value_head
        g = masked_global_pool(act(ph.norm_g, ph.conv_g(trunk)), mask, area)
        a = ph.conv_p(trunk) + ph.glinear(g)[:, :, None, None]
        policy = ph.conv_out(act(ph.norm, a))[:, 0]
        v = masked_global_pool(act(vh.norm, vh.conv(trunk)), mask, area)
        if self.own_head is None:
            return policy, vh.fc2(F.relu(vh.fc1(v)))
        oh = self.own_head
        return policy, vh.fc2(F.relu(vh.fc1(v))), oh.conv_out(act(oh.norm, oh.conv(trunk)))

