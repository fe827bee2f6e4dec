"""The moves-left head (``NetConfig.moves_left``, issue 35): every forward path carries it
where the net has it, and a net without it is exactly the net of before the switch."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest
import torch

import c4fast
from nets import shm_queue as q
from nets.backends import BACKENDS, CpuBackend, calibration_planes, tolerance_of
from nets.canvas import CanvasNet, to_canvas
from nets.checkpoint import load_checkpoint, save_checkpoint
from nets.config import PRESETS, NetConfig, export_shapes, get_preset, wdl_outputs
from nets.evaluator import BackendEvaluator, NumpyEvaluator, TorchEvaluator
from nets.model import Net, predict, torch_wdl_outputs
from nets.numpy_net import NumpyNet, export_numpy
from nets.selfcheck import TOLERANCES, SelfCheckError, compare, random_planes, self_check
from nets.server import ServerConfig, request_shutdown, start_server
from selfplay.bench.gpucheck import perturbed_model

import _server_workers as workers
from conftest import contiguous_trainer, skip_without_instructions

MODELS = Path(__file__).resolve().parents[1] / "nets" / "models"
SIZES = [(4, 4), (6, 7), (9, 12), (12, 12)]
FAST = [k for k in BACKENDS if k != "compiled"]

#: Outputs of the shipped models on three positions, computed at commit f36fe65 (before the
#: switch existed): predict()'s (win, draw, loss), its first 4 policy logits, and the numpy
#: export's value logits. A net without the head must still give them. ``c4fast_cpu``'s were
#: computed again each time that model was replaced (2026-11-26: step 10,120, then step 9,347;
#: 2026-11-29: step 11,241; 2026-11-30: step 10,911), ``c4fast_std6x7``'s
#: each time it was (2026-11-28: step 52,340, then step 67,814; 2026-11-30: step 136,440), by the code that reproduces
#: the f36fe65 figures of ``c4fast_gpu``.
GOLDEN = {
    "c4fast_cpu": [
        ([0.5737403, 0.00279455, 0.4234652], [-2.753565, -0.4891453, -0.9374563, 0.9579108], [1.797803, -3.526705, 1.494097]),
        ([0.5432728, 0.001436708, 0.4552905], [-3.852764, -1.334386, -3.730542, -1.905531], [1.967726, -3.967531, 1.79105]),
        ([0.3179528, 0.001230199, 0.6808169], [-2.058971, -1.62972, -0.1860059, 2.154661], [1.544787, -4.00994, 2.306177]),
    ],
    "c4fast_gpu": [
        ([0.6424476, 0.003767531, 0.3537849], [-1.246005, -0.1635899, -0.5261822, 0.6292531], [1.799138, -3.339727, 1.202542]),
        ([0.550645, 0.01123354, 0.4381216], [-1.542681, -1.522926, -1.344598, -1.095072], [1.304811, -2.587374, 1.076218]),
        ([0.3877495, 0.002309585, 0.6099409], [-1.52548, -1.069564, 0.7602085, 1.654874], [1.521523, -3.601769, 1.974525]),
    ],
    "c4fast_std6x7": [
        ([0.1604277, 0.6209463, 0.2186259], [-0.792092, -0.6203426, -0.9733217, 0.2481851], [-0.5554173, 0.797985, -0.2458964]),
        ([0.3284019, 0.5691355, 0.1024625], [-1.434377, -1.235851, -1.554125, -0.9609815], [0.2028259, 0.7527065, -0.9619153]),
        ([0.1431232, 0.5858523, 0.2710246], [-0.5385228, -0.2398317, -0.27663, -0.5325654], [-0.6791841, 0.7301781, -0.04068003]),
    ],
}


def golden_planes():
    out = []
    for h, w, fb, moves in [(6, 7, None, [3, 3, 2, 4]), (9, 10, (4, 5), [0, 1, 2, 3, 4, 5, 6]),
                            (12, 12, (0, 11), [5, 6, 5, 6, 5])]:
        out.append(c4fast.Game.from_moves(h, w, fb, moves).planes()[None])
    return out


def ml_model(preset: str = "cpu_small_ml", seed: int = 2) -> Net:
    """A perturbed eval-mode net with the head, its moves-left output mostly positive."""
    m = perturbed_model(preset, seed)
    with torch.no_grad():
        m.value_head.fc2.bias[3] += 1.0
    return m


def tiny_ml() -> NetConfig:
    return dataclasses.replace(get_preset("tiny"), name="tiny_ml", moves_left=True)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_shipped_models_give_the_outputs_of_before_the_switch(name):
    model, config, _ = load_checkpoint(MODELS / f"{name}.pt")
    assert not config.moves_left and "moves_left" not in config.to_dict()
    npz = NumpyNet.load(MODELS / f"{name}.npz")
    for x, (wdl, pol, val) in zip(golden_planes(), GOLDEN[name]):
        p, v = predict(model, x)
        assert v.shape == (1, 3)
        np.testing.assert_allclose(v[0], wdl, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(p[0].ravel()[:4], pol, rtol=2e-5, atol=2e-6)
        pn, vn = npz.forward(x)
        assert vn.shape == (1, 3)
        np.testing.assert_allclose(vn[0], val, rtol=2e-5, atol=2e-6)


def test_the_switch_widens_only_the_value_heads_last_layer():
    off, on = get_preset("cpu_small"), get_preset("cpu_small_ml")
    assert on.moves_left and on.value_outputs == 4 and off.value_outputs == 3
    assert on.to_dict()["moves_left"] is True and NetConfig.from_dict(on.to_dict()) == on
    assert NetConfig.from_dict(off.to_dict()) == off
    so, sn = export_shapes(off), export_shapes(on)
    assert {k for k in so if so[k] != sn[k]} == {"v.fc2.w", "v.fc2.b"}
    assert sn["v.fc2.w"] == (64, 4) and sn["v.fc2.b"] == (4,)
    a, b = Net(off).state_dict(), Net(on).state_dict()
    assert {k for k in a if a[k].shape != b[k].shape} == {"value_head.fc2.weight", "value_head.fc2.bias"}
    with pytest.raises(ValueError, match="moves_left"):
        NetConfig(channels=16, blocks=1, bottleneck_channels=8, gpool_channels=4, moves_left=1)
    assert "cpu_small_ml" in PRESETS


def test_wdl_outputs_are_the_softmax_and_the_plies_in_both_libraries():
    rng = np.random.default_rng(0)
    v3 = rng.normal(size=(6, 3)).astype(np.float32)
    from c4fast.evaluators import softmax_rows

    np.testing.assert_array_equal(wdl_outputs(v3, 42), softmax_rows(v3))  # width 3: exactly as before
    np.testing.assert_array_equal(torch_wdl_outputs(torch.from_numpy(v3), 42).numpy(),
                                  torch.softmax(torch.from_numpy(v3), 1).numpy())
    v4 = rng.normal(size=(6, 4)).astype(np.float32)
    for out in (wdl_outputs(v4, 42), torch_wdl_outputs(torch.from_numpy(v4), 42).numpy()):
        assert out.shape == (6, 4) and out.dtype == np.float32
        np.testing.assert_allclose(out[:, :3], softmax_rows(v4[:, :3]), rtol=1e-6)
        np.testing.assert_allclose(out[:, 3], np.maximum(v4[:, 3], 0) * 42, rtol=1e-6)
    with pytest.raises(ValueError, match="3\\) or"):
        wdl_outputs(rng.normal(size=(2, 5)), 42)


@pytest.mark.parametrize("kind", FAST)
def test_every_backend_carries_the_moves_left_output(kind):
    if kind.startswith("ort"):
        pytest.importorskip("onnxruntime")
    if kind.startswith("ov"):
        pytest.importorskip("openvino")
    skip_without_instructions(kind)
    model = ml_model()
    # OpenVINO on 3 threads: batches of 48+ positions split over 3 streams, 4 columns each
    split = kind.startswith("ov")
    be = CpuBackend(model, kind, threads=3 if split else 1, calibration=calibration_planes(SIZES, 16, seed=1))
    ev = BackendEvaluator(be)
    tol = tolerance_of(kind)
    positive = 0
    for h, w in SIZES:
        for n in (1, 7, 50) if split else (1, 7):
            x = random_planes(n, c4fast.NUM_PLANES, h, w, seed=h * w + n).astype(np.float32)
            pol, val = be(x)
            assert val.shape == (n, 4)
            ref_pol, ref_wdl = predict(model, x)
            assert ref_wdl.shape == (n, 4)
            got_pol, got_wdl = ev.evaluate(x)
            err = compare(got_pol, got_wdl, ref_pol, ref_wdl)
            assert err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs, err
            positive += int((ref_wdl[:, 3] > 0).sum())
    assert positive > 10  # the plies column was really compared


def test_numpy_export_torch_and_canvas_forwards_carry_the_head(tmp_path):
    model = ml_model("cpu_small_ml", 2)
    path = export_numpy(model, tmp_path / "ml.npz")
    net = NumpyNet.load(path)
    assert net.config.moves_left
    for h, w in SIZES:
        x = random_planes(5, c4fast.NUM_PLANES, h, w, seed=h + w).astype(np.float32)
        ref_pol, ref_wdl = predict(model, x)
        for ev in (NumpyEvaluator(net), TorchEvaluator(model)):
            pol, wdl = ev.evaluate(x)
            assert wdl.shape == (5, 4)
            err = compare(pol, wdl, ref_pol, ref_wdl)
            assert err["policy_rel"] <= 1e-4 and err["wdl_abs"] <= 1e-5, err
    # the masked canvas: each position's value row, moves-left column included
    xs = [random_planes(3, c4fast.NUM_PLANES, h, w, seed=h).astype(np.float32) for h, w in SIZES]
    xc, mask, _ = to_canvas(xs)
    with torch.no_grad():
        _, vc = CanvasNet(model)(xc, mask)
        ref = torch.cat([model(torch.from_numpy(x))[1] for x in xs])
    assert vc.shape == (12, 4)
    torch.testing.assert_close(vc, ref, rtol=1e-4, atol=1e-5)


def test_a_moves_left_checkpoint_round_trips_and_the_self_check_sees_a_wrong_plies_column(tmp_path):
    model = ml_model("cpu_small_ml", 3)
    save_checkpoint(tmp_path / "m.pt", model, model.config, 7)
    back, cfg, _ = load_checkpoint(tmp_path / "m.pt")
    assert cfg == model.config
    ref = lambda planes: predict(model, planes)  # noqa: E731
    self_check("reload", lambda planes: predict(back, planes), ref, 9, 9, 4, c4fast.NUM_PLANES, TOLERANCES["fp32"])

    def off_by_a_ply(planes):
        pol, wdl = predict(back, planes)
        wdl[:, 3] += 1.0
        return pol, wdl

    with pytest.raises(SelfCheckError, match="wdl_abs"):
        self_check("plies", off_by_a_ply, ref, 9, 9, 4, c4fast.NUM_PLANES, TOLERANCES["fp32"])


def ml_checkpoint(tmp_path, plies_bias: float):
    """A seeded tiny net with the head (its moves-left output's bias set), saved as ml.pt."""
    torch.manual_seed(0)
    model = Net(tiny_ml()).eval()
    with torch.no_grad():
        model.value_head.fc2.bias[3] = plies_bias
    path = tmp_path / "ml.pt"
    save_checkpoint(path, model, model.config, 1)
    return model, path


def test_the_inference_server_answers_with_the_moves_left_column(tmp_path):
    model, path = ml_checkpoint(tmp_path, 0.4)
    ctx = mp.get_context("spawn")
    sq = q.SharedQueue(ctx, 1, 64, c4fast.NUM_PLANES)
    proc = start_server(ctx, sq.handles, ServerConfig(model=str(path), threads=1, forward="eager"))
    try:
        out = ctx.Queue()
        p = ctx.Process(target=workers.eval_worker, args=(sq.handles, 0, 9, 10, 3, 0, out))
        p.start()
        _, results = out.get(timeout=120)
        p.join(10)
        assert p.exitcode == 0
    finally:
        request_shutdown(sq.handles)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        sq.close()
    for x, pol, wdl in results:
        assert wdl.shape == (x.shape[0], 4)
        with torch.inference_mode():
            rp, rv = model(torch.from_numpy(x).float())
        np.testing.assert_allclose(pol, rp.numpy(), rtol=1e-5, atol=1e-6)  # another thread count
        np.testing.assert_allclose(wdl, torch_wdl_outputs(rv, 90).numpy(), rtol=1e-5, atol=1e-6)
        assert (wdl[:, 3] > 0).all()


# ----------------------------------------------------------------------------- labels


def write_shard(out, prefix, seed, games, sizes, fork_max=0, id_base=0):
    """One real shard (nets.shards.ShardWriter) of random games; with `fork_max` k > 0 each
    game first plays up to k random moves that are recorded in its moves but give no
    samples (a game started from a forked mid-game position)."""
    from nets.shards import ShardWriter

    rng = np.random.default_rng(seed)
    w = ShardWriter(str(out), prefix, samples_per_shard=10 ** 6)
    for i in range(games):
        h, wd = sizes[i % len(sizes)]
        g = c4fast.Game(h, wd, (int(rng.integers(h)), int(rng.integers(wd))))
        for _ in range(int(rng.integers(0, fork_max + 1))):
            if g.result is not None or len(g.legal_moves()) == 0:
                break
            nxt = c4fast.Game.from_moves(h, wd, g.forbidden, g.moves)
            nxt.play(int(rng.choice(g.legal_moves())))
            if nxt.result is not None:
                break
            g = nxt
        samples = []
        while g.result is None:
            s = g.state[0]
            legal = g.legal_moves()
            col = int(rng.choice(legal))
            pol = np.zeros((h, wd), np.float32)
            pol[int(s["top"][col]), col] = 1.0
            samples.append({"stones": s["stones"].copy(), "forbidden": s["forbidden"].copy(), "last": s["last"].copy(),
                            "ply": int(s["ply"]), "policy": pol, "policy_weight": 1.0,
                            "root_wdl": np.ones(3, np.float32) / 3, "game_id": id_base + i, "model_version": 0})
            g.play(col)
        for smp in samples:
            tm = smp["ply"] % 2 + 1
            smp["outcome"] = 1 if g.result == 0 else (0 if g.result == tm else 2)
        w.add_game({"game_id": id_base + i, "height": h, "width": wd, "forbidden": g.forbidden, "moves": g.moves,
                    "num_moves": len(g.moves), "result": g.result, "model_version": 0}, samples)
    return w.flush()


def reference_plies_left(path):
    """{(size, game_id, ply): plies to the game's end}, read with h5py alone: the stored
    moves of each game (-1 padded), counted, minus the sample's stones on the board."""
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        length = {int(g): int((m >= 0).sum()) for g, m in zip(f["games/game_id"][()], f["games/moves"][()])}
        for name, grp in f["samples"].items():
            for gid, ply in zip(grp["game_id"][()], grp["ply"][()]):
                out[(name, int(gid), int(ply))] = length[int(gid)] - int(ply)
    return out


def test_plies_left_labels_match_a_reference_read_from_the_shard_files(tmp_path):
    from nets.replay import ReplayWindow
    from nets.shards import list_shards, size_group

    sizes = ((6, 7), (9, 9), (10, 12))
    # two shards reuse game ids (joined within each shard), one holds forked games
    write_shard(tmp_path, "a", 1, 9, sizes)
    write_shard(tmp_path, "b", 2, 9, sizes, fork_max=30)
    ref = {}
    for p in list_shards([tmp_path]):
        ref[p] = reference_plies_left(p)
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    assert win.window_samples == sum(len(r) for r in ref.values())
    seen = 0
    for p, entry in win.shard_cache.items():
        for (h, w), arrays in ((k, v) for k, v in entry.items() if not isinstance(k, str)):
            for gid, ply, left in zip(arrays["game_id"], arrays["ply"], arrays["plies_left"]):
                assert int(left) == ref[p][(size_group(h, w), int(gid), int(ply))] >= 1
                seen += 1
    assert seen == win.window_samples
    assert any(min(ply for (_, _, ply) in r) > 0 for r in [ref[list_shards([tmp_path])[1]]])  # forks start late
    # a batch carries the labels of the samples it drew
    for size in win.sizes:
        d = win.data[size]
        b = win.sample(np.random.default_rng(5), size, 40)
        idx = np.random.default_rng(5).integers(0, len(d["ply"]), 40)
        np.testing.assert_array_equal(b.plies_left, d["plies_left"][idx].astype(np.float32))
        stones = b.planes[:, 0].sum(axis=(1, 2)) + b.planes[:, 1].sum(axis=(1, 2))
        np.testing.assert_array_equal(stones, d["ply"][idx])  # the planes are those samples'


def test_a_shard_with_a_sample_of_an_unknown_game_is_skipped_by_name(tmp_path):
    import h5py

    from nets.replay import ReplayWindow

    path = write_shard(tmp_path, "a", 1, 3, ((6, 7),))
    with h5py.File(path, "r+") as f:
        f["games/game_id"][0] = 999
    warned = []
    win = ReplayWindow(warn=warned.append)
    win.update([path])
    assert win.window_samples == 0 and "game" in warned[0] and path in warned[0]


# ----------------------------------------------------------------------------- trainer


def test_the_moves_left_weight_needs_the_head_and_is_checked(tmp_path):
    from nets.train import TrainConfig, Trainer
    from selfplay.generation.loop import PRESETS as LOOPS

    with pytest.raises(ValueError, match="moves-left head.*cpu_small"):
        Trainer(TrainConfig(preset="cpu_small", moves_left_weight=0.1, device="cpu"), str(tmp_path))
    loop = LOOPS["dummy"]
    train = dataclasses.replace(loop.train, train=dataclasses.replace(loop.train.train, moves_left_weight=0.1))
    with pytest.raises(ValueError, match="moves-left head.*tiny"):
        dataclasses.replace(loop, train=train)  # the loop's --net has no head
    dataclasses.replace(loop, net="cpu_small_ml", train=train)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="moves_left_weight"):
            TrainConfig(preset="cpu_small_ml", moves_left_weight=bad)
    assert TrainConfig(preset="cpu_small_ml", moves_left_weight=0.5).moves_left_weight == 0.5


def test_the_moves_left_loss_is_the_huber_loss_of_the_scaled_plies(tmp_path):
    from nets.replay import ReplayWindow
    from nets.shards import list_shards
    from nets.train import MOVES_LEFT_HUBER_DELTA, losses

    write_shard(tmp_path, "a", 3, 6, ((6, 7), (9, 10)))
    win = ReplayWindow()
    win.update(list_shards([tmp_path]))
    model = ml_model("cpu_small_ml", 4)
    for size in win.sizes:
        b = win.sample(np.random.default_rng(0), size, 16)
        with torch.no_grad():
            m = model(torch.from_numpy(b.planes))[1][:, 3].numpy().astype(np.float64)
            # the value loss is the cross-entropy of the win/draw/loss logits alone
            v = model(torch.from_numpy(b.planes))[1][:, :3].double().numpy()
            lse = np.log(np.exp(v - v.max(1, keepdims=True)).sum(1)) + v.max(1)
            want_v = (lse - v[np.arange(len(v)), b.outcome]).sum()
            base = losses(model, b, "cpu", 1.5)
            with_ml = losses(model, b, "cpu", 1.5, moves_left_weight=0.7)
        x = np.abs(m - b.plies_left / (size[0] * size[1]))
        d = MOVES_LEFT_HUBER_DELTA
        want = np.where(x <= d, 0.5 * x * x, d * (x - 0.5 * d)).sum()
        assert with_ml[4].item() == pytest.approx(want, rel=1e-5) and base[4].item() == pytest.approx(want, rel=1e-5)
        assert with_ml[0].item() == pytest.approx(base[0].item() + 0.7 * want, rel=1e-5)
        assert base[2].item() == pytest.approx(want_v, rel=1e-5) and with_ml[2].item() == base[2].item()
    plain = Net(get_preset("cpu_small")).eval()
    with pytest.raises(ValueError, match="moves-left head"):
        losses(plain, b, "cpu", 1.5, moves_left_weight=0.1)
    assert losses(plain, b, "cpu", 1.5)[4].item() == 0.0


def test_training_with_the_head_lowers_its_loss_and_a_padded_step_equals_the_per_size_one(tmp_path):
    from nets.replay import ReplayWindow
    from nets.shards import list_shards
    from nets.train import TrainConfig, Trainer

    write_shard(tmp_path / "d", "a", 4, 8, ((9, 10),))
    win = ReplayWindow()
    win.update(list_shards([tmp_path / "d"]))
    out = []
    for padded in (False, True):
        tr = Trainer(TrainConfig(preset="cpu_small_ml", per_size=24, seed=3, device="cpu", padded=padded,
                                 moves_left_weight=1.0, precision="fp32"), str(tmp_path / f"t{padded}"))
        contiguous_trainer(tr)  # one layout for both: oneDNN's channels_last kernels round differently per shape
        metrics = [tr.train_step(win) for _ in range(2)]
        out.append((metrics, tr.model.state_dict()))
    (m_ref, w_ref), (m_pad, w_pad) = out
    for a, b in zip(m_ref, m_pad):
        assert a["moves_left_loss"] == pytest.approx(b["moves_left_loss"], rel=1e-5, abs=1e-7)
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
    for k in w_ref:
        torch.testing.assert_close(w_pad[k].float(), w_ref[k].float(), rtol=1e-4, atol=1e-5, msg=k)
    tr = Trainer(TrainConfig(preset="cpu_small_ml", per_size=32, seed=0, device="cpu", lr=0.05,
                             moves_left_weight=2.0), str(tmp_path / "fit"))
    first = tr.train_step(win)["moves_left_loss"]
    for _ in range(40):
        last = tr.train_step(win)["moves_left_loss"]
    assert last < 0.5 * first, (first, last)
    plain = Trainer(TrainConfig(preset="cpu_small", per_size=8, seed=0, device="cpu"), str(tmp_path / "p"))
    assert "moves_left_loss" not in plain.train_step(win)


# ----------------------------------------------------------------------------- reporting


def test_a_net_player_reports_the_moves_left_of_a_net_with_the_head(tmp_path):
    from c4fast.config import EndgameConfig, SearchConfig
    from nets.netplayer import NetPlayer
    from nets.players import make_player

    model, path = ml_checkpoint(tmp_path, 0.5)
    game = c4fast.Game(9, 9, (0, 4))
    for playouts in (0, 30):
        p = NetPlayer(str(path), playouts=playouts, evaluator=TorchEvaluator(model),
                      endgame=EndgameConfig(max_empty=0))
        p.reset(game)
        p.choose(game)
        a = p.analysis()
        assert len(a["wdl"]) == 3 and 0 < a["moves_left"] <= 80, a
    # the utility at play time: a spec option, only used when given
    q = make_player(f"net:{path}:30:moves_left_slope=0.05,moves_left_cap=0.1", forward="eager")
    assert q.config.moves_left_slope == 0.05 and q.config.moves_left_cap == 0.1
    q.reset(game)
    q.choose(game)
    assert "moves_left" in q.analysis()
    plain = NetPlayer("uniform", playouts=30, evaluator=TorchEvaluator(Net(get_preset("tiny")).eval()),
                      search=SearchConfig(moves_left_slope=0.05), endgame=EndgameConfig(max_empty=0))
    plain.reset(game)
    plain.choose(game)
    assert "moves_left" not in plain.analysis()
