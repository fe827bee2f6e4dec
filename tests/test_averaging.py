"""nets.averaging: SWA/EMA weight averages against hand-computed references, batch-norm
re-estimation against an independent forward hook, the `c4fast average` command, and the
trainer's served average (TrainConfig.average)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nets.averaging import (RunningAverage, average_checkpoints, average_state_dicts, average_weights, bn_batches,
                            reestimate_bn, summarize)
from nets.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from nets.config import get_preset
from nets.model import Net
from nets.replay import ReplayWindow
from nets.shards import list_shards
from test_train import make_shards

ROOT = Path(__file__).resolve().parents[1]


def _random_net(seed: int, preset: str = "tiny") -> Net:
    """A net with random weights and random running statistics (not the init's 0 and 1)."""
    torch.manual_seed(seed)
    net = Net(get_preset(preset))
    with torch.no_grad():
        for name, t in net.state_dict().items():
            if name.endswith("running_var"):
                t.copy_(torch.rand_like(t) + 0.5)
            elif t.is_floating_point():
                t.copy_(torch.randn_like(t))
            else:  # num_batches_tracked
                t.fill_(seed * 7 + 1)
    return net


def _checkpoints(tmp_path, seeds=(1, 2, 3), steps=(10, 20, 30), preset="tiny"):
    paths = []
    for seed, step in zip(seeds, steps):
        p = tmp_path / f"model_{step:08d}.pt"
        save_checkpoint(p, _random_net(seed, preset), get_preset(preset), step, extra={"samples_trained": step * 4})
        paths.append(str(p))
    return paths


def _by_hand(paths, weights):
    """sum_i weights[i] * state_i in float64 numpy, integer tensors from the last file."""
    states = [torch.load(p, weights_only=True)["state_dict"] for p in paths]
    out = {}
    for k, v in states[-1].items():
        if v.is_floating_point():
            out[k] = sum(w * s[k].double().numpy() for w, s in zip(weights, states))
        else:
            out[k] = v.numpy()
    return out


def _assert_state_close(state, ref, keys=None):
    for k in keys or ref:
        got = state[k]
        if got.is_floating_point():
            np.testing.assert_allclose(got.double().numpy(), ref[k], rtol=1e-6, atol=1e-7, err_msg=k)
        else:
            np.testing.assert_array_equal(got.numpy(), ref[k], err_msg=k)


@pytest.mark.parametrize("decay", [None, 0.5, 0.9, 1.0])
def test_the_average_equals_a_reference_computed_from_the_state_dicts(tmp_path, decay):
    paths = _checkpoints(tmp_path)
    out = tmp_path / "avg.pt"
    info = average_checkpoints(paths[::-1], str(out), decay=decay, bn_batches_per_size=0)  # any order: by step
    d = decay
    weights = [1 / 3] * 3 if d is None else [d * d / (d * d + d + 1), d / (d * d + d + 1), 1 / (d * d + d + 1)]
    model, _, meta = load_checkpoint(out)
    _assert_state_close(model.state_dict(), _by_hand(paths, weights))
    assert meta["step"] == 30 and meta["extra"]["samples_trained"] == 120
    avg = meta["extra"]["average"]
    assert avg == info and avg["method"] == ("swa" if decay is None else "ema")
    assert [s["step"] for s in avg["sources"]] == [10, 20, 30]
    np.testing.assert_allclose([s["weight"] for s in avg["sources"]], weights)


def test_average_weights_are_the_normalised_powers_of_the_decay():
    np.testing.assert_allclose(average_weights(4), [0.25] * 4)
    np.testing.assert_allclose(average_weights(4, 0.5), np.array([1, 2, 4, 8]) / 15)
    assert average_weights(1, 0.3).tolist() == [1.0]
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="decay"):
            average_weights(3, bad)
    with pytest.raises(ValueError, match="at least one"):
        average_weights(0)


def _window(tmp_path):
    make_shards(tmp_path / "data", games=6, sizes=((6, 7), (9, 10)))
    win = ReplayWindow()
    win.update(list_shards([tmp_path / "data"]))
    return win


def test_bn_reestimation_equals_the_batch_statistics_seen_by_a_forward_hook(tmp_path):
    win = _window(tmp_path)
    batches = list(bn_batches(win, np.random.default_rng(5), 3, 16))
    assert len(batches) == 6 and {tuple(b.shape[2:]) for b in batches} == {(6, 7), (9, 10)}
    net = _random_net(4)
    seen: dict[str, list] = {}

    def hook(name):
        def record(module, inputs):
            x = inputs[0].double()
            seen.setdefault(name, []).append((x.mean((0, 2, 3)), x.var((0, 2, 3), unbiased=True)))
        return record

    probe = _random_net(4).train()  # the same weights; in train mode a layer's input does not
    handles = [m.register_forward_pre_hook(hook(n)) for n, m in probe.named_modules()  # depend on running stats
               if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for b in batches:
            probe(b)
    for h in handles:
        h.remove()
    net.eval()
    assert reestimate_bn(net, batches) == 6
    assert not net.training
    state = dict(net.named_modules())
    assert len(seen) >= 5
    for name, stats in seen.items():
        bn = state[name]
        assert bn.momentum == 0.1  # restored
        mean = torch.stack([m for m, _ in stats]).mean(0)
        var = torch.stack([v for _, v in stats]).mean(0)
        torch.testing.assert_close(bn.running_mean.double(), mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(bn.running_var.double(), var, rtol=1e-5, atol=1e-6)
        assert int(bn.num_batches_tracked) == 6
    with pytest.raises(ValueError, match="no batches"):
        reestimate_bn(net, [])


def test_one_checkpoint_comes_back_unchanged_and_loads_everywhere(tmp_path):
    from nets.numpy_net import export_numpy
    from nets.players import make_player
    import c4fast

    (path,) = _checkpoints(tmp_path, seeds=(3,), steps=(40,))
    src = torch.load(path, weights_only=True)["state_dict"]
    same = tmp_path / "same.pt"
    average_checkpoints([path], str(same), decay=0.7, bn_batches_per_size=0)
    got, _, _ = load_checkpoint(same)
    for k, v in got.state_dict().items():
        assert torch.equal(v, src[k]), k
    win_dir = tmp_path / "d"
    make_shards(win_dir, games=4, sizes=((6, 7),))
    bn = tmp_path / "bn.pt"
    info = average_checkpoints([path], str(bn), data=[str(win_dir)], bn_batches_per_size=2, batch_size=8)
    assert info["bn"]["batches"] == 2 and info["bn"]["sizes"] == ["6x7"]
    model, _, _ = load_checkpoint(bn)
    changed = []
    for k, v in model.state_dict().items():
        if "running" in k or "num_batches" in k:
            changed.append(not torch.equal(v, src[k]))
        else:
            assert torch.equal(v, src[k]), k  # the weights; only the statistics are re-estimated
    assert any(changed)
    npz = export_numpy(str(bn), tmp_path / "bn.npz")  # the Saiblo path
    for spec in (f"net:{bn}:8", f"net:{npz}:8"):
        move = make_player(spec).choose(c4fast.Game(6, 7))
        assert 0 <= move < 7


def test_checkpoints_of_different_nets_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _checkpoints(tmp_path / "a", seeds=(1,), steps=(1,))
    b = _checkpoints(tmp_path / "b", seeds=(2,), steps=(2,), preset="cpu_small")
    with pytest.raises(CheckpointError, match="different nets"):
        average_checkpoints(a + b, str(tmp_path / "x.pt"), bn_batches_per_size=0)
    assert not (tmp_path / "x.pt").exists()
    with pytest.raises(ValueError, match="shard data"):
        average_checkpoints(a, str(tmp_path / "x.pt"))


def test_running_average_equals_the_offline_average_and_survives_a_save(tmp_path):
    states = [_random_net(s).state_dict() for s in range(5)]
    for method, last, decay in (("swa", 3, 0.75), ("ema", 4, 0.6), ("swa", 1, 0.75)):
        run = RunningAverage(method, last=last, decay=decay)
        for i, s in enumerate(states[:4]):
            run.add(s, step=10 * (i + 1))
        chosen = states[4 - last:4] if method == "swa" else states[:4]
        ref = average_state_dicts(chosen, average_weights(len(chosen), None if method == "swa" else decay))
        _assert_state_close(run.preview(), {k: v.double().numpy() if v.is_floating_point() else v.numpy()
                                            for k, v in ref.items()})
        torch.save(run.state_dict(), tmp_path / "r.pt")
        back = RunningAverage(method, last=last, decay=decay)
        assert back.load_state_dict(torch.load(tmp_path / "r.pt", weights_only=True))
        assert back.step == 40 and back.count == run.count
        ahead = back.preview(states[4])  # the next one, uncommitted
        run.add(states[4], step=50)
        for k, v in run.preview().items():
            assert torch.equal(v, ahead[k]), k
        assert not RunningAverage(method, last=last + 1, decay=decay).load_state_dict(back.state_dict())


def test_the_average_command_writes_a_checkpoint(tmp_path):
    models = tmp_path / "run" / "train" / "models"
    models.mkdir(parents=True)
    paths = _checkpoints(models, seeds=(1, 2, 3, 4), steps=(5, 10, 15, 20))
    make_shards(tmp_path / "run" / "data", games=4, sizes=((6, 7),))
    out = tmp_path / "avg.pt"
    proc = subprocess.run([sys.executable, "-m", "selfplay.cli", "average", str(tmp_path / "run"), "--last", "2",
                           "--data", str(tmp_path / "run" / "data"), "--bn-batches", "2", "--bn-batch-size", "8",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    src = info["sources"]
    assert src["count"] == 2 and src["steps"] == [15, 20] and src["effective"] == pytest.approx(2.0)
    assert [s["step"] for s in src["newest"]] == [15, 20] and info["method"] == "swa" and info["bn"]["batches"] == 2
    model, _, meta = load_checkpoint(out)
    assert [s["step"] for s in meta["extra"]["average"]["sources"]] == [15, 20]  # the full list
    ref = _by_hand(paths[2:], [0.5, 0.5])
    _assert_state_close(model.state_dict(), ref, [k for k in ref if "running" not in k and "num_batches" not in k])
    bad = subprocess.run([sys.executable, "-m", "selfplay.cli", "average", str(models), "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--last K" in bad.stderr


def test_the_printed_record_summarizes_many_sources():
    """summarize: a long EMA's sources become their count, step range, effective number
    1 / sum(w^2) (by hand) and the newest few; the rest of the record is unchanged."""
    w = average_weights(600, 0.9)
    info = {"method": "ema", "decay": 0.9, "bn": {"batches": 8},
            "sources": [{"path": f"/m/model_{200 * (i + 1):08d}.pt", "step": 200 * (i + 1), "weight": float(x)}
                        for i, x in enumerate(w)]}
    s = summarize(info, newest=3)
    assert s["method"] == "ema" and s["bn"] == {"batches": 8}
    assert s["sources"]["count"] == 600 and s["sources"]["steps"] == [200, 120000]
    assert s["sources"]["newest"] == info["sources"][-3:]
    assert s["sources"]["effective"] == pytest.approx(1.0 / sum(x * x for x in w))
    assert s["sources"]["effective"] == pytest.approx((1 + 0.9) / (1 - 0.9), rel=1e-6)  # 19 for a long EMA
    assert len(json.dumps(s)) < 1000 < len(json.dumps(info))


def _train(tmp_path, name, **kw):
    from nets.train import TrainConfig, TrainRunConfig, train

    run = {k: kw.pop(k) for k in ("stop_after", "resume") if k in kw}
    cfg = TrainConfig(preset="tiny", steps=kw.pop("steps", 6), per_size=8, checkpoint_every=2, **kw)
    return train([str(tmp_path / "d")], TrainRunConfig(out=str(tmp_path / name), train=cfg, **run), quiet=True)


def test_the_trainer_without_the_switch_writes_the_raw_weights_as_before(tmp_path):
    make_shards(tmp_path / "d", games=6)
    a = _train(tmp_path, "a")
    state = torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)
    assert "average" not in state and state["config"]["average"] == "none"
    ckpt = torch.load(a["checkpoint"], weights_only=True)
    assert ckpt["extra"] == {"samples_trained": a["samples_trained"]}  # the payload of today's checkpoints
    for k, v in ckpt["state_dict"].items():
        assert torch.equal(v, state["model"][k]), k
    _train(tmp_path, "b")  # a second run: byte-identical checkpoints
    for name in ("model_00000002.pt", "model_00000006.pt"):
        model_a, _, meta_a = load_checkpoint(tmp_path / "a" / "models" / name)
        model_b, _, meta_b = load_checkpoint(tmp_path / "b" / "models" / name)
        assert meta_a["extra"] == meta_b["extra"]
        for (k, x), (_, y) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
            assert torch.equal(x, y), k


@pytest.mark.parametrize("method", ["swa", "ema"])
def test_the_trainer_serves_the_average_of_its_raw_checkpoints(tmp_path, method):
    make_shards(tmp_path / "d", games=6)
    _train(tmp_path, "raw")
    on = _train(tmp_path, "avg", average=method, average_last=2, average_decay=0.6, average_bn_batches=3)
    raw_state = torch.load(tmp_path / "raw" / "train_state.pt", weights_only=True)
    avg_state = torch.load(tmp_path / "avg" / "train_state.pt", weights_only=True)
    for k, v in raw_state["model"].items():  # training is untouched by the served average
        assert torch.equal(v, avg_state["model"][k]), k
    raws = [str(tmp_path / "raw" / "models" / f"model_{s:08d}.pt") for s in (2, 4, 6)]
    chosen = raws[1:] if method == "swa" else raws
    weights = [0.5, 0.5] if method == "swa" else [0.36 / 1.96, 0.6 / 1.96, 1 / 1.96]
    served, _, meta = load_checkpoint(on["checkpoint"])
    ref = _by_hand(chosen, weights)
    weights_only = [k for k in ref if "running" not in k and "num_batches" not in k]
    _assert_state_close(served.state_dict(), ref, weights_only)
    assert meta["extra"]["average"]["steps"] == ([4, 6] if method == "swa" else [2, 4, 6])
    assert meta["extra"]["average"]["bn"]["batches"] == 3 * 2  # two board sizes
    # the statistics: the library's re-estimation on the same window with the trainer's RNG
    win = ReplayWindow()
    win.update(list_shards([tmp_path / "d"]))
    expect = Net(get_preset("tiny"))
    expect.load_state_dict(average_state_dicts([load_checkpoint(p)[0].state_dict() for p in chosen], weights))
    reestimate_bn(expect, bn_batches(win, np.random.default_rng([0, 6]), 3, 8))
    for k, v in expect.state_dict().items():
        if k not in weights_only:
            torch.testing.assert_close(served.state_dict()[k], v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stop", [4, 3])
def test_a_resumed_run_serves_the_same_average(tmp_path, stop):
    make_shards(tmp_path / "d", games=6)
    kw = {"average": "ema", "average_decay": 0.5, "average_bn_batches": 2, "steps": 8}
    a = _train(tmp_path, "a", **kw)
    _train(tmp_path, "b", stop_after=stop, **kw)  # 3: the interrupted run's last checkpoint is not committed
    b = _train(tmp_path, "b", resume=True, **kw)
    assert b["steps"] == 8
    ma, _, meta_a = load_checkpoint(a["checkpoint"])
    mb, _, meta_b = load_checkpoint(b["checkpoint"])
    assert meta_a["extra"]["average"]["steps"] == meta_b["extra"]["average"]["steps"] == [2, 4, 6, 8]
    for (k, x), (_, y) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(x, y), k
    other = _train(tmp_path, "b", resume=True, **{**kw, "average": "swa", "steps": 10})  # other settings: restart
    _, _, meta = load_checkpoint(other["checkpoint"])
    assert meta["extra"]["average"]["steps"] == [10]
