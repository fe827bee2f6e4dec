"""BN-folded inference copy of :class:`nets.model.Net`, and the net's FLOPs per evaluation.

:class:`FusedNet` computes the same function as ``Net.eval()`` with fewer kernels:

* every BatchNorm that directly follows a conv (or a Linear) is folded into that
  layer's weights and bias (the same folding as :mod:`nets.numpy_net`);
* BatchNorms on a residual sum (pre-activation ``norm_in``, ``norm1``, ``norm_out``,
  the trunk tip) cannot be folded (an add intervenes) and run as one fused
  multiply-add (``addcmul``) followed by an in-place ReLU;
* convs that read the same tensor are merged into one conv: ``conv1`` + ``gconv`` of a
  global-pooling residual block, and the three 1x1 convs of the heads.

Its tensors have fixed addresses: :meth:`FusedNet.load_from` copies the folded
weights of another ``Net`` *in place*, so CUDA graphs captured on a FusedNet keep
working after a hot reload without re-capture.

Conventions are those of :mod:`nets.model`: input (B, C, H, W) 0/1 planes (any float
dtype of the module, or uint8), output ``(policy logits (B, H, W), value logits (B, 3))``
in the module's dtype ((B, 4) with the moves-left head, ``NetConfig.moves_left``). fp32 results equal the eager model's to ~1e-5 (rounding order).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nets.canvas import masked_global_pool
from nets.config import NetConfig
from nets.model import global_pool

__all__ = ["FusedNet", "flops_per_eval"]


def _bn_affine(bn) -> tuple[torch.Tensor, torch.Tensor]:
    """Eval-mode BatchNorm as y = x * scale + shift (float64, per channel)."""
    var = bn.running_var.detach().cpu().double()
    mean = bn.running_mean.detach().cpu().double()
    gamma = bn.weight.detach().cpu().double()
    beta = bn.bias.detach().cpu().double()
    scale = gamma / (var + bn.eps).sqrt()
    return scale, beta - mean * scale


def _w(mod, scale=None) -> torch.Tensor:
    """Conv/Linear weight in float64, output channels scaled by a following BatchNorm."""
    w = mod.weight.detach().cpu().double()
    if scale is not None:
        w = w * scale.reshape((-1,) + (1,) * (w.dim() - 1))
    return w


def _affine_relu(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(shift, x, scale).relu_()


class _Inner(nn.Module):
    def __init__(self, m: int, c_gpool: int):
        super().__init__()
        self.c_mid = m - c_gpool
        self.c_gpool = c_gpool
        self.register_buffer("n1_s", torch.zeros(1, m, 1, 1))
        self.register_buffer("n1_t", torch.zeros(1, m, 1, 1))
        self.conv1 = nn.Conv2d(m, m, 3, padding=1, bias=True)  # conv1 (c_mid) ++ gconv (c_gpool)
        self.glin = nn.Linear(3 * c_gpool, self.c_mid, bias=False) if c_gpool else None
        self.conv2 = nn.Conv2d(self.c_mid, m, 3, padding=1, bias=False)

    def forward(self, h, mask=None, area=None):
        u = _affine_relu(h, self.n1_s, self.n1_t)
        y = self.conv1(u if mask is None else u * mask)
        if self.c_gpool:
            r = F.relu(y[:, self.c_mid:])
            g = global_pool(r) if mask is None else masked_global_pool(r, mask, area).to(r.dtype)
            a = y[:, : self.c_mid] + self.glin(g)[:, :, None, None]
        else:
            a = y
        a = a.relu_()
        return h + self.conv2(a if mask is None else a * mask)


class _Block(nn.Module):
    def __init__(self, c: int, m: int, inner: int, c_gpool: int):
        super().__init__()
        self.register_buffer("in_s", torch.zeros(1, c, 1, 1))
        self.register_buffer("in_t", torch.zeros(1, c, 1, 1))
        self.reduce = nn.Conv2d(c, m, 1, bias=False)
        self.inner = nn.ModuleList([_Inner(m, c_gpool if i == 0 else 0) for i in range(inner)])
        self.register_buffer("out_s", torch.zeros(1, m, 1, 1))
        self.register_buffer("out_t", torch.zeros(1, m, 1, 1))
        self.expand = nn.Conv2d(m, c, 1, bias=False)

    def forward(self, x, mask=None, area=None):
        h = self.reduce(_affine_relu(x, self.in_s, self.in_t))
        for blk in self.inner:
            h = blk(h, mask, area)
        y = x + self.expand(_affine_relu(h, self.out_s, self.out_t))
        return y if mask is None else y * mask


class FusedNet(nn.Module):
    """Inference-only, BN-folded :class:`nets.model.Net` (see the module docstring)."""

    def __init__(self, config: NetConfig):
        super().__init__()
        self.config = config
        c, m, p, v = config.channels, config.bottleneck_channels, config.policy_channels, config.value_channels
        self.p, self.v = p, v
        self.input_conv = nn.Conv2d(config.in_planes, c, 3, padding=1, bias=True)
        self.blocks = nn.ModuleList([
            _Block(c, m, config.inner_blocks, config.gpool_channels if i in config.gpool_blocks else 0)
            for i in range(config.blocks)
        ])
        self.register_buffer("trunk_s", torch.zeros(1, c, 1, 1))
        self.register_buffer("trunk_t", torch.zeros(1, c, 1, 1))
        self.heads = nn.Conv2d(c, 2 * p + v, 1, bias=True)  # policy conv_p ++ conv_g ++ value conv
        self.p_glin = nn.Linear(3 * p, p, bias=False)
        self.p_out = nn.Conv2d(p, 1, 1, bias=False)
        self.v_fc1 = nn.Linear(3 * v, config.value_hidden)
        self.v_fc2 = nn.Linear(config.value_hidden, config.value_outputs)
        for t in self.parameters():
            t.requires_grad_(False)
        self.eval()

    @classmethod
    def from_model(cls, model) -> "FusedNet":
        """A float32 CPU FusedNet computing `model` (a ``Net``, possibly compiled) in eval mode."""
        model = getattr(model, "_orig_mod", model)
        f = cls(model.config)
        f.load_from(model)
        return f

    def folded_tensors(self, model) -> dict[str, torch.Tensor]:
        """{state_dict key: float64 CPU tensor} of `model` folded into this layout."""
        model = getattr(model, "_orig_mod", model)
        if model.config != self.config:
            raise ValueError(f"cannot load a {model.config.name!r} net into a FusedNet of "
                             f"{self.config.name!r}: {model.config.diff(self.config)}")
        d: dict[str, torch.Tensor] = {}
        col = lambda t: t.reshape(1, -1, 1, 1)  # noqa: E731
        d["input_conv.weight"] = _w(model.input_conv)
        d["input_conv.bias"] = model.input_conv.bias.detach().cpu().double()
        for i, blk in enumerate(model.blocks):
            q = f"blocks.{i}."
            s, t = _bn_affine(blk.norm_in)
            d[q + "in_s"], d[q + "in_t"] = col(s), col(t)
            d[q + "reduce.weight"] = _w(blk.reduce)
            for j, rb in enumerate(blk.inner):
                r = f"{q}inner.{j}."
                s, t = _bn_affine(rb.norm1)
                d[r + "n1_s"], d[r + "n1_t"] = col(s), col(t)
                s2, t2 = _bn_affine(rb.norm2)
                w, b = [_w(rb.conv1, s2)], [t2]
                if rb.c_gpool:
                    sg, tg = _bn_affine(rb.gnorm)
                    w.append(_w(rb.gconv, sg))
                    b.append(tg)
                    d[r + "glin.weight"] = _w(rb.glinear, s2)
                d[r + "conv1.weight"] = torch.cat(w)
                d[r + "conv1.bias"] = torch.cat(b)
                d[r + "conv2.weight"] = _w(rb.conv2)
            s, t = _bn_affine(blk.norm_out)
            d[q + "out_s"], d[q + "out_t"] = col(s), col(t)
            d[q + "expand.weight"] = _w(blk.expand)
        s, t = _bn_affine(model.trunk_norm)
        d["trunk_s"], d["trunk_t"] = col(s), col(t)
        ph, vh = model.policy_head, model.value_head
        s, t = _bn_affine(ph.norm)
        sg, tg = _bn_affine(ph.norm_g)
        sv, tv = _bn_affine(vh.norm)
        d["heads.weight"] = torch.cat([_w(ph.conv_p, s), _w(ph.conv_g, sg), _w(vh.conv, sv)])
        d["heads.bias"] = torch.cat([t, tg, tv])
        d["p_glin.weight"] = _w(ph.glinear, s)
        d["p_out.weight"] = _w(ph.conv_out)
        for name, lin in (("v_fc1", vh.fc1), ("v_fc2", vh.fc2)):
            d[name + ".weight"] = _w(lin)
            d[name + ".bias"] = lin.bias.detach().cpu().double()
        return d

    @torch.no_grad()
    def load_from(self, model) -> None:
        """Copy `model`'s folded weights into this module's existing tensors (addresses kept;
        on CUDA the copies run on the current stream). ValueError if the configs differ."""
        d = self.folded_tensors(model)
        own = self.state_dict(keep_vars=True)
        if set(d) != set(own):
            raise AssertionError(f"FusedNet layout mismatch: {sorted(set(d) ^ set(own))}")
        for k, t in d.items():
            own[k].copy_(t.reshape(own[k].shape))

    def forward(self, planes: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """planes (B, C, H, W) -> (policy logits (B, H, W), value logits (B, 3 or 4)).

        With `mask` ((B, 1, S, S) board mask of the canvas, :mod:`nets.canvas`): `planes` is
        a (B, C, S, S) canvas batch of any sizes and the forward is :class:`nets.canvas.CanvasNet`'s
        (3x3 conv inputs and the residual stream zero off the board, masked global pooling);
        only the board's policy cells are meaningful."""
        dt = self.input_conv.weight.dtype
        x = planes if planes.dtype == dt else planes.to(dt)
        area = None
        if mask is not None:
            mask = mask.to(dt)
            area = mask.float().sum(dim=(1, 2, 3))
            x = self.input_conv(x * mask) * mask
        else:
            x = self.input_conv(x)
        for blk in self.blocks:
            x = blk(x, mask, area)
        x = _affine_relu(x, self.trunk_s, self.trunk_t)
        y = self.heads(x)
        p = self.p

        def pool(t):
            return global_pool(t) if mask is None else masked_global_pool(t, mask, area).to(t.dtype)

        a = y[:, :p] + self.p_glin(pool(F.relu(y[:, p:2 * p])))[:, :, None, None]
        policy = self.p_out(a.relu_())[:, 0]
        v = pool(F.relu(y[:, 2 * p:]))
        value = self.v_fc2(F.relu(self.v_fc1(v)))
        return policy, value


def flops_per_eval(config: NetConfig, height: int, width: int) -> int:
    """Floating-point operations of one forward evaluation (2 per multiply-add, convs and
    Linear layers only; elementwise work and pooling are not counted)."""
    cells = height * width
    c, m = config.channels, config.bottleneck_channels
    p, v = config.policy_channels, config.value_channels
    macs = 9 * config.in_planes * c * cells
    for i in range(config.blocks):
        cg = config.gpool_channels if i in config.gpool_blocks else 0
        macs += 2 * c * m * cells  # reduce + expand
        for j in range(config.inner_blocks):
            g = cg if j == 0 else 0
            macs += 9 * m * (m - g) * cells + 9 * (m - g) * m * cells  # conv1, conv2
            if g:
                macs += 9 * m * g * cells + 3 * g * (m - g)  # gconv, glinear
    macs += c * (2 * p + v) * cells + 3 * p * p + p * cells  # head 1x1 convs, glinear, out
    macs += 3 * v * config.value_hidden + config.value_hidden * config.value_outputs
    return 2 * macs

