"""The masked canvas net (issue 33) against the per-size net with the same weights: for
random nets and positions of every Saiblo size and 6x7, one mixed canvas batch gives each
position's per-size policy (on its board's cells) and value within 1e-5 (fp32, CPU), and
in train mode a batch of several sizes, with batch-norm statistics per size, gives the
per-size net's outputs, gradients and running statistics, size after size."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import c4fast
from c4fast.board import RULES
from nets.canvas import CanvasNet, board_mask, masked_global_pool, to_canvas
from nets.config import NetConfig, get_preset
from nets.model import build_model, global_pool

SIZES = RULES.saiblo_sizes + ((6, 7),)


def _randomised(config: NetConfig, seed: int):
    """A net with random weights and random BN statistics (a trained net's are not 0/1)."""
    torch.manual_seed(seed)
    net = build_model(config)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.3)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.3)
    return net.eval()


def _positions(h: int, w: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Planes of `n` positions of random games on h x w with a random forbidden cell."""
    out = []
    for _ in range(n):
        g = c4fast.Game(h, w, RULES.draw_cell(rng, h, w) if rng.random() < 0.8 else None)
        for _ in range(int(rng.integers(0, h * w // 2))):
            if g.result is not None:
                break
            g.play(int(rng.choice(g.legal_moves())))
        out.append(g.planes())
    return np.stack(out).astype(np.float32)


NETS = {"tiny": get_preset("tiny"), "cpu_small": get_preset("cpu_small"),
        "two_gpool": NetConfig(name="custom", channels=24, blocks=2, bottleneck_channels=12, inner_blocks=2,
                               gpool_channels=6, policy_channels=8, value_channels=8, value_hidden=16,
                               gpool_blocks=(0, 1))}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net_name=st.sampled_from(sorted(NETS)), seed=st.integers(0, 10_000),
       sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=6))
def test_canvas_forward_equals_the_per_size_forward(net_name, seed, sizes):
    net = _randomised(NETS[net_name], seed)
    rng = np.random.default_rng(seed)
    batches = [_positions(h, w, int(rng.integers(1, 4)), rng) for h, w in sizes]
    x, mask, board = to_canvas(batches)
    with torch.no_grad():
        pol, val = CanvasNet(net).eval()(x, mask)
        i = 0
        for b in batches:
            ref_pol, ref_val = net(torch.from_numpy(b))
            h, w = b.shape[2:]
            n = len(b)
            assert torch.allclose(pol[i:i + n, :h, :w], ref_pol, atol=1e-5, rtol=0), (h, w)
            wdl = torch.softmax(val[i:i + n], 1)
            assert torch.allclose(wdl, torch.softmax(ref_val, 1), atol=1e-5, rtol=0), (h, w)
            assert torch.allclose(val[i:i + n], ref_val, atol=1e-5, rtol=0)
            i += n


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net_name=st.sampled_from(sorted(NETS) + ["cpu_small_ml"]), seed=st.integers(0, 10_000),
       sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=6))
def test_fused_canvas_forward_equals_the_per_size_forward_whatever_lies_off_the_board(net_name, seed, sizes):
    """The server's canvas forward (BN-folded FusedNet with a mask): stale 0/1 planes off the
    board (a served canvas is not cleared between batches) change nothing on it."""
    from nets.fused import FusedNet

    net = _randomised(NETS[net_name] if net_name in NETS else get_preset(net_name), seed)
    rng = np.random.default_rng(seed)
    batches = [_positions(h, w, int(rng.integers(1, 4)), rng) for h, w in sizes]
    x, mask, _ = to_canvas(batches)
    stale = torch.from_numpy(rng.integers(0, 2, x.shape).astype(np.float32))
    x = torch.where(mask.bool(), x, stale)
    with torch.no_grad():
        pol, val = FusedNet.from_model(net)(x, mask)
        i = 0
        for b in batches:
            ref_pol, ref_val = net(torch.from_numpy(b))
            h, w = b.shape[2:]
            n = len(b)
            assert torch.allclose(pol[i:i + n, :h, :w], ref_pol, atol=1e-5, rtol=0), (h, w)
            assert torch.allclose(val[i:i + n], ref_val, atol=1e-5, rtol=0), (h, w)
            i += n


@pytest.mark.parametrize("h, w", [(9, 12), (12, 12), (6, 7), (10, 9)])
def test_masked_train_mode_batch_norm_on_one_size_equals_the_per_size_net(h, w):
    net = _randomised(get_preset("cpu_small"), 3).train()
    twin = copy.deepcopy(net)
    b = _positions(h, w, 8, np.random.default_rng(h * w))
    x, mask, _ = to_canvas([b])
    pol, val = CanvasNet(twin).train()(x, mask)
    ref_pol, ref_val = net(torch.from_numpy(b))
    assert torch.allclose(pol[:, :h, :w], ref_pol, atol=1e-4, rtol=0)
    assert torch.allclose(val, ref_val, atol=1e-4, rtol=0)
    for (name, a), (_, c) in zip(net.named_buffers(), twin.named_buffers()):
        assert torch.allclose(a.float(), c.float(), atol=1e-5, rtol=1e-5), name  # running stats updated alike
    # the gradients agree too: the canvas trains the same net
    ref_loss = ref_pol.square().mean() + ref_val.square().mean()
    loss = pol[:, :h, :w].square().mean() + val.square().mean()
    ga = torch.autograd.grad(ref_loss, list(net.parameters()))
    gb = torch.autograd.grad(loss, list(twin.parameters()))
    for p, q in zip(ga, gb):
        assert torch.allclose(p, q, atol=1e-4, rtol=1e-3)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net_name=st.sampled_from(["tiny", "two_gpool"]), seed=st.integers(0, 10_000),
       sizes=st.lists(st.sampled_from(SIZES), min_size=2, max_size=4, unique=True), per=st.integers(1, 5))
def test_train_mode_with_statistics_per_size_equals_the_per_size_passes(net_name, seed, sizes, per):
    """A canvas batch of several sizes in train mode, `groups` = one per size: each size's
    outputs and the parameters' gradients equal those of one per-size pass per size (the
    trainer's per-size step), and the running statistics equal those after the passes in order."""
    net = _randomised(NETS[net_name], seed).train()
    twin = copy.deepcopy(net)
    rng = np.random.default_rng(seed)
    parts = [_positions(h, w, per, rng) for h, w in sizes]
    x, mask, _ = to_canvas(parts)
    pol, val = CanvasNet(twin).train()(x, mask, groups=len(sizes))
    loss = pol.new_zeros(())
    ref_loss = pol.new_zeros(())
    for i, b in enumerate(parts):  # a loss that weighs every output, per size
        h, w = b.shape[2:]
        sl = slice(i * per, (i + 1) * per)
        ref_pol, ref_val = net(torch.from_numpy(b))
        assert torch.allclose(pol[sl, :h, :w], ref_pol, atol=1e-4, rtol=0), (h, w)
        assert torch.allclose(val[sl], ref_val, atol=1e-4, rtol=0), (h, w)
        wp = torch.linspace(0.5, 1.5, h * w).reshape(h, w)
        ref_loss = ref_loss + (ref_pol * wp).square().mean() + ref_val[:, 0].sum() - ref_val[:, 2].square().sum()
        loss = loss + (pol[sl, :h, :w] * wp).square().mean() + val[sl, 0].sum() - val[sl, 2].square().sum()
    for (name, a), (_, c) in zip(net.named_buffers(), twin.named_buffers()):
        assert torch.allclose(a.float(), c.float(), atol=1e-5, rtol=1e-5), name
    ga = torch.autograd.grad(ref_loss, list(net.parameters()))
    gb = torch.autograd.grad(loss, list(twin.parameters()))
    for (name, _), p, q in zip(net.named_parameters(), ga, gb):
        assert torch.allclose(p, q, atol=1e-4, rtol=1e-3), name
    with pytest.raises(ValueError, match="equal groups"):
        CanvasNet(twin).train()(x[:-1], mask[:-1], groups=len(sizes))


def test_masked_pooling_and_the_mask():
    m = board_mask([(2, 3), (4, 4)], side=4)
    assert m.shape == (2, 1, 4, 4) and m[0, 0].sum() == 6 and m[0, 0, 1, 2] == 1 and m[0, 0, 2, 0] == 0
    x = torch.rand(2, 5, 4, 4)
    got = masked_global_pool(x, m, m.sum(dim=(1, 2, 3)))
    ref = torch.cat([global_pool(x[:1, :, :2, :3]), global_pool(x[1:])])
    assert torch.allclose(got, ref, atol=1e-6)
    with pytest.raises(ValueError, match="does not fit"):
        to_canvas([np.zeros((1, 9, 13, 4), np.float32)])


def test_a_tight_canvas_batch_is_as_large_as_the_largest_board_and_no_larger():
    from nets.canvas import canvas_batch
    from nets.replay import Batch

    rng = np.random.default_rng(0)

    def batch(h, w, k):
        return Batch(h, w, rng.integers(0, 2, (k, 9, h, w)).astype(np.float32), rng.random((k, h, w)).astype(np.float32),
                     np.ones(k, np.float32), rng.integers(0, 3, k), rng.random((k, h, w)) < 0.5)

    one, mask = canvas_batch([batch(6, 7, 3)], side=None)  # a 6x7 window: not padded at all
    assert (one.height, one.width) == (6, 7) and one.planes.shape == (3, 9, 6, 7) and mask.shape == (3, 1, 6, 7)
    assert mask.all()
    parts = [batch(6, 7, 2), batch(9, 5, 3)]
    mixed, mask = canvas_batch(parts, side=None)
    assert mixed.planes.shape == (5, 9, 9, 7) and mask.shape == (5, 1, 9, 7)
    assert mask[:2, 0].sum(axis=(1, 2)).tolist() == [42, 42] and mask[2:, 0].sum(axis=(1, 2)).tolist() == [45] * 3
    np.testing.assert_array_equal(mixed.planes[2:, :, :9, :5], parts[1].planes)
    assert not mixed.legal[:2, 6:].any() and not mixed.legal[2:, :, 5:].any()
    square, mask = canvas_batch(parts)  # the default: the 12x12 canvas
    assert square.planes.shape == (5, 9, 12, 12) and mask.shape == (5, 1, 12, 12)
