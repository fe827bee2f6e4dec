"""The ownership target (issue 35; ``--train.ownership-weight``): final boards joined from
real shard files against an independent replay (h5py and tests/reference.py), the batch's
mover view and its flips, the loss against a numpy reference, the head in the training
state (exact resume, never in a checkpoint) and bad settings and data."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

import c4fast
from nets.canvas import CanvasNet, canvas_batch
from nets.checkpoint import load_checkpoint
from nets.replay import ReplayWindow, flip_batch
from nets.shards import ShardValueError, final_boards, list_shards, read_shard, rebuild_positions
from nets.train import OWNERSHIP_CLASSES, TrainConfig, TrainRunConfig, Trainer, losses, train
from reference import ref_from_moves
from test_moves_left import write_shard
from test_selfplay_data import play
from selfplay.generation.config import SelfPlayConfig


def reference_final_boards(path):
    """{(group name, game_id, ply): final board (H, W), 0 empty / 1 / 2}, read with h5py
    alone and replayed by the reference rules from each game's stored moves."""
    out = {}
    with h5py.File(path, "r") as f:
        g = f["games"]
        boards = {}
        for gid, h, w, forb, moves, n in zip(g["game_id"][()], g["height"][()], g["width"][()], g["forbidden"][()],
                                             g["moves"][()], g["num_moves"][()]):
            fr, fc = (int(x) for x in forb)
            game = ref_from_moves(int(h), int(w), None if fr < 0 else (fr, fc), [int(c) for c in moves[:n]])
            boards[int(gid)] = np.maximum(game.board(), 0)
        for name, grp in f["samples"].items():
            for gid, ply in zip(grp["game_id"][()], grp["ply"][()]):
                out[(name, int(gid), int(ply))] = boards[int(gid)]
    return out


def _shards(tmp_path):
    """Forked random games in two shards that reuse game ids, and real self-play games
    (SelfPlayEngine, rollout evaluator) that start from forks."""
    sizes = ((6, 7), (9, 9), (10, 12))
    write_shard(tmp_path, "a", 1, 9, sizes)
    write_shard(tmp_path, "b", 2, 9, sizes, fork_max=30)
    play(tmp_path, SelfPlayConfig(fork_probability=0.5, fork_max_fill=0.6), ((6, 7, 10), (9, 10, 11)), games=3)
    return list_shards([tmp_path])


def test_final_boards_match_a_reference_replay_of_the_shard_files(tmp_path):
    paths = _shards(tmp_path)
    checked = 0
    for p in paths:
        ref = reference_final_boards(p)
        data = read_shard(p)
        games = data.pop("games")
        for (h, w), grp in data.items():
            got = final_boards(p, grp, games, h, w)
            assert got.shape == (len(grp["ply"]), h, w) and got.dtype == np.int8
            recs = rebuild_positions(grp, h, w)
            for i, (gid, ply) in enumerate(zip(grp["game_id"], grp["ply"])):
                np.testing.assert_array_equal(got[i], ref[(f"h{h}w{w}", int(gid), int(ply))])
                # the sample's stones all lie on its game's final board, each player's on its own cells
                now = c4fast.Game.from_state(recs[i]).board()
                for player in (1, 2):
                    assert (got[i][now == player] == player).all()
                checked += 1
    assert checked > 300


def test_a_batch_holds_the_final_board_from_the_side_to_move_and_flips_with_the_planes(tmp_path):
    paths = _shards(tmp_path)
    win = ReplayWindow(ownership=True)
    win.update(paths)
    for size in win.sizes:
        b = win.sample(np.random.default_rng(3), size, 64, flip=False)
        d = win.data[size]
        idx = np.random.default_rng(3).integers(0, len(d["ply"]), 64)
        mover = d["ply"][idx] % 2 + 1
        fin = d["final"][idx]
        want = np.where(fin == mover[:, None, None], 1, np.where(fin > 0, -1, 0))
        np.testing.assert_array_equal(b.ownership, want)
        # planes 0 / 1 are the side to move's and the opponent's stones: all on their own final cells
        assert (b.ownership[b.planes[:, 0] > 0] == 1).all() and (b.ownership[b.planes[:, 1] > 0] == -1).all()
        flipped = win.sample(np.random.default_rng(3), size, 64, flip=False)
        flip_batch(flipped, np.ones(64, bool))
        np.testing.assert_array_equal(flipped.ownership, b.ownership[..., ::-1])
        assert (flipped.ownership[flipped.planes[:, 0] > 0] == 1).all()
    plain = ReplayWindow()
    plain.update(paths)
    assert plain.sample(np.random.default_rng(0), plain.sizes[0], 4).ownership is None


def _numpy_ownership_loss(logits: np.ndarray, own: np.ndarray) -> float:
    """Per-cell cross-entropy over (mover, opponent, empty), averaged over each board, summed."""
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    cls = np.where(own > 0, 0, np.where(own < 0, 1, 2))
    picked = np.take_along_axis(logp, cls[:, None], 1)[:, 0]
    return float(-picked.reshape(len(own), -1).mean(1).sum())


@pytest.mark.parametrize("weight", [0.5, 1.5])
def test_the_ownership_loss_matches_a_numpy_reference_and_adds_to_the_total(tmp_path, weight):
    assert OWNERSHIP_CLASSES[0].startswith("the side to move")
    win = ReplayWindow(ownership=True)
    win.update(_shards(tmp_path))
    tr = Trainer(TrainConfig(preset="tiny", ownership_weight=weight, precision="fp32"), str(tmp_path / "t"))
    tr.model.eval()
    tr.own_head.eval()
    for size in win.sizes:
        b = win.sample(np.random.default_rng(5), size, 16)
        with torch.no_grad():
            base = losses(tr.model, b, "cpu", 1.5)
            got = losses(tr.model, b, "cpu", 1.5, own_head=tr.own_head, ownership_weight=weight)
            logits = tr.own_head(tr.model.trunk(torch.from_numpy(b.planes))).numpy()
        assert logits.shape == (16, 3, *size)
        want = _numpy_ownership_loss(logits.astype(np.float64), b.ownership)
        assert got[5].item() == pytest.approx(want, rel=1e-5) and base[5].item() == 0.0
        assert got[0].item() == pytest.approx(base[0].item() + weight * want, rel=1e-5)
        assert got[1].item() == pytest.approx(base[1].item(), rel=1e-6)  # the heads read the same trunk
        # a head that knows the answer scores ~0; one that predicts its opposite scores far more
        right = np.eye(3)[np.where(b.ownership > 0, 0, np.where(b.ownership < 0, 1, 2))].transpose(0, 3, 1, 2)
        assert _numpy_ownership_loss(30 * right, b.ownership) < 1e-6 * 16
        assert _numpy_ownership_loss(-30 * right, b.ownership) > 10 * 16


def test_the_canvas_carries_the_targets_and_the_head_and_gives_the_per_size_loss(tmp_path):
    """The padded step's ownership (``TrainConfig.padded``): the canvas batch holds each size's
    targets on its board and empty off it; the canvas net built with the head gives the
    per-size loss (eval mode: the same affine batch norm), and one built without it refuses."""
    win = ReplayWindow(ownership=True)
    win.update(_shards(tmp_path))
    tr = Trainer(TrainConfig(preset="tiny", ownership_weight=1.5, precision="fp32"), str(tmp_path / "t"))
    tr.model.eval()
    tr.own_head.eval()
    parts = [win.sample(np.random.default_rng(5), size, 8) for size in win.sizes]
    batch, mask = canvas_batch(parts, side=None)
    i = 0
    for b in parts:
        np.testing.assert_array_equal(batch.ownership[i:i + 8, :b.height, :b.width], b.ownership)
        assert not batch.ownership[i:i + 8][mask[i:i + 8, 0] == 0].any()
        i += 8
    kw = dict(own_head=tr.own_head, ownership_weight=1.5)
    with torch.no_grad():
        want = [losses(tr.model, b, "cpu", 1.5, **kw) for b in parts]
        got = losses(CanvasNet(tr.model, tr.own_head), batch, "cpu", 1.5, mask=mask, groups=len(parts), **kw)
    assert got[5].item() == pytest.approx(sum(w[5].item() for w in want), rel=1e-5) and got[5].item() > 0
    assert got[0].item() == pytest.approx(sum(w[0].item() for w in want), rel=1e-5)
    with pytest.raises(ValueError, match="carries no ownership head"):
        losses(CanvasNet(tr.model), batch, "cpu", 1.5, mask=mask, **kw)


def test_the_head_trains_resumes_exactly_and_stays_out_of_checkpoints(tmp_path, caplog):
    paths = _shards(tmp_path / "d")
    cfg = TrainConfig(preset="tiny", steps=24, per_size=8, checkpoint_every=6, ownership_weight=1.5)
    a = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), train=cfg), quiet=True)
    train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "b"), stop_after=12, train=cfg), quiet=True)
    b = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "b"), resume=True, train=cfg), quiet=True)
    assert a["steps"] == b["steps"] == 24 and "ownership_loss" in a
    ma, _, _ = load_checkpoint(a["checkpoint"])
    mb, _, _ = load_checkpoint(b["checkpoint"])
    for (k, x), (_, y) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(x, y), k
    sa = torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)
    sb = torch.load(tmp_path / "b" / "train_state.pt", weights_only=True)
    for k, x in sa["own_head"]["model"].items():
        assert torch.equal(x, sb["own_head"]["model"][k]), k
    ckpt = torch.load(a["checkpoint"], weights_only=True)
    assert set(ckpt["state_dict"]) == set(ma.state_dict())  # the head is training-only
    # a run without the head resumes from this state, and one with it from a state without
    plain = TrainConfig(preset="tiny", steps=30, per_size=8, checkpoint_every=6)
    train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), resume=True, train=plain), quiet=True)
    with caplog.at_level("WARNING", logger="nets.train"):
        tr = Trainer(TrainConfig(preset="tiny", per_size=8, ownership_weight=1.0), str(tmp_path / "a"))
        tr.load()
    assert "holds no ownership head" in caplog.text and tr.step == 30
    win = ReplayWindow(ownership=True)
    win.update(paths)
    before = {k: v.clone() for k, v in tr.own_head.state_dict().items()}
    assert tr.train_step(win)["ownership_loss"] > 0
    assert any(not torch.equal(before[k], v) for k, v in tr.own_head.state_dict().items())


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True, "1"])
def test_bad_ownership_settings_are_refused(bad):
    with pytest.raises(ValueError, match="ownership_weight"):
        TrainConfig(ownership_weight=bad)


def test_a_shard_whose_games_do_not_replay_is_skipped_by_name(tmp_path):
    write_shard(tmp_path, "a", 1, 6, ((6, 7),))
    write_shard(tmp_path, "b", 2, 6, ((6, 7),))
    bad = list_shards([tmp_path])[0]
    with h5py.File(bad, "a") as f:
        moves = f["games/moves"][()]
        moves[0, 0] = 9  # off a 6x7 board
        f["games/moves"][...] = moves
    data = read_shard(bad)
    games = data.pop("games")
    with pytest.raises(ShardValueError, match="does not replay"):
        final_boards(bad, data[(6, 7)], games, 6, 7)
    warnings = []
    win = ReplayWindow(warn=warnings.append, ownership=True)
    win.update(list_shards([tmp_path]))
    assert win.window_samples > 0 and any(bad in w and "does not replay" in w for w in warnings)
    plain = ReplayWindow(warn=warnings.append)  # without the target the shard still trains
    plain.update(list_shards([tmp_path]))
    assert plain.window_samples > win.window_samples
