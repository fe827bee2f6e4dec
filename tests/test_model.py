"""Tests for nets.config, nets.model, nets.checkpoint and nets.numpy_net (real torch, CPU)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import c4fast
from nets.checkpoint import (
    CheckpointError,
    checkpoint_name,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from nets.config import PRESETS, NetConfig, get_preset
from nets.model import Net, count_parameters, predict
from nets.numpy_net import NumpyNet, export_numpy

torch.set_num_threads(1)

SAIBLO_SIZES = [(h, w) for h in range(9, 13) for w in range(9, 13)]
ALL_SIZES = SAIBLO_SIZES + [(6, 7), (4, 4)]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_planes(b, h, w, seed=0, c=c4fast.NUM_PLANES):
    """Random 0/1 planes; plane 3 (on board) all ones except one forbidden cell."""
    rng = np.random.default_rng(seed)
    x = (rng.random((b, c, h, w)) < 0.3).astype(np.float32)
    x[:, 3] = 1.0
    x[:, 3, rng.integers(h), rng.integers(w)] = 0.0
    return x


def randomize_bn(model, seed=0):
    """Random BN running stats and affine params so that BN folding is really exercised."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                n = mod.num_features
                mod.running_mean.copy_(torch.randn(n, generator=g) * 0.3)
                mod.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
                mod.weight.copy_(torch.rand(n, generator=g) + 0.5)
                mod.bias.copy_(torch.randn(n, generator=g) * 0.3)
    return model


def make(name, seed=0):
    torch.manual_seed(seed)
    return randomize_bn(Net(get_preset(name)), seed).eval()


def forward(model, x):
    with torch.inference_mode():
        p, v = model(torch.from_numpy(x))
    return p.numpy(), v.numpy()


# ------------------------------------------------------------------ config


def test_presets_and_config_validation():
    assert set(PRESETS) >= {"b3c128nbt", "cpu_small", "tiny"}
    for name, cfg in PRESETS.items():
        assert cfg.name == name
        assert cfg.in_planes == c4fast.NUM_PLANES == 9
        assert NetConfig.from_dict(cfg.to_dict()) == cfg
    counts = {n: count_parameters(Net(c)) for n, c in PRESETS.items()}
    assert 450_000 <= counts["b3c128nbt"] <= 700_000
    assert 60_000 <= counts["cpu_small"] <= 150_000
    assert counts["tiny"] < 10_000
    with pytest.raises(ValueError, match="cpu_small"):
        get_preset("nope")
    with pytest.raises(ValueError, match="channels"):
        NetConfig(channels=0, blocks=1)
    with pytest.raises(ValueError, match="gpool_channels"):
        NetConfig(channels=16, blocks=1, gpool_channels=8)
    with pytest.raises(ValueError, match="gpool_blocks"):
        NetConfig(channels=16, blocks=2, gpool_channels=2, gpool_blocks=(2,))
    with pytest.raises(ValueError, match="unknown"):
        NetConfig.from_dict({**PRESETS["tiny"].to_dict(), "bogus": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["tiny"].channels = 3


# ------------------------------------------------------------------ model


@pytest.mark.parametrize("name", ["tiny", "cpu_small"])
def test_output_shapes_all_sizes(name):
    model = make(name)
    for h, w in ALL_SIZES:
        p, v = forward(model, random_planes(2, h, w))
        assert p.shape == (2, h, w) and v.shape == (2, 3)
        assert np.isfinite(p).all() and np.isfinite(v).all()


def test_b3c128nbt_shape_12x12():
    p, v = forward(make("b3c128nbt"), random_planes(2, 12, 12))
    assert p.shape == (2, 12, 12) and v.shape == (2, 3)


def test_uint8_input_and_bad_shape():
    model = make("tiny")
    x = random_planes(2, 6, 7)
    p1, v1 = forward(model, x)
    with torch.inference_mode():
        p2, v2 = model(torch.from_numpy(x.astype(np.uint8)))
    np.testing.assert_allclose(p1, p2.numpy(), atol=1e-6)
    np.testing.assert_allclose(v1, v2.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match=r"\(B, 9, H, W\)"):
        model(torch.zeros(1, 5, 6, 7))


def test_outputs_depend_on_inputs_and_mirror():
    model = make("cpu_small", seed=3)
    x = random_planes(3, 9, 10, seed=3)
    p, v = forward(model, x)
    pm, vm = forward(model, x[..., ::-1].copy())
    # Policy varies across cells, and the net is not trivially mirror-invariant/constant.
    assert np.ptp(p, axis=(1, 2)).min() > 1e-3
    assert np.abs(pm - p).max() > 1e-3
    assert np.abs(pm[..., ::-1] - p).max() > 1e-3
    p2, v2 = forward(model, random_planes(3, 9, 10, seed=4))
    assert np.abs(p2 - p).max() > 1e-3 and np.abs(v2 - v).max() > 1e-5
    # Each sample is evaluated independently of the rest of the batch (eval mode).
    p0, v0 = forward(model, x[:1])
    np.testing.assert_allclose(p0, p[:1], atol=1e-5)
    np.testing.assert_allclose(v0, v[:1], atol=1e-5)


def test_channels_last_matches():
    model = make("cpu_small")
    x = random_planes(4, 11, 9)
    p, v = forward(model, x)
    model_cl = make("cpu_small").to(memory_format=torch.channels_last)
    xt = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        p2, v2 = model_cl(xt)
    np.testing.assert_allclose(p, p2.numpy(), atol=1e-5)
    np.testing.assert_allclose(v, v2.numpy(), atol=1e-5)
    p3, _ = predict(model_cl, x)
    np.testing.assert_allclose(p, p3, atol=1e-5)


def test_backward_train_mode():
    model = Net(get_preset("tiny")).train()
    x = torch.from_numpy(random_planes(4, 6, 7))
    p, v = model(x)
    (p.square().mean() + v.square().mean()).backward()
    assert all(q.grad is not None for q in model.parameters())


def test_predict_probabilities():
    model = make("tiny").train()
    x = random_planes(5, 12, 9)
    pol, wdl = predict(model, x)
    assert model.training  # mode restored
    assert pol.dtype == np.float32 and wdl.dtype == np.float32
    assert pol.shape == (5, 12, 9) and wdl.shape == (5, 3)
    assert (wdl >= 0).all()
    np.testing.assert_allclose(wdl.sum(axis=1), 1.0, atol=1e-6)
    p, v = forward(model.eval(), x)
    np.testing.assert_allclose(pol, p, atol=1e-6)
    np.testing.assert_allclose(wdl, torch.softmax(torch.from_numpy(v), 1).numpy(), atol=1e-6)
    pol8, _ = predict(model, x.astype(np.uint8))
    np.testing.assert_allclose(pol8, p, atol=1e-6)


# ------------------------------------------------------------------ checkpoints


def test_checkpoint_round_trip(tmp_path):
    cfg = get_preset("tiny")
    model = make("tiny", seed=1)
    path = tmp_path / checkpoint_name(42)
    save_checkpoint(path, model, cfg, 42, extra={"lr": 0.1, "note": "x"})
    assert sorted(os.listdir(tmp_path)) == ["model_00000042.pt"]
    loaded, cfg2, meta = load_checkpoint(path, expect_config=cfg)
    assert cfg2 == cfg and meta["step"] == 42 and meta["extra"] == {"lr": 0.1, "note": "x"}
    assert (meta["encoding_version"], meta["num_planes"]) == (1, 9)  # what the net reads
    assert not loaded.training
    x = random_planes(3, 10, 11)
    for a, b in zip(forward(model, x), forward(loaded, x)):
        np.testing.assert_array_equal(a, b)


def test_latest_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    assert latest_checkpoint(tmp_path / "missing") is None
    model, cfg = make("tiny"), get_preset("tiny")
    for step in (5, 120, 30):
        save_checkpoint(tmp_path / checkpoint_name(step), model, cfg, step)
    (tmp_path / "model_99999999.pt.tmp").write_bytes(b"partial")
    (tmp_path / "other.pt").write_bytes(b"x")
    assert latest_checkpoint(tmp_path) == str(tmp_path / "model_00000120.pt")


def test_checkpoint_errors(tmp_path):
    cfg = get_preset("tiny")
    model = make("tiny")
    good = tmp_path / "good.pt"
    save_checkpoint(good, model, cfg, 7)
    payload = torch.load(good, weights_only=True)

    def write(name, **changes):
        p = tmp_path / name
        torch.save({**payload, **changes}, p)
        return p

    # missing file, garbage, foreign torch file
    with pytest.raises(CheckpointError, match="nothere.pt"):
        load_checkpoint(tmp_path / "nothere.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="junk.pt"):
        load_checkpoint(junk)
    foreign = tmp_path / "foreign.pt"
    torch.save(model.state_dict(), foreign)
    with pytest.raises(CheckpointError, match="not a c4fast checkpoint"):
        load_checkpoint(foreign)
    # truncated copy (an interrupted write)
    data = good.read_bytes()
    trunc = tmp_path / "model_00000007.pt"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model_00000007.pt"):
        load_checkpoint(trunc)
    # encoding version / plane count
    with pytest.raises(CheckpointError, match=r"encoding version 99 but c4fast reads version 1"):
        load_checkpoint(write("enc.pt", encoding_version=99))
    with pytest.raises(CheckpointError, match=r"num_planes 5.*version 1 has 9"):
        load_checkpoint(write("planes.pt", num_planes=5))
    with pytest.raises(CheckpointError, match=r"config in_planes 10 but num_planes 9"):
        load_checkpoint(write("inplanes.pt", config={**cfg.to_dict(), "in_planes": 10}))
    # shapes not fitting the config
    bad_cfg = dataclasses.replace(cfg, channels=24)
    with pytest.raises(CheckpointError, match=r"input_conv\.weight.*\(16, 9, 3, 3\).*\(24, 9, 3, 3\)"):
        load_checkpoint(write("shape.pt", config=bad_cfg.to_dict()))
    sd = dict(payload["state_dict"])
    sd.pop("value_head.fc2.bias")
    with pytest.raises(CheckpointError, match="value_head.fc2.bias"):
        load_checkpoint(write("missing.pt", state_dict=sd))
    # expected config differs
    other = dataclasses.replace(cfg, value_hidden=32)
    with pytest.raises(CheckpointError, match=r"value_hidden: expected 32, checkpoint has 16"):
        load_checkpoint(good, expect_config=other)
    with pytest.raises(CheckpointError, match="bad config"):
        load_checkpoint(write("badcfg.pt", config={"channels": -1, "blocks": 1}))


def test_save_is_atomic(tmp_path, monkeypatch):
    cfg, model = get_preset("tiny"), make("tiny")
    path = tmp_path / "ckpt" / checkpoint_name(1)
    save_checkpoint(path, model, cfg, 1)
    before = path.read_bytes()

    def boom(obj, f, *a, **k):
        f.write(b"half a file")
        raise KeyboardInterrupt("interrupted")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, model, cfg, 2)
    monkeypatch.undo()
    assert path.read_bytes() == before  # old file untouched
    assert os.listdir(path.parent) == [path.name]  # no *.tmp left behind
    load_checkpoint(path)


# ------------------------------------------------------------------ numpy forward


@pytest.mark.parametrize(
    "name,sizes",
    [
        ("tiny", [(4, 4), (6, 7), (9, 12), (12, 12)]),
        ("cpu_small", [(6, 7), (10, 9), (12, 12)]),
        ("b3c128nbt", [(9, 11), (12, 12)]),
    ],
)
def test_numpy_matches_torch(tmp_path, name, sizes):
    model = make(name, seed=5)
    cfg = get_preset(name)
    ckpt = save_checkpoint(tmp_path / checkpoint_name(3), model, cfg, 3)
    out = export_numpy(ckpt, tmp_path / "net.npz")
    net = NumpyNet.load(out)
    assert net.config == cfg and net.meta["step"] == 3
    assert net.encoding_version == 1 and net.num_planes == 9
    for h, w in sizes:
        x = random_planes(3, h, w, seed=h * w)
        p, v = forward(model, x)
        pn, vn = net.forward(x)
        assert pn.shape == (3, h, w) and vn.shape == (3, 3) and pn.dtype == np.float32
        assert np.abs(pn - p).max() < 1e-4
        assert np.abs(vn - v).max() < 1e-4
    # export from a live model too, and uint8 input
    net2 = NumpyNet.load(export_numpy(model, tmp_path / "net2.npz"))
    x = random_planes(2, 9, 9)
    np.testing.assert_array_equal(net2.forward(x.astype(np.uint8))[0], net.forward(x)[0])


def test_nets_mirror_the_encoding_of_c4fast():
    import nets.config as nc

    assert (nc.ENCODING_VERSION, nc.NUM_PLANES) == (c4fast.ENCODING_VERSION, c4fast.NUM_PLANES) == (1, 9)
    assert c4fast.PLANE_NAMES == (
        "own_stones", "opponent_stones", "playable", "on_board", "last_move", "previous_move",
        "own_wins", "opponent_wins", "first_player_to_move",
    )
    assert c4fast.Game(9, 10, (3, 4)).planes().shape == (9, 9, 10)
    with pytest.raises(ValueError, match=r"in_planes must be 9 \(encoding version 1\), got 11"):
        NetConfig(channels=16, blocks=1, in_planes=11)


def test_files_of_the_removed_encoding_version_2_are_refused_by_name(tmp_path):
    """A checkpoint or .npz export of a net made for encoding version 2 (11 planes: the
    parity planes, removed after commit 0f5c532) is refused with a message saying so,
    before its 11-plane config is even parsed."""
    import json

    cfg = get_preset("tiny")
    model = make("tiny")
    ckpt = save_checkpoint(tmp_path / checkpoint_name(5), model, cfg, 5)
    payload = torch.load(ckpt, weights_only=True)
    sd = dict(payload["state_dict"])
    sd["input_conv.weight"] = torch.zeros(16, 11, 3, 3)
    v2 = tmp_path / "v2.pt"
    torch.save({**payload, "encoding_version": 2, "num_planes": 11, "state_dict": sd,
                "config": {**cfg.to_dict(), "name": "cpu_small_parity", "in_planes": 11}}, v2)
    with pytest.raises(CheckpointError, match=r"v2.pt.*encoding version 2 \(the parity planes.*0f5c532"):
        load_checkpoint(v2)
    npz = export_numpy(ckpt, tmp_path / "v1.npz")
    with np.load(npz, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["__meta__"]))
    arrays["__meta__"] = np.array(json.dumps({**meta, "encoding_version": 2, "num_planes": 11}))
    arrays["__config__"] = np.array(json.dumps({**cfg.to_dict(), "in_planes": 11}))
    np.savez(tmp_path / "v2.npz", **arrays)
    with pytest.raises(ValueError, match=r"v2.npz.*encoding version 2 \(the parity planes"):
        NumpyNet.load(tmp_path / "v2.npz")
    with pytest.raises(ValueError, match=r"expected planes of shape \(B, 9, H, W\)"):
        forward(model, random_planes(2, 6, 7, c=11))
    with pytest.raises(ValueError, match=r"expected planes of shape \(B, 9, H, W\)"):
        NumpyNet.load(npz).forward(random_planes(2, 6, 7, c=11))


def test_numpy_load_refuses_an_encoding_that_does_not_fit(tmp_path):
    import json

    good = export_numpy(make("tiny"), tmp_path / "good.npz")
    with np.load(good, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["__meta__"]))
    for name, change, needle in [
        ("v99.npz", {"encoding_version": 99}, r"encoding version 99 but c4fast reads version 1"),
        ("planes.npz", {"num_planes": 11}, "num_planes 11 but encoding version 1 has 9"),
        ("label.npz", {"encoding_version": 2, "num_planes": 11}, r"encoding version 2 \(the parity planes"),
    ]:
        arrays["__meta__"] = np.array(json.dumps({**meta, **change}))
        np.savez(tmp_path / name, **arrays)
        with pytest.raises(ValueError, match=needle):
            NumpyNet.load(tmp_path / name)


def test_numpy_load_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="bad.npz"):
        NumpyNet.load(bad)
    np.savez(tmp_path / "foreign.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a c4fast numpy net"):
        NumpyNet.load(tmp_path / "foreign.npz")


def test_numpy_net_does_not_import_torch(tmp_path):
    path = export_numpy(make("tiny"), tmp_path / "net.npz")
    code = (
        "import sys\n"
        "import nets.numpy_net as m\n"
        f"net = m.NumpyNet.load({str(path)!r})\n"
        "import numpy as np\n"
        "p, v = net.forward(np.zeros((1, 9, 6, 7), np.float32))\n"
        "assert p.shape == (1, 6, 7)\n"
        "print('torch' in sys.modules, 'numba' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "False"]
