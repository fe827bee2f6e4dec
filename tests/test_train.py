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
from conftest import contiguous_trainer
from nets.checkpoint import load_checkpoint
from nets.replay import Batch, ReplayWindow, WindowConfig, flip_batch
from nets.train import TrainConfig, TrainRunConfig, Trainer, losses, train
from nets.shards import ShardWriter, list_shards, read_shard

ROOT = Path(__file__).resolve().parents[1]


def make_shards(out, seed=0, games=12, sizes=((6, 7), (9, 9)), per_shard=60, fast_every=0):
    """Real shards from random games (policy: one-hot on the move played; every weight 1,
    or with `fast_every` k > 0, weight 0 at the plies p with p % k == 1)."""
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


def test_retired_switches_load_from_old_config_files_only_when_off():
    """Configs written before the not-kept switches were removed (a run's loop.json, a
    child's JSON) still load when the switches are off; an ablation's config is refused."""
    from c4fast.cli import ConfigError, config_from_dict, config_to_dict

    old = config_to_dict(TrainRunConfig())
    old.update(run_seconds=0.0, run_elapsed=0.0)
    old["train"].update(opp_policy_weight=0.0, surprise_weight=0.0, drop_planes="", follow_anneal=0.0,
                        fast_value_weight=1.0)
    assert config_from_dict(TrainRunConfig, old) == TrainRunConfig()
    with pytest.raises(ConfigError, match="fast_value_weight: the switch was removed"):
        config_from_dict(TrainRunConfig, {**old, "train": {**old["train"], "fast_value_weight": 0.0}})
    old["train"]["surprise_weight"] = 0.5
    with pytest.raises(ConfigError, match="surprise_weight: the switch was removed"):
        config_from_dict(TrainRunConfig, old)


@pytest.mark.parametrize("head", [False, True])
def test_a_training_state_written_with_the_opponent_head_key_resumes(tmp_path, head):
    """train_state.pt files written before the opponent-policy head was removed carry an
    ``opp_head`` key (None, or the head's weights with its momenta after the net's in the
    optimizer): they resume as the plain net, continuing its step and weights."""
    make_shards(tmp_path / "d", games=4, sizes=((6, 7),))
    cfg = TrainConfig(preset="tiny", steps=8, per_size=8, checkpoint_every=4)
    out = tmp_path / "t"
    train([str(tmp_path / "d")], TrainRunConfig(out=str(out), stop_after=4, train=cfg), quiet=True)
    path = out / "train_state.pt"
    state = torch.load(path, weights_only=True)
    state["opp_head"] = None
    if head:
        extra = torch.zeros(3, 2)
        state["opp_head"] = {"conv_out.weight": extra}
        n = len(state["optimizer"]["param_groups"][0]["params"])
        state["optimizer"]["param_groups"][0]["params"].append(n)
        state["optimizer"]["state"][n] = {"momentum_buffer": extra}
    torch.save(state, path)
    tr = Trainer(cfg, str(out))
    tr.load()
    assert tr.step == 4
    for k, v in state["model"].items():
        assert torch.equal(tr.model.state_dict()[k], v), k
    s = train([str(tmp_path / "d")], TrainRunConfig(out=str(out), resume=True, train=cfg), quiet=True)
    assert s["steps"] == 8 and s["steps_this_run"] == 4


def test_bench_runs_on_the_cpu():
    from nets.train import bench

    out = bench("tiny", 2, 4, [(6, 7)])
    assert out["samples_per_s"] > 0 and out["steps"] == 2 and out["ownership_weight"] == 0
    out = bench("tiny", 2, 4, [(6, 7), (9, 10)], ownership_weight=1.5, padded=True)
    assert out["samples_per_s"] > 0 and out["ownership_weight"] == 1.5 and out["sizes"] == 2


def test_the_bench_windows_ownership_targets_are_each_games_final_board():
    """Seen from the side to move, every stone of a sample stays on its game's final board
    with the same owner (+1 own, -1 the opponent's), and the game went on after it."""
    from nets.train import synthetic_window

    assert "final" not in synthetic_window([(6, 7)], seed=4).data[(6, 7)]
    win = synthetic_window([(6, 7), (9, 10)], seed=4, ownership=True)
    for (h, w), d in win.data.items():
        assert d["final"].shape == (len(d["ply"]), h, w)
        b = win.sample(np.random.default_rng(0), (h, w), 256, flip=False)
        own, opp, cells = b.planes[:, 0] > 0, b.planes[:, 1] > 0, b.planes[:, 3] > 0
        assert np.all(b.ownership[own] == 1.0) and np.all(b.ownership[opp] == -1.0)
        assert np.all(b.ownership[~cells] == 0.0)  # the forbidden cell holds no stone
        stones = np.abs(b.ownership).sum(axis=(1, 2))
        assert np.all(stones >= own.sum(axis=(1, 2)) + opp.sum(axis=(1, 2)) + 1)  # the game went on


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
    sp = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--model", str(tmp_path / "t" / "models"),
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
            total, pol, v, _, _, _ = losses(model, b, "cpu", 1.5, mix)
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


@pytest.mark.parametrize("sizes,own", [(((9, 10),), 0.0), (((6, 7), (9, 10), (12, 12)), 0.0),
                                       (((6, 7), (9, 10), (12, 12)), 1.5)])
def test_a_padded_step_equals_the_per_size_step(tmp_path, sizes, own):
    """TrainConfig.padded: on a window of one size or several the canvas step draws the same
    samples and gives the same weights, BN statistics and losses as the per-size step
    (batch-norm statistics per size; issues 33 and 34), the ownership head's too (issue 35)."""
    make_shards(tmp_path, games=6, sizes=sizes, per_shard=40)
    win = ReplayWindow(ownership=own > 0)
    win.update(list_shards([tmp_path]))
    out = []
    for padded in (False, True):
        tr = Trainer(TrainConfig(preset="cpu_small", per_size=24, seed=3, device="cpu", padded=padded,
                                 precision="fp32",  # the canvas maths, exactly (bf16 would blur both)
                                 ownership_weight=own), str(tmp_path / f"t{padded}"))
        contiguous_trainer(tr)  # one layout for both (oneDNN's channels_last kernels round differently per shape)
        metrics = [tr.train_step(win) for _ in range(2)]
        weights = dict(tr.model.state_dict())
        if own:
            weights.update({f"own.{k}": v for k, v in tr.own_head.state_dict().items()})
        out.append((metrics, weights))
    (m_ref, w_ref), (m_pad, w_pad) = out
    for a, b in zip(m_ref, m_pad):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6) and a["sizes"] == b["sizes"] == len(sizes)
        if own:
            assert a["ownership_loss"] == pytest.approx(b["ownership_loss"], rel=1e-5) and a["ownership_loss"] > 0
    assert set(w_pad) == set(w_ref) and any(k.startswith("own.") for k in w_ref) == (own > 0)
    for k in w_ref:
        torch.testing.assert_close(w_pad[k].float(), w_ref[k].float(), rtol=1e-4, atol=1e-5, msg=k)


@pytest.mark.parametrize("padded", [False, True])
def test_the_channels_last_step_equals_the_contiguous_one(tmp_path, padded):
    """The trainer keeps its net and inputs channels_last on every device and precision (the
    CPU's fp32 step too, for speed): a layout, not maths. Two fp32 steps give the same
    losses and weights as the same steps in the contiguous layout."""
    make_shards(tmp_path, games=6, sizes=((6, 7), (9, 10), (12, 12)), per_shard=40)
    win = ReplayWindow(ownership=True)
    win.update(list_shards([tmp_path]))
    out = []
    for channels_last in (True, False):
        tr = Trainer(TrainConfig(preset="cpu_small", per_size=24, seed=3, device="cpu", padded=padded,
                                 precision="fp32", ownership_weight=1.5), str(tmp_path / f"t{channels_last}"))
        conv = next(m for m in tr.model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3))
        assert tr.channels_last and conv.weight.is_contiguous(memory_format=torch.channels_last)
        if not channels_last:
            contiguous_trainer(tr)
        metrics = [tr.train_step(win) for _ in range(2)]
        out.append((metrics, {**tr.model.state_dict(), **{f"own.{k}": v for k, v in tr.own_head.state_dict().items()}}))
    (m_cl, w_cl), (m_ref, w_ref) = out
    # fp32 rounding apart (oneDNN picks other kernels per layout and shape: weights measured up to
    # 4e-5 apart after two steps), the same; a layout bug (a wrong permutation) is off by O(1)
    for a, b in zip(m_cl, m_ref):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-5)
    for k in w_ref:
        torch.testing.assert_close(w_cl[k].float(), w_ref[k].float(), rtol=1e-3, atol=2e-4, msg=k)


def test_a_padded_step_trains_every_size_in_one_pass(tmp_path):
    make_shards(tmp_path, games=8, sizes=((6, 7), (9, 9), (12, 10), (10, 12)))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    tr = Trainer(TrainConfig(preset="tiny", per_size=8, seed=0, device="cpu", padded=True, lr=0.05),
                 str(tmp_path / "t"))
    first = tr.train_step(win)
    for _ in range(30):
        last = tr.train_step(win)
    assert first["sizes"] == 4 and last["loss"] < first["loss"] and np.isfinite(last["loss"])


def test_a_compiled_padded_step_trains_as_the_eager_one(tmp_path):
    """TrainConfig.compile: torch.compile'd canvas forward/backward gives the eager padded
    step's losses and weights (fp32), also after the window grows a size (a new batch size)."""
    make_shards(tmp_path / "a", games=4, sizes=((6, 7), (9, 9)), per_shard=40)
    make_shards(tmp_path / "b", games=4, sizes=((12, 10),), per_shard=40)
    out = []
    for compiled in (False, True):
        win = ReplayWindow()
        win.update(list_shards([tmp_path / "a"]))
        tr = Trainer(TrainConfig(preset="tiny", per_size=8, seed=5, device="cpu", padded=True, compile=compiled,
                                 precision="fp32"), str(tmp_path / f"t{compiled}"))
        metrics = [tr.train_step(win) for _ in range(2)]
        win.update(list_shards([tmp_path / "a", tmp_path / "b"]))
        metrics += [tr.train_step(win) for _ in range(2)]
        out.append((metrics, tr.model.state_dict()))
    (m_ref, w_ref), (m_c, w_c) = out
    assert [m["sizes"] for m in m_c] == [2, 2, 3, 3]
    for a, b in zip(m_ref, m_c):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-5)
    for k in w_ref:
        torch.testing.assert_close(w_c[k].float(), w_ref[k].float(), rtol=1e-3, atol=1e-4, msg=k)
    with pytest.raises(ValueError, match="padded"):
        TrainConfig(compile=True)


def test_a_warm_up_compiles_the_padded_step_and_changes_nothing(tmp_path):
    """Trainer.warm_up: the compiled padded step for the run's sizes before any data; the weights,
    batch-norm statistics and gradients stay as a fresh trainer's, the steps that follow compile
    nothing more and train as the eager step does (fp32)."""
    from torch._dynamo.utils import counters

    sizes = ((6, 7), (9, 9))
    make_shards(tmp_path, games=4, sizes=sizes, per_shard=40)
    win = ReplayWindow(ownership=True)
    win.update(list_shards([tmp_path]))
    cfg = TrainConfig(preset="tiny", per_size=8, seed=5, device="cpu", padded=True, precision="fp32",
                      value_mix=0.5, value_distance=1.0, ownership_weight=1.5)
    eager = Trainer(cfg, str(tmp_path / "eager"))
    warm = Trainer(dataclasses.replace(cfg, compile=True), str(tmp_path / "warm"))
    assert eager.warm_up(sizes) == 0.0  # nothing to compile
    assert warm.warm_up(sizes) > 0.0
    for fresh, got in ((eager.model, warm.model), (eager.own_head, warm.own_head)):
        ref = fresh.state_dict()
        for k, v in got.state_dict().items():
            assert torch.equal(v, ref[k]), k
        assert all(p.grad is None for p in got.parameters())
    graphs = counters["stats"]["unique_graphs"]
    m_warm = [warm.train_step(win) for _ in range(2)]
    assert counters["stats"]["unique_graphs"] == graphs  # the warm-up compiled this layout
    m_eager = [eager.train_step(win) for _ in range(2)]
    for a, b in zip(m_eager, m_warm):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-5)
        assert a["ownership_loss"] == pytest.approx(b["ownership_loss"], rel=1e-4)
    w_ref = eager.model.state_dict()
    for k, v in warm.model.state_dict().items():
        torch.testing.assert_close(v.float(), w_ref[k].float(), rtol=1e-3, atol=1e-4, msg=k)


def test_a_compiled_follower_awaits_the_runs_sizes_before_its_first_step(tmp_path):
    """TrainRunConfig.sizes: a compiled padded trainer with static shapes (CUDA's) in follow
    mode takes its first step once every size of the run has samples (one batch layout), or
    SIZES_WAIT_S after the first data; without sizes, the compile or static shapes it does not
    wait."""
    from nets.train import SIZES_WAIT_S, _Session

    make_shards(tmp_path / "d", games=3, sizes=((6, 7),), per_shard=40)

    def session(sizes="6x7,9x9", compile=True):
        run = TrainRunConfig(out=str(tmp_path / f"t{sizes}{compile}"), follow=str(tmp_path / "d"), sizes=sizes,
                             train=TrainConfig(preset="tiny", per_size=8, device="cpu", padded=True,
                                               compile=compile))
        tr = Trainer(run.train, run.out)
        assert not tr.static_shapes  # the CPU compiles dynamic shapes: no layout to wait for
        assert _Session(tr, [], run, quiet=True).missing_sizes(1000.0) == []
        tr.static_shapes = compile  # as on CUDA, where each new batch layout compiles again
        return _Session(tr, [], run, quiet=True)

    s = session()
    assert s.missing_sizes(1000.0) == [(9, 9)] and s._wait_for_data(1000.0)
    assert s.missing_sizes(1000.0 + SIZES_WAIT_S - 1) == [(9, 9)]
    assert s.missing_sizes(1000.0 + SIZES_WAIT_S + 1) == [] and not s._wait_for_data(1000.0 + SIZES_WAIT_S + 2)
    for other in (session(sizes=""), session(compile=False), session(sizes="6x7")):
        assert other.missing_sizes(1000.0) == [] and not other._wait_for_data(1000.0)
    s = session()
    make_shards(tmp_path / "d", seed=1, games=3, sizes=((9, 9),), per_shard=40)
    s.refresh()
    assert s.missing_sizes(1000.0) == [] and not s._wait_for_data(1000.0)
    with pytest.raises(ValueError, match="board size"):
        TrainRunConfig(sizes="6x7,3x3")


def _numpy_value_loss(val_logits, outcome, root_wdl, mix, distance=0.0, plies_left=None, cells=None):
    """Reference: per-row CE of softmax(val) against (1-mix)*hard + mix*root_wdl, summed;
    hard is the outcome's one-hot, for a decided game with the share
    distance * min(1, plies_left / cells) moved to the draw."""
    v = val_logits.astype(np.float64)
    logp = v - v.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    hard = np.zeros((len(outcome), 3))
    for i, z in enumerate(outcome):
        s = 0.0 if z == 1 or distance == 0 else distance * min(1.0, float(plies_left[i]) / cells)
        hard[i, z] += 1 - s
        hard[i, 1] += s
    target = (1 - mix) * hard + mix * root_wdl.astype(np.float64)
    return float(-(target * logp).sum())


class _FixedValue(torch.nn.Module):
    """A stand-in net whose value logits are `logits` (policy logits 0)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, x):
        return torch.zeros(len(x), x.shape[2], x.shape[3]), self.logits


def test_the_value_target_moves_a_share_to_the_draw_by_distance(tmp_path):
    """value_distance d: a won or lost sample's target gives d * plies_left / cells of its
    mass to the draw (numpy reference over d, value_mix and random outcomes and distances);
    nearer wins and farther losses get the higher target W - L."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from nets.config import get_preset
    from nets.model import build_model

    make_shards(tmp_path, games=4, sizes=((6, 7),))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    base = win.sample(np.random.default_rng(0), (6, 7), 16, flip=False)
    assert base.plies_left is not None
    torch.manual_seed(0)
    model = build_model(get_preset("tiny")).eval()
    with torch.no_grad():
        _, val = model(torch.from_numpy(base.planes))

    @settings(max_examples=30, deadline=None)
    @given(d=st.floats(0.0, 1.0), mix=st.sampled_from([0.0, 0.5]), seed=st.integers(0, 2**31 - 1))
    def check(d, mix, seed):
        rng = np.random.default_rng(seed)
        outcome = rng.integers(0, 3, 16)
        left = rng.integers(0, 60, 16).astype(np.float32)  # past 42 cells: clamped at a draw share of d
        wdl = rng.dirichlet(np.ones(3), 16).astype(np.float32)
        b = Batch(6, 7, base.planes, base.policy, base.policy_weight, outcome, base.legal, wdl, left)
        with torch.no_grad():
            v = losses(model, b, "cpu", 1.5, mix, value_distance=d)[2].item()
        ref = _numpy_value_loss(val.numpy(), outcome, wdl, mix, d, left, 42)
        assert abs(v - ref) <= 1e-4 * max(1.0, abs(ref)), (v, ref)

    check()
    # the target's W - L (1/3 minus the CE's gradient at uniform logits): a win 4 plies from
    # the end above one 30 plies away, a loss 30 plies away above one 4 plies away
    logits = torch.zeros(4, 3, requires_grad=True)
    b = Batch(6, 7, base.planes[:4], base.policy[:4], base.policy_weight[:4], np.array([0, 0, 2, 2]),
              base.legal[:4], None, np.array([4, 30, 4, 30], np.float32))
    (g,) = torch.autograd.grad(losses(_FixedValue(logits), b, "cpu", 1.0, value_distance=0.5)[2], logits)
    target = 1 / 3 - g.numpy()
    w_minus_l = target[:, 0] - target[:, 2]
    np.testing.assert_allclose(w_minus_l, [1 - 0.5 * 4 / 42, 1 - 0.5 * 30 / 42, -(1 - 0.5 * 4 / 42),
                                           -(1 - 0.5 * 30 / 42)], rtol=1e-5)
    with pytest.raises(ValueError, match="value_distance"):
        TrainConfig(value_distance=1.5)
    with pytest.raises(ValueError, match="plies_left"):
        losses(model, Batch(6, 7, base.planes, base.policy, base.policy_weight, base.outcome, base.legal),
               "cpu", 1.5, value_distance=0.5)


@pytest.mark.parametrize("mix", [0.0, 0.5])
def test_the_value_loss_matches_a_numpy_reference_on_fast_and_full_rows(tmp_path, mix):
    """Every row's value counts once, fast searches' (policy weight 0) as full ones', against
    a numpy reference; the total is 1.5 * value + policy."""
    from nets.config import get_preset
    from nets.model import build_model

    make_shards(tmp_path, games=4, sizes=((6, 7),), fast_every=2)
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    b = win.sample(np.random.default_rng(1), (6, 7), 32, flip=False)
    b.root_wdl = np.random.default_rng(2).dirichlet(np.ones(3), 32).astype(np.float32)
    assert 0.0 in b.policy_weight and 1.0 in b.policy_weight
    torch.manual_seed(0)
    model = build_model(get_preset("tiny")).eval()
    with torch.no_grad():
        _, val = model(torch.from_numpy(b.planes))
        total, pol, v, _, _, _ = losses(model, b, "cpu", 1.5, mix)
    ref = _numpy_value_loss(val.numpy(), b.outcome, b.root_wdl, mix)
    assert abs(v.item() - ref) <= 1e-4 * max(1.0, abs(ref)), (v.item(), ref)
    assert abs(total.item() - (1.5 * v.item() + pol.item())) <= 1e-4 * max(1.0, abs(total.item()))
