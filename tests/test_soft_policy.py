"""KataGo's auxiliary soft policy target (issue 35; ``--train.soft-policy-weight``): the loss
against a numpy reference on real shard files, the canvas net's head against the per-size
one, the padded step against the per-size step, the head in the training state (exact
resume, never in a checkpoint) and bad settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nets.canvas import CanvasNet, canvas_batch
from nets.checkpoint import load_checkpoint
from nets.replay import ReplayWindow
from nets.train import TrainConfig, TrainRunConfig, Trainer, losses, train
from test_ownership import _shards


def _numpy_soft_loss(logits: np.ndarray, target: np.ndarray, legal: np.ndarray, weight: np.ndarray,
                     temp: float) -> float:
    """sum_i w_i * CE(t_i ** (1/T) / sum, softmax of the logits over the legal cells), float64."""
    n = len(target)
    z = np.where(legal.reshape(n, -1), logits.reshape(n, -1), -np.inf)
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    soft = target.reshape(n, -1) ** (1.0 / temp)
    sums = soft.sum(1, keepdims=True)
    soft = np.divide(soft, sums, out=np.zeros_like(soft), where=sums > 0)
    ce = -np.where(soft > 0, soft * np.where(np.isfinite(logp), logp, 0.0), 0.0).sum(1)
    return float((weight * ce).sum())


@pytest.mark.parametrize("weight,temp", [(8.0, 4.0), (0.5, 1.0)])
def test_the_soft_policy_loss_matches_a_numpy_reference_and_adds_to_the_total(tmp_path, weight, temp):
    win = ReplayWindow()
    win.update(_shards(tmp_path))
    tr = Trainer(TrainConfig(preset="tiny", soft_policy_weight=weight, soft_policy_temp=temp, precision="fp32"),
                 str(tmp_path / "t"))
    assert tr.own_head is None and tr.soft_head is not None
    tr.model.eval()
    tr.soft_head.eval()
    kw = dict(soft_head=tr.soft_head, soft_policy_weight=weight, soft_policy_temp=temp)
    for size in win.sizes:
        b = win.sample(np.random.default_rng(5), size, 16)
        assert (b.policy_weight > 0).any() and (b.policy.reshape(16, -1).sum(1) > 0.99).any()
        with torch.no_grad():
            base = losses(tr.model, b, "cpu", 1.5)
            got = losses(tr.model, b, "cpu", 1.5, **kw)
            logits = tr.soft_head(tr.model.trunk(torch.from_numpy(b.planes))).numpy()
        assert logits.shape == (16, 1, *size) and len(got) == 7
        want = _numpy_soft_loss(logits[:, 0].astype(np.float64), b.policy.astype(np.float64), b.legal,
                                b.policy_weight.astype(np.float64), temp)
        assert got[6].item() == pytest.approx(want, rel=1e-5) and want > 0 and base[6].item() == 0.0
        assert got[0].item() == pytest.approx(base[0].item() + weight * want, rel=1e-5)
        assert got[1].item() == pytest.approx(base[1].item(), rel=1e-6)  # the heads read the same trunk
        # at T = 1 the soft target is the target: a head with the main policy's logits scores its loss
        if temp == 1.0:
            pol = tr.model(torch.from_numpy(b.planes))[0].detach().numpy().astype(np.float64)
            assert _numpy_soft_loss(pol, b.policy.astype(np.float64), b.legal, b.policy_weight.astype(np.float64),
                                    1.0) == pytest.approx(base[1].item(), rel=1e-5)


def test_a_hotter_target_spreads_the_mass_and_a_sample_without_a_target_adds_nothing(tmp_path):
    """A head whose logits are log(target ** (1/T)) scores the soft target's entropy, the least
    any head can; at T = 4 a 0.9 / 0.1 target becomes about 0.64 / 0.36. A sample of weight 0
    or with no target mass adds 0."""
    win = ReplayWindow()
    win.update(_shards(tmp_path))
    b = win.sample(np.random.default_rng(1), win.sizes[0], 4)
    h, w = b.height, b.width
    b.policy[:] = 0
    b.legal[:] = False
    b.legal[:, 0, :] = True
    b.policy[0, 0, 0], b.policy[0, 0, 1] = 0.9, 0.1
    b.policy[1, 0, 2] = 1.0
    b.policy[2, 0, 3] = 1.0
    b.policy_weight[:] = [1.0, 1.0, 0.0, 1.0]  # sample 2: a fast search's row; sample 3: no target mass

    class Head(torch.nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.logits = torch.as_tensor(logits, dtype=torch.float32)

        def forward(self, x):
            return self.logits[:, None]

    soft0 = np.array([0.9, 0.1]) ** 0.25 / (0.9 ** 0.25 + 0.1 ** 0.25)
    assert soft0 == pytest.approx([0.634, 0.366], abs=1e-3)
    best = np.full((4, h, w), -50.0)
    best[0, 0, :2] = np.log(soft0)
    best[1, 0, 2] = 0.0
    tr = Trainer(TrainConfig(preset="tiny", precision="fp32"), str(tmp_path / "t"))
    tr.model.eval()
    with torch.no_grad():
        got = losses(tr.model, b, "cpu", 1.5, soft_head=Head(best), soft_policy_weight=1.0)[6].item()
        flat = losses(tr.model, b, "cpu", 1.5, soft_head=Head(np.zeros((4, h, w))), soft_policy_weight=1.0)[6].item()
    entropy = -(soft0 * np.log(soft0)).sum()
    assert got == pytest.approx(entropy, rel=1e-5)
    assert flat == pytest.approx(2 * np.log(w), rel=1e-5)  # uniform over the bottom row's w legal cells


def test_the_canvas_net_carries_the_head_and_gives_the_per_size_loss(tmp_path):
    win = ReplayWindow(ownership=True)
    win.update(_shards(tmp_path))
    tr = Trainer(TrainConfig(preset="tiny", ownership_weight=1.5, soft_policy_weight=8.0, precision="fp32"),
                 str(tmp_path / "t"))
    for m in (tr.model, tr.own_head, tr.soft_head):
        m.eval()
    parts = [win.sample(np.random.default_rng(5), size, 8) for size in win.sizes]
    batch, mask = canvas_batch(parts, side=None)
    kw = dict(own_head=tr.own_head, ownership_weight=1.5, soft_head=tr.soft_head, soft_policy_weight=8.0)
    with torch.no_grad():
        want = [losses(tr.model, b, "cpu", 1.5, **kw) for b in parts]
        got = losses(CanvasNet(tr.model, tr.own_head, tr.soft_head), batch, "cpu", 1.5, mask=mask,
                     groups=len(parts), **kw)
        soft_only = losses(CanvasNet(tr.model, None, tr.soft_head), batch, "cpu", 1.5, mask=mask,
                           groups=len(parts), soft_head=tr.soft_head, soft_policy_weight=8.0)
    for i in (0, 5, 6):
        assert got[i].item() == pytest.approx(sum(w[i].item() for w in want), rel=1e-5) and got[i].item() > 0
    assert soft_only[6].item() == pytest.approx(got[6].item(), rel=1e-6) and soft_only[5].item() == 0.0
    with pytest.raises(ValueError, match="carries no soft policy head"):
        losses(CanvasNet(tr.model, tr.own_head), batch, "cpu", 1.5, mask=mask, **kw)


def test_a_padded_step_with_the_head_equals_the_per_size_step(tmp_path):
    from conftest import contiguous_trainer
    from test_train import make_shards
    from nets.shards import list_shards

    make_shards(tmp_path, games=6, sizes=((6, 7), (9, 10), (12, 12)), per_shard=40)
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    out = []
    for padded in (False, True):
        tr = Trainer(TrainConfig(preset="cpu_small", per_size=24, seed=3, device="cpu", padded=padded,
                                 precision="fp32", soft_policy_weight=8.0), str(tmp_path / f"t{padded}"))
        contiguous_trainer(tr)
        metrics = [tr.train_step(win) for _ in range(2)]
        out.append((metrics, {**tr.model.state_dict(), **{f"soft.{k}": v for k, v in tr.soft_head.state_dict().items()}}))
    (m_ref, w_ref), (m_pad, w_pad) = out
    for a, b in zip(m_ref, m_pad):
        assert a["soft_policy_loss"] == pytest.approx(b["soft_policy_loss"], rel=1e-5) and a["soft_policy_loss"] > 0
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
    assert set(w_pad) == set(w_ref) and any(k.startswith("soft.") for k in w_ref)
    for k in w_ref:
        torch.testing.assert_close(w_pad[k].float(), w_ref[k].float(), rtol=1e-4, atol=1e-5, msg=k)


def test_the_head_trains_resumes_exactly_and_stays_out_of_checkpoints(tmp_path, caplog):
    paths = _shards(tmp_path / "d")
    cfg = TrainConfig(preset="tiny", steps=24, per_size=8, checkpoint_every=6, soft_policy_weight=8.0,
                      ownership_weight=1.5)
    a = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), train=cfg), quiet=True)
    train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "b"), stop_after=12, train=cfg), quiet=True)
    b = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "b"), resume=True, train=cfg), quiet=True)
    assert a["steps"] == b["steps"] == 24 and "soft_policy_loss" in a and "ownership_loss" in a
    ma, _, _ = load_checkpoint(a["checkpoint"])
    mb, _, _ = load_checkpoint(b["checkpoint"])
    for (k, x), (_, y) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(x, y), k
    sa = torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)
    sb = torch.load(tmp_path / "b" / "train_state.pt", weights_only=True)
    for key in ("own_head", "soft_head"):
        for k, x in sa[key]["model"].items():
            assert torch.equal(x, sb[key]["model"][k]), (key, k)
    ckpt = torch.load(a["checkpoint"], weights_only=True)
    assert set(ckpt["state_dict"]) == set(ma.state_dict())  # the heads are training-only
    # a run without the head resumes from this state, and one with it from a state without
    plain = TrainConfig(preset="tiny", steps=30, per_size=8, checkpoint_every=6)
    train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), resume=True, train=plain), quiet=True)
    assert torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)["soft_head"] is None
    with caplog.at_level("WARNING", logger="nets.train"):
        tr = Trainer(TrainConfig(preset="tiny", per_size=8, soft_policy_weight=1.0), str(tmp_path / "a"))
        tr.load()
    assert "holds no soft policy head" in caplog.text and tr.step == 30
    win = ReplayWindow()
    win.update(paths)
    before = {k: v.clone() for k, v in tr.soft_head.state_dict().items()}
    assert tr.train_step(win)["soft_policy_loss"] > 0
    assert any(not torch.equal(before[k], v) for k, v in tr.soft_head.state_dict().items())


@pytest.mark.parametrize("field,bad", [("soft_policy_weight", -0.1), ("soft_policy_weight", float("nan")),
                                       ("soft_policy_weight", True), ("soft_policy_weight", "1"),
                                       ("soft_policy_temp", 0.5), ("soft_policy_temp", float("inf")),
                                       ("soft_policy_temp", 0)])
def test_bad_soft_policy_settings_are_refused(field, bad):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: bad})
