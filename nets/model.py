"""KataGo-style policy/value network for Saiblo Connect Four (any board 4..12 x 4..12).

Conventions
-----------
- Input: planes (B, C, H, W), float32 0/1 (uint8 is converted), C = ``config.in_planes``
  (``c4fast.NUM_PLANES``), row 0 at the bottom, all positions of a batch the same size.
- Output of ``Net.forward``: ``(policy_logits (B, H, W), value_logits (B, 3))``. One policy
  logit per cell (the move in a column is its landing cell; callers read legal cells and
  do the softmax). Value logits are (win, draw, loss) for the side to move. With
  ``NetConfig.moves_left`` the value output is (B, 4): its 4th column m is the expected
  plies until the game ends divided by H * W (:data:`nets.config.MOVES_LEFT_UNIT`);
  :func:`torch_wdl_outputs` turns it into plies, ``max(m, 0) * H * W``.

Architecture (pre-activation: every conv is preceded by BatchNorm + ReLU)::

    3x3 conv (in_planes -> c)
    blocks x NestedBottleneck: x + expand1x1(ResBlock^inner(reduce1x1(x)))  (c -> c/2 -> c)
        ResBlock: h + conv3x3(relu(bn(conv3x3(relu(bn(h))))))
        the first ResBlock of a block in gpool_blocks adds a global-pooling bias
    BN + ReLU (trunk tip)
    policy: 1x1 conv P + Linear(gpool(1x1 conv G)) -> BN, ReLU -> 1x1 conv -> (B, H, W)
    value:  1x1 conv -> BN, ReLU -> gpool -> Linear, ReLU, Linear -> (B, 3) (or (B, 4): moves left)

KataGo global pooling of a (B, C, H, W) map gives (B, 3C):
``[mean, mean * (sqrt(H*W) - 10) / 10, max]`` over the board.
Works in eager mode, with or without ``channels_last`` memory format.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nets.config import NetConfig

__all__ = ["Net", "OwnershipHead", "build_model", "count_parameters", "global_pool", "predict", "torch_wdl_outputs"]


def torch_wdl_outputs(value: torch.Tensor, cells) -> torch.Tensor:
    """Value logits (B, 3) -> (win, draw, loss) probabilities (B, 3) (``torch.softmax``, as
    always); (B, 4) -> (B, 4): the softmax of the first 3 and the moves-left estimate in
    plies, ``relu(m) * cells`` (`cells`: H * W, or a (B,) tensor of each position's own
    board cells on the canvas). float32."""
    value = value.float()
    if value.shape[1] == 3:
        return torch.softmax(value, dim=1)
    scale = cells.float()[:, None] if torch.is_tensor(cells) else float(cells)
    return torch.cat([torch.softmax(value[:, :3], dim=1), value[:, 3:].relu() * scale], dim=1)


def global_pool(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, 3C): mean, mean * (sqrt(H*W) - 10) / 10, max over H, W."""
    h, w = x.shape[-2], x.shape[-1]
    mean = x.mean(dim=(2, 3))
    if torch.jit.is_tracing():  # ONNX export: keep the board size symbolic, not a constant
        scale = (x[0, 0].new_ones(()).expand(h, w).sum().sqrt() - 10.0) / 10.0
    else:
        scale = (math.sqrt(h * w) - 10.0) / 10.0
    mx = x.amax(dim=(2, 3))
    return torch.cat([mean, mean * scale, mx], dim=1)


def _conv(c_in: int, c_out: int, k: int, bias: bool = False) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=k, padding=k // 2, bias=bias)


class ResBlock(nn.Module):
    """Pre-activation residual block of two 3x3 convs on m channels.

    With ``c_gpool > 0`` the first conv yields ``m - c_gpool`` regular channels and a
    ``c_gpool``-channel branch is globally pooled into a per-channel bias for them.
    """

    def __init__(self, m: int, c_gpool: int = 0):
        super().__init__()
        self.c_gpool = c_gpool
        c_mid = m - c_gpool
        self.norm1 = nn.BatchNorm2d(m)
        self.conv1 = _conv(m, c_mid, 3)
        if c_gpool:
            self.gconv = _conv(m, c_gpool, 3)
            self.gnorm = nn.BatchNorm2d(c_gpool)
            self.glinear = nn.Linear(3 * c_gpool, c_mid, bias=False)
        self.norm2 = nn.BatchNorm2d(c_mid)
        self.conv2 = _conv(c_mid, m, 3)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        t = F.relu(self.norm1(h))
        a = self.conv1(t)
        if self.c_gpool:
            g = global_pool(F.relu(self.gnorm(self.gconv(t))))
            a = a + self.glinear(g)[:, :, None, None]
        return h + self.conv2(F.relu(self.norm2(a)))


class NestedBottleneck(nn.Module):
    """c -> (1x1) m -> inner ResBlocks -> (1x1) c, added to the block input."""

    def __init__(self, c: int, m: int, inner: int, c_gpool: int = 0):
        super().__init__()
        self.norm_in = nn.BatchNorm2d(c)
        self.reduce = _conv(c, m, 1)
        self.inner = nn.ModuleList(
            [ResBlock(m, c_gpool if i == 0 else 0) for i in range(inner)]
        )
        self.norm_out = nn.BatchNorm2d(m)
        self.expand = _conv(m, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.reduce(F.relu(self.norm_in(x)))
        for blk in self.inner:
            h = blk(h)
        return x + self.expand(F.relu(self.norm_out(h)))


class PolicyHead(nn.Module):
    """Fully convolutional: trunk (B, c, H, W) -> logits (B, H, W)."""

    def __init__(self, c: int, p: int):
        super().__init__()
        self.conv_p = _conv(c, p, 1)
        self.conv_g = _conv(c, p, 1)
        self.norm_g = nn.BatchNorm2d(p)
        self.glinear = nn.Linear(3 * p, p, bias=False)
        self.norm = nn.BatchNorm2d(p)
        self.conv_out = _conv(p, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = global_pool(F.relu(self.norm_g(self.conv_g(x))))
        a = self.conv_p(x) + self.glinear(g)[:, :, None, None]
        return self.conv_out(F.relu(self.norm(a)))[:, 0]


class ValueHead(nn.Module):
    """trunk (B, c, H, W) -> (win, draw, loss) logits (B, 3), and with ``outputs`` 4 the
    moves-left output m (plies left / (H * W)) as a 4th column."""

    def __init__(self, c: int, v: int, hidden: int, outputs: int = 3):
        super().__init__()
        self.conv = _conv(c, v, 1)
        self.norm = nn.BatchNorm2d(v)
        self.fc1 = nn.Linear(3 * v, hidden)
        self.fc2 = nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = global_pool(F.relu(self.norm(self.conv(x))))
        return self.fc2(F.relu(self.fc1(g)))


class OwnershipHead(nn.Module):
    """Training-only auxiliary head (KataGo's ownership): trunk (B, c, H, W) -> logits
    (B, 3, H, W) of what each cell holds when the game ends: the side to move's stone, the
    opponent's, or nothing (:data:`nets.train.OWNERSHIP_CLASSES`). 1x1 conv c -> p, BN,
    ReLU, 1x1 conv p -> 3. Lives in the training state, never in a checkpoint."""

    def __init__(self, c: int, p: int):
        super().__init__()
        self.conv = _conv(c, p, 1)
        self.norm = nn.BatchNorm2d(p)
        self.conv_out = _conv(p, 3, 1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_out(F.relu(self.norm(self.conv(x))))


class Net(nn.Module):
    """Policy/value net; ``forward(planes (B,C,H,W)) -> (policy (B,H,W), wdl logits (B,3))``
    (``(B, 4)`` with the moves-left output, ``NetConfig.moves_left``)."""

    def __init__(self, config: NetConfig):
        super().__init__()
        if not isinstance(config, NetConfig):
            raise TypeError(f"Net needs a NetConfig, got {type(config).__name__}")
        self.config = config
        c, m = config.channels, config.bottleneck_channels
        self.input_conv = _conv(config.in_planes, c, 3, bias=True)
        self.blocks = nn.ModuleList(
            [
                NestedBottleneck(
                    c, m, config.inner_blocks,
                    config.gpool_channels if i in config.gpool_blocks else 0,
                )
                for i in range(config.blocks)
            ]
        )
        self.trunk_norm = nn.BatchNorm2d(c)
        self.policy_head = PolicyHead(c, config.policy_channels)
        self.value_head = ValueHead(c, config.value_channels, config.value_hidden, config.value_outputs)
        self._init_weights()

    def _init_weights(self) -> None:
        _init_convs(self)
        # Keep the residual stream's variance bounded at initialisation.
        n_res = self.config.blocks * (1 + self.config.inner_blocks)
        with torch.no_grad():
            for blk in self.blocks:
                blk.expand.weight.mul_(1.0 / math.sqrt(n_res))
                for rb in blk.inner:
                    rb.conv2.weight.mul_(1.0 / math.sqrt(n_res))

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if planes.dim() != 4 or planes.shape[1] != self.config.in_planes:
            raise ValueError(
                f"expected planes of shape (B, {self.config.in_planes}, H, W), "
                f"got {tuple(planes.shape)}"
            )
        x = self.trunk(planes)
        return self.policy_head(x), self.value_head(x)

    def trunk(self, planes: torch.Tensor) -> torch.Tensor:
        """The trunk's output (B, channels, H, W) after its final BN + ReLU: what the heads
        read (the training-only :class:`OwnershipHead` too)."""
        if not planes.is_floating_point():
            planes = planes.float()
        x = self.input_conv(planes)
        for blk in self.blocks:
            x = blk(x)
        return F.relu(self.trunk_norm(x))


def _init_convs(module: nn.Module) -> None:
    """Kaiming-normal conv weights (ReLU gain), zero conv biases: the nets' initialisation."""
    for mod in module.modules():
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
            if mod.bias is not None:
                nn.init.zeros_(mod.bias)


def build_model(config: NetConfig) -> Net:
    """A freshly initialised :class:`Net` (train mode, CPU, float32)."""
    return Net(config)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (BatchNorm running statistics excluded)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def predict(model: nn.Module, planes) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate a batch in eval mode under ``torch.inference_mode``.

    planes: (B, C, H, W) numpy array or tensor (float32 or 0/1 uint8).
    Returns ``(policy_logits float32 (B, H, W), wdl_probs float32 (B, 3))`` as numpy arrays;
    the (win, draw, loss) probabilities sum to 1 (with the moves-left head, ``(B, 4)``: the
    4th column is the estimate in plies, :func:`torch_wdl_outputs`). The model's
    train/eval mode is restored.
    """
    param = next(model.parameters())
    x = torch.as_tensor(planes)
    x = x.to(device=param.device, dtype=param.dtype)
    conv = getattr(model, "input_conv", None)
    if conv is not None and x.dim() == 4 and conv.weight.is_contiguous(
        memory_format=torch.channels_last
    ) and not conv.weight.is_contiguous():
        x = x.contiguous(memory_format=torch.channels_last)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            policy, value = model(x)
            wdl = torch_wdl_outputs(value, x.shape[-2] * x.shape[-1])
            policy = policy.float()
    finally:
        model.train(was_training)
    return (
        np.ascontiguousarray(policy.cpu().numpy(), dtype=np.float32),
        np.ascontiguousarray(wdl.cpu().numpy(), dtype=np.float32),
    )
