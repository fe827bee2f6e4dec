"""nets.train: window rule, flips, schedule, accumulation, overfitting, exact resume, bad data."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import c4fast
from nets.checkpoint import load_checkpoint
from nets.replay import Batch, ReplayWindow, WindowConfig, flip_batch
from nets.train import TrainConfig, TrainRunConfig, Trainer, losses, train
from nets.shards import ShardWriter, list_shards, read_shard

ROOT = Path(__file__).resolve().parents[1]


def make_shards(out, seed=0, games=12, sizes=((6, 7), (9, 9)), per_shard=60, fast_every=0, surprise=False):
    """Real shards from random games (policy: one-hot on the move played; every weight 1,
    or with `fast_every` k > 0, weight 0 at the plies p with p % k == 1; with `surprise`,
    full-search samples get a random surprise in [0, 2), a tenth of them exactly 0)."""
    rng = np.random.default_rng(seed)
    w = ShardWriter(str(out), f"s{seed}", samples_per_shard=per_shard)
    for i in range(games):
        h, wd = sizes[i % len(sizes)]
        forb = (int(rng.integers(h)), int(rng.integers(wd)))
        g = c4fast.Game(h, wd, forb)
        samples = []
        while g.result is None:
            s = g.state[0]
            legal = g.legal_moves()
            pol = np.zeros((h, wd), np.float32)
            best = legal[int(rng.integers(len(legal)))]
            pol[int(s["top"][best]), best] = 1.0  # a learnable, deterministic-looking target
            samples.append({"stones": s["stones"].copy(), "forbidden": s["forbidden"].copy(),
                            "last": s["last"].copy(), "ply": int(s["ply"]), "policy": pol,
                            "policy_weight": 0.0 if fast_every and s["ply"] % fast_every == 1 else 1.0,
                            "root_wdl": np.ones(3, np.float32) / 3,
                            "game_id": i + 1000 * seed, "model_version": 0})
            if surprise and samples[-1]["policy_weight"] > 0:
                samples[-1]["surprise"] = 0.0 if rng.random() < 0.1 else float(2 * rng.random())
            g.play(best)
        for smp in samples:
            tm = smp["ply"] % 2 + 1
            smp["outcome"] = 1 if g.result == 0 else (0 if g.result == tm else 2)
        w.add_game({"game_id": i + 1000 * seed, "height": h, "width": wd, "forbidden": forb,
                    "moves": g.moves, "num_moves": len(g.moves), "result": g.result,
                    "model_version": 0}, samples)
    w.flush()
    return list_shards([out])


def test_window_formula():
    wc = WindowConfig()
    assert wc.size(0) == 0 and wc.size(100_000) == 100_000 and wc.size(249_999) == 249_999
    assert wc.size(250_000) == 250_000
    expect = 250_000 * (1 + 0.4 * ((1_000_000 / 250_000) ** 0.75 - 1) / 0.75)
    assert wc.size(1_000_000) == int(expect)
    assert wc.size(10_000_000) < 10_000_000 and wc.size(10_000_000) > wc.size(1_000_000)


def test_lr_schedule():
    cfg = TrainConfig(steps=1000, lr=0.03)
    assert cfg.lr_at(0) == pytest.approx(0.01) and cfg.lr_at(49) == pytest.approx(0.01)
    assert cfg.lr_at(50) == 0.03 and cfg.lr_at(719) == 0.03
    assert cfg.lr_at(720) == pytest.approx(0.003) and cfg.lr_at(999) == pytest.approx(0.003)
    free = TrainConfig(steps=0, lr=0.03, warmup_steps=10)
    assert free.lr_at(5) == pytest.approx(0.01) and free.lr_at(10_000) == 0.03
    assert free.lr_at(10_000, progress=0.99) == 0.03  # no --follow-anneal: no drop
    ann = TrainConfig(steps=0, lr=0.03, warmup_steps=10, follow_anneal=0.75)
    assert ann.lr_at(10_000) == 0.03 and ann.lr_at(10_000, progress=0.7499) == 0.03
    assert ann.lr_at(10_000, progress=0.75) == pytest.approx(0.003)
    assert ann.lr_at(5, progress=0.9) == pytest.approx(0.01)  # warm-up first
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="follow_anneal"):
            TrainConfig(follow_anneal=bad)
    with pytest.raises(ValueError, match="--anneal-fraction"):
        TrainConfig(steps=100, follow_anneal=0.5)
    with pytest.raises(ValueError, match="--run-seconds"):
        TrainRunConfig(follow="d", train=ann)
    with pytest.raises(ValueError, match="--follow"):  # a fixed-data run never anneals by time
        train(["d"], TrainRunConfig(train=ann, run_seconds=100.0))
    TrainRunConfig(train=ann)  # a template without --follow (the loop's presets) is fine
    run = TrainRunConfig(follow="d", train=ann, run_seconds=100.0, run_elapsed=40.0)
    assert run.progress(35.0) == pytest.approx(0.75) and TrainRunConfig().progress(1e9) is None
    with pytest.raises(ValueError, match="--run-elapsed"):
        TrainRunConfig(run_elapsed=float("nan"))


def test_follow_anneal_drops_the_lr_for_the_rest_of_a_resumed_run(tmp_path):
    """A follow-mode start that begins past --follow-anneal of the planned run (a resumed
    loop) trains at lr/10 from its first step after the warm-up; the same start without
    the switch trains at the full rate."""
    make_shards(tmp_path / "f", games=4, sizes=((6, 7),))
    for anneal, lr in ((0.5, 0.002), (0.0, 0.02)):
        cfg = TrainConfig(preset="tiny", per_size=8, ratio=2.0, checkpoint_every=1000, warmup_steps=0,
                          lr=0.02, follow_anneal=anneal)
        s = train([], TrainRunConfig(out=str(tmp_path / f"o{anneal}"), follow=str(tmp_path / "f"), max_wait=0.5,
                                     poll=0.2, run_seconds=100.0, run_elapsed=60.0, train=cfg), quiet=True)
        assert s["steps"] > 0 and s["lr"] == pytest.approx(lr)


def test_flip_matches_the_mirrored_position(tmp_path):
    make_shards(tmp_path, games=6)
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    rng = np.random.default_rng(0)
    for size in win.sizes:
        b = win.sample(np.random.default_rng(0), size, 40, flip=False)
        # rebuild the same samples and mirror them through c4fast's own mirror kernel
        d = win.data[size]
        idx = np.random.default_rng(0).integers(0, len(d["ply"]), 40)
        orig = Batch(b.height, b.width, b.planes.copy(), b.policy.copy(), b.policy_weight,
                     b.outcome, b.legal.copy())
        flip_batch(b, np.ones(40, bool))
        from nets.shards import rebuild_positions
        from c4fast import bitboard as bb
        recs = rebuild_positions({f: d[f][idx] for f in d}, *size)
        for i in range(40):
            m = np.zeros(1, bb.POSITION_DTYPE)
            bb.mirror_into(recs[i], m[0])
            planes = c4fast.Game.from_state(m).planes()
            np.testing.assert_array_equal(b.planes[i], planes)
            np.testing.assert_array_equal(b.policy[i], orig.policy[i][:, ::-1])
            np.testing.assert_array_equal(b.legal[i], planes[2] > 0)
        _ = rng


def test_opponent_reply_target_is_the_next_sample_of_the_same_game(tmp_path):
    """Against a reference built from the shard files by (game_id, ply): the auxiliary
    target of a sample is the search policy one ply later in its game, weighted by that
    sample's policy_weight; a game's last sample has weight 0; a flip mirrors it too.
    Small shards, so games of one size and its window are spread over several files."""
    shards = make_shards(tmp_path, games=10, per_shard=25, fast_every=3)
    ref = {}
    for path in shards:
        for key, g in read_shard(path).items():
            if key != "games":
                for i in range(len(g["ply"])):
                    ref[(int(g["game_id"][i]), int(g["ply"][i]))] = (g["policy"][i], float(g["policy_weight"][i]))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    ended = weighted0 = 0
    for size in win.sizes:
        d = win.data[size]
        for seed in range(3):
            b = win.sample(np.random.default_rng(seed), size, 64, flip=False)
            idx = np.random.default_rng(seed).integers(0, len(d["ply"]), 64)
            for i, j in enumerate(idx):
                nxt = ref.get((int(d["game_id"][j]), int(d["ply"][j]) + 1))
                if nxt is None:
                    ended += 1
                    assert b.opp_weight[i] == 0
                else:
                    weighted0 += nxt[1] == 0
                    assert b.opp_weight[i] == nxt[1]
                    np.testing.assert_array_equal(b.opp_policy[i], nxt[0])
            mirrored = win.sample(np.random.default_rng(seed), size, 64, flip=False)
            flip_batch(mirrored, np.ones(64, bool))
            np.testing.assert_array_equal(mirrored.opp_policy, b.opp_policy[..., ::-1])
    assert ended > 0 and weighted0 > 0  # both kinds of zero weight were exercised


def reference_probabilities(weights, surprise, share):
    """Policy-surprise draw probabilities, sample by sample (docs: nets/replay.py)."""
    n = len(weights)
    full = [i for i in range(n) if weights[i] > 0]
    total = sum(surprise[i] for i in full)
    out = []
    for i in range(n):
        if weights[i] == 0 or share == 0 or total == 0:
            out.append(1 / n)
        else:
            out.append(len(full) / n * ((1 - share) / len(full) + share * surprise[i] / total))
    return np.array(out)


@pytest.mark.parametrize("share", [0.0, 0.5, 0.9])
def test_surprise_weighted_sampling_draws_in_proportion_to_surprise(tmp_path, share):
    """The window's draws follow the reference probabilities: full-search samples keep
    their total share, and within it a share goes by surprise; fast samples stay uniform."""
    from nets.replay import sampling_probabilities

    make_shards(tmp_path, games=6, sizes=((6, 7),), fast_every=3, surprise=True)
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    d = win.data[(6, 7)]
    want = reference_probabilities(d["policy_weight"].tolist(), d["surprise"].tolist(), share)
    got = sampling_probabilities(d["policy_weight"], d["surprise"], share)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.sum() == pytest.approx(1.0)
    fast = d["policy_weight"] == 0
    assert fast.any() and got[fast].sum() == pytest.approx(fast.mean())
    n_draws = 200_000
    rng = np.random.default_rng(5)
    idx = np.concatenate([win._draw(rng, (6, 7), 10_000, share) for _ in range(20)])
    freq = np.bincount(idx, minlength=len(want)) / n_draws
    np.testing.assert_allclose(freq, want, atol=4 * np.sqrt(want.max() / n_draws))
    if share > 0:  # samples with surprise 0 are drawn less than uniformly, never more
        zero = (~fast) & (d["surprise"] == 0)
        assert zero.any() and (freq[zero] < 1 / len(want)).all()
    # the batch is the drawn rows
    b = win.sample(np.random.default_rng(7), (6, 7), 64, flip=False, opponent=False, surprise=share)
    rows = win._draw(np.random.default_rng(7), (6, 7), 64, share)
    np.testing.assert_array_equal(b.policy, d["policy"][rows])


def test_surprise_weighting_trains_and_rejects_bad_shares(tmp_path):
    make_shards(tmp_path / "d", surprise=True)
    cfg = TrainConfig(preset="tiny", per_size=8, surprise_weight=0.5)
    tr = Trainer(cfg, str(tmp_path / "t"))
    win = ReplayWindow()
    win.update(list_shards([tmp_path / "d"]))
    for _ in range(3):
        out = tr.train_step(win)
    assert np.isfinite(out["loss"])
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="surprise_weight"):
            TrainConfig(preset="tiny", surprise_weight=bad)


def test_dropped_planes_are_never_seen_by_the_net_and_resume_checks_the_setting(tmp_path):
    """--drop-planes own_wins,opponent_wins (the threat-plane ablation): after training,
    the checkpointed net's outputs do not depend on those planes at all, while the other
    planes' weights did learn; resuming with another setting is refused; bad names too."""
    from c4fast.encode import PLANE_NAMES
    from nets.model import build_model

    make_shards(tmp_path / "d")
    out = tmp_path / "t"
    cfg = TrainConfig(preset="tiny", per_size=8, steps=6, checkpoint_every=6, drop_planes="own_wins, opponent_wins")
    assert cfg.dropped_planes() == [PLANE_NAMES.index("own_wins"), PLANE_NAMES.index("opponent_wins")]
    train([str(tmp_path / "d")], TrainRunConfig(train=cfg, out=str(out)), quiet=True)
    net, net_config, _ = load_checkpoint(str(sorted((out / "models").glob("model_*.pt"))[-1]))
    net.eval()
    w = net.input_conv.weight.detach()
    assert (w[:, cfg.dropped_planes()] == 0).all() and (w[:, 0] != 0).any()
    rng = np.random.default_rng(0)
    planes = torch.from_numpy((rng.random((16, c4fast.NUM_PLANES, 6, 7)) < 0.3).astype(np.float32))
    other = planes.clone()
    other[:, cfg.dropped_planes()] = torch.from_numpy(rng.random((16, 2, 6, 7)).astype(np.float32))
    with torch.no_grad():
        a, b = net(planes), net(other)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    base = build_model(net_config)  # a fresh net does see them (the test can fail)
    with torch.no_grad():
        assert not torch.allclose(base(planes)[0], base(other)[0])
    again = TrainRunConfig(train=dataclasses.replace(cfg, steps=12, drop_planes=""), out=str(out), resume=True)
    with pytest.raises(ValueError, match="drop-planes"):
        train([str(tmp_path / "d")], again, quiet=True)
    with pytest.raises(ValueError, match="unknown plane"):
        TrainConfig(preset="tiny", drop_planes="own_wins,threats")
    with pytest.raises(ValueError, match=r"reads only the first 9 planes, not \['odd_cells'\]"):
        TrainConfig(preset="tiny", drop_planes="own_wins,odd_cells")
    assert TrainConfig(preset="cpu_small_parity", drop_planes="odd_cells").dropped_planes() == [9]


def test_opponent_policy_head_trains_resumes_and_stays_out_of_the_checkpoint(tmp_path):
    make_shards(tmp_path / "d", games=8, sizes=((6, 7),))
    cfg = TrainConfig(preset="tiny", steps=120, per_size=32, lr=0.05, checkpoint_every=60, opp_policy_weight=0.5)
    first = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), stop_after=1, train=cfg),
                  quiet=True)
    a = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), resume=True, train=cfg), quiet=True)
    assert a["steps"] == 120 and a["opp_policy_loss"] < 0.7 * first["opp_policy_loss"], (first, a)
    # the inference checkpoint holds the plain net: the same keys as one trained without the head
    plain = train([str(tmp_path / "d")], TrainRunConfig(
        out=str(tmp_path / "p"), train=dataclasses.replace(cfg, steps=2, opp_policy_weight=0.0)), quiet=True)
    assert plain["opp_policy_loss"] == 0.0
    ma, _, _ = load_checkpoint(a["checkpoint"])
    mp, _, _ = load_checkpoint(plain["checkpoint"])
    assert ma.state_dict().keys() == mp.state_dict().keys()
    # exact resume with the head (its weights and momenta are in the training state)
    short = dataclasses.replace(cfg, steps=24, checkpoint_every=6)
    x = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "x"), train=short), quiet=True)
    train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "y"), stop_after=12, train=short), quiet=True)
    y = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "y"), resume=True, train=short), quiet=True)
    mx, _, _ = load_checkpoint(x["checkpoint"])
    my, _, _ = load_checkpoint(y["checkpoint"])
    for (k, u), (_, v) in zip(mx.state_dict().items(), my.state_dict().items()):
        assert torch.equal(u, v), k
    # a state trained with the head does not resume without it, and the reverse
    with pytest.raises(ValueError, match="opponent-policy head"):
        train([str(tmp_path / "d")], TrainRunConfig(
            out=str(tmp_path / "y"), resume=True, train=dataclasses.replace(short, opp_policy_weight=0.0)), quiet=True)
    with pytest.raises(ValueError, match="opponent-policy head"):
        train([str(tmp_path / "d")], TrainRunConfig(
            out=str(tmp_path / "p"), resume=True, train=dataclasses.replace(cfg, steps=4)), quiet=True)
    with pytest.raises(ValueError, match="opp_policy_weight"):
        TrainConfig(opp_policy_weight=float("nan"))


def test_bench_runs_on_the_cpu_with_and_without_the_opponent_head():
    from nets.train import bench

    for w in (0.0, 0.15):
        out = bench("tiny", 2, 4, [(6, 7)], opp_policy_weight=w)
        assert out["samples_per_s"] > 0 and out["opp_policy_weight"] == w


def test_overfits_a_small_dataset(tmp_path):
    make_shards(tmp_path, games=4, sizes=((6, 7),))
    cfg = TrainConfig(preset="tiny", steps=250, per_size=32, lr=0.05, checkpoint_every=1000)
    summary = train([str(tmp_path)], TrainRunConfig(out=str(tmp_path / "run"), train=cfg), quiet=True)
    first = None
    tr = Trainer(cfg, str(tmp_path / "probe"))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    with torch.no_grad():
        tr.model.eval()
        b = win.sample(np.random.default_rng(1), (6, 7), 64, flip=False)
        first = losses(tr.model, b, "cpu", 1.5)[0].item() / 64
        trained, _, _ = load_checkpoint(summary["checkpoint"])
        last = losses(trained, b, "cpu", 1.5)[0].item() / 64
    assert last < 0.5 * first, (first, last)


def test_per_size_accumulation_equals_one_combined_batch(tmp_path):
    make_shards(tmp_path, games=4, sizes=((6, 7),))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    torch.manual_seed(0)
    from nets.config import get_preset
    from nets.model import build_model

    model = build_model(get_preset("tiny")).eval()  # BatchNorm frozen: the check is about accumulation
    b = win.sample(np.random.default_rng(0), (6, 7), 24, flip=True)
    model.zero_grad()
    (losses(model, b, "cpu", 1.5)[0] / 24).backward()
    combined = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    for lo, hi in ((0, 8), (8, 16), (16, 24)):
        part = Batch(6, 7, b.planes[lo:hi], b.policy[lo:hi], b.policy_weight[lo:hi], b.outcome[lo:hi],
                     b.legal[lo:hi])
        (losses(model, part, "cpu", 1.5)[0] / 24).backward()
    for g1, p in zip(combined, model.parameters()):
        torch.testing.assert_close(p.grad, g1, rtol=1e-5, atol=1e-6)


def test_resume_gives_identical_weights(tmp_path):
    make_shards(tmp_path / "d", games=8)
    cfg = TrainConfig(preset="tiny", steps=24, per_size=8, checkpoint_every=6)
    a = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "a"), train=cfg), quiet=True)
    train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "b"), stop_after=12, train=cfg), quiet=True)
    b = train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / "b"), resume=True, train=cfg), quiet=True)
    assert a["steps"] == b["steps"] == 24 and b["steps_this_run"] == 12
    ma, _, _ = load_checkpoint(a["checkpoint"])
    mb, _, _ = load_checkpoint(b["checkpoint"])
    for (k, x), (_, y) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(x, y), k


def test_corrupt_shard_is_skipped_with_a_warning_and_wrong_schema_is_an_error(tmp_path):
    make_shards(tmp_path, games=4)
    bad = tmp_path / "broken.h5"
    good = list_shards([tmp_path])[0]
    bad.write_bytes(Path(good).read_bytes()[:300])  # truncated copy
    warnings = []
    win = ReplayWindow(warn=warnings.append)
    win.update(list_shards([tmp_path]))
    assert win.window_samples > 0 and any("broken.h5" in w for w in warnings)
    import h5py

    with h5py.File(good, "a") as f:
        f.attrs["schema_version"] = 7
    proc = subprocess.run([sys.executable, "-m", "nets.train", str(tmp_path), "--steps", "2",
                           "--preset", "tiny", "--out", str(tmp_path / "o")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "schema version 7" in proc.stderr


def test_trainer_checkpoint_is_picked_up_by_selfplay(tmp_path):
    make_shards(tmp_path / "d", games=4)
    proc = subprocess.run([sys.executable, "-m", "nets.train", str(tmp_path / "d"), "--steps", "7",
                           "--preset", "tiny", "--out", str(tmp_path / "t"), "--checkpoint-every", "7"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["steps"] == 7
    sp = subprocess.run([sys.executable, "-m", "selfplay.run", "--model", str(tmp_path / "t" / "models"),
                         "--out", str(tmp_path / "sp"), "--max-games", "2", "--games-per-worker", "2",
                         "--workers", "1", "--full-playouts", "16", "--fast-playouts", "4",
                         "--sizes", "6x7"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert sp.returncode == 0, sp.stderr
    versions = set()
    for p in list_shards([tmp_path / "sp"]):
        for k, g in read_shard(p).items():
            if k != "games":
                versions.update(g["model_version"].tolist())
    assert versions == {7}


def test_follow_mode_holds_the_ratio_and_stops_when_idle(tmp_path):
    shards = make_shards(tmp_path / "f", games=4, sizes=((6, 7),))
    n = sum(len(g["ply"]) for p in shards for k, g in read_shard(p).items() if k != "games")
    cfg = TrainConfig(preset="tiny", per_size=8, ratio=2.0, checkpoint_every=1000)
    s = train([], TrainRunConfig(out=str(tmp_path / "o"), follow=str(tmp_path / "f"), max_wait=1.0, poll=0.2,
                                 train=cfg), quiet=True)
    assert s["samples_trained"] <= 2.0 * n and s["samples_trained"] > 2.0 * n - 8


def _numpy_value_loss(val_logits: np.ndarray, outcome: np.ndarray, root_wdl: np.ndarray, mix: float) -> float:
    """Reference: summed cross-entropy of softmax(val) against (1-mix)*onehot + mix*root_wdl."""
    v = val_logits.astype(np.float64)
    logp = v - v.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    target = (1 - mix) * np.eye(3)[outcome] + mix * root_wdl.astype(np.float64)
    return float(-(target * logp).sum())


def test_value_target_mixes_the_outcome_with_the_search_value(tmp_path):
    """value_mix m: the value loss is the CE against (1-m)*onehot(outcome) + m*root_wdl
    (numpy reference, random nets and root WDLs); m = 0 is the plain outcome CE."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from nets.config import get_preset
    from nets.model import build_model

    make_shards(tmp_path, games=4, sizes=((6, 7),))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    base = win.sample(np.random.default_rng(0), (6, 7), 16, flip=False)
    np.testing.assert_allclose(base.root_wdl, 1 / 3)  # make_shards writes uniform root WDLs
    torch.manual_seed(0)
    model = build_model(get_preset("tiny")).eval()

    @settings(max_examples=25, deadline=None)
    @given(mix=st.floats(0.0, 1.0), seed=st.integers(0, 2**31 - 1))
    def check(mix, seed):
        rng = np.random.default_rng(seed)
        wdl = rng.dirichlet(np.ones(3), 16).astype(np.float32)
        b = Batch(6, 7, base.planes, base.policy, base.policy_weight, base.outcome, base.legal, wdl)
        with torch.no_grad():
            _, val = model(torch.from_numpy(b.planes))
            total, pol, v, _, _ = losses(model, b, "cpu", 1.5, mix)
        ref = _numpy_value_loss(val.numpy(), b.outcome, wdl, mix)
        assert abs(v.item() - ref) <= 1e-4 * max(1.0, abs(ref))
        assert abs(total.item() - (1.5 * v.item() + pol.item())) <= 1e-4 * max(1.0, abs(total.item()))
        if mix == 0.0:
            assert v.item() == losses(model, b, "cpu", 1.5)[2].item()

    check()
    with pytest.raises(ValueError, match="value_mix"):
        TrainConfig(value_mix=1.5)
    with pytest.raises(ValueError, match="root_wdl"):
        losses(model, Batch(6, 7, base.planes, base.policy, base.policy_weight, base.outcome, base.legal),
               "cpu", 1.5, 0.5)
