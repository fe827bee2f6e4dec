"""Untrusted model files (issue 37): checkpoints and numpy exports are checked against
bounds and against their own config before anything the size of the net is allocated;
every command that loads one answers with one error line, never a traceback. The files
are crafted here; the commands run as real processes."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import numpy as np
import pytest
import torch

from nets.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from nets.config import MAX_WEIGHTS, NET_LIMITS, PRESETS, NetConfig, export_shapes, get_preset
from nets.model import Net
from nets.numpy_net import NumpyNet, _export_arrays, export_numpy

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_NPZ = os.path.join(REPO, "models", "c4fast_cpu.npz")
HUGE_CONFIG = {"channels": 4096, "blocks": 40, "name": "custom", "in_planes": 9}
RSS_BOUND_KB = 1_500_000  # a command refusing a file stays far below the gigabytes it asks for


def _command(*args: str, stdin: str = "") -> tuple[subprocess.CompletedProcess, int]:
    """Run a `python -m ...` command; (its result, the peak RSS in KB of the children so far)."""
    r = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, input=stdin,
                       env=dict(os.environ, PYTHONPATH=REPO), timeout=300)
    return r, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def _one_error_line(r: subprocess.CompletedProcess, needle: str) -> None:
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if "error" in line.lower()]  # log lines aside
    assert len(lines) == 1 and needle in lines[0], r.stderr


def _huge_checkpoint(path) -> str:
    torch.save({"format": "c4fast-net", "format_version": 1, "num_planes": 9, "encoding_version": 1, "step": 1,
                "config": HUGE_CONFIG, "state_dict": {}}, path)
    return str(path)


def _npz_members(path: str) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _bomb(path) -> str:
    """2 MB on disk, 2 GiB inflated, no weights; the shipped net's config and meta."""
    m = _npz_members(MODEL_NPZ)
    np.savez_compressed(path, junk=np.zeros(2**31, np.uint8), __config__=m["__config__"], __meta__=m["__meta__"])
    return str(path)


# ------------------------------------------------------------------------- NetConfig
def test_net_config_bounds_hold_every_preset_and_refuse_beyond():
    for cfg in PRESETS.values():
        assert sum(np.prod(s) for s in export_shapes(cfg).values()) < MAX_WEIGHTS
    NetConfig(channels=NET_LIMITS["channels"], blocks=4)
    for field, limit in (("channels", NET_LIMITS["channels"]), ("blocks", NET_LIMITS["blocks"]),
                         ("value_hidden", NET_LIMITS["value_hidden"]), ("inner_blocks", NET_LIMITS["inner_blocks"])):
        kw = {"channels": 16, "blocks": 1, field: limit + 1}
        with pytest.raises(ValueError, match=f"NetConfig.{field} must be at most {limit}"):
            NetConfig(**kw)
    with pytest.raises(ValueError, match="weights, over the bound"):
        NetConfig(channels=512, blocks=64)  # every field within its bound, the whole net not


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_export_shapes_are_the_shapes_the_exporter_writes(preset):
    cfg = get_preset(preset)
    arrays = _export_arrays(Net(cfg).eval())
    assert {k: v.shape for k, v in arrays.items()} == export_shapes(cfg)


# ------------------------------------------------------------------------ checkpoints
def test_a_checkpoint_asking_for_a_huge_net_is_refused_with_one_line(tmp_path):
    path = _huge_checkpoint(tmp_path / "big.pt")
    with pytest.raises(CheckpointError, match="channels must be at most 512"):
        load_checkpoint(path)
    r, rss = _command("selfplay.evaluation.arena", f"net:{path}:10", "random", "--pairs", "1")
    _one_error_line(r, "channels must be at most 512")
    assert rss < RSS_BOUND_KB


def test_state_dict_names_shapes_and_dtypes_are_checked_before_the_net_is_built(tmp_path):
    cfg = get_preset("tiny")
    good = tmp_path / "good.pt"
    save_checkpoint(good, Net(cfg), cfg, step=3)
    obj = torch.load(good, weights_only=True)

    def variant(name, edit):
        o = {**obj, "state_dict": dict(obj["state_dict"])}
        edit(o["state_dict"])
        torch.save(o, tmp_path / name)
        return tmp_path / name

    with pytest.raises(CheckpointError, match=r"input_conv.weight' has shape \(16, 9, 5, 5\)"):
        load_checkpoint(variant("shape.pt", lambda s: s.update({"input_conv.weight": torch.zeros(16, 9, 5, 5)})))
    with pytest.raises(CheckpointError, match="float64"):
        load_checkpoint(variant("dtype.pt", lambda s: s.update({"input_conv.bias": torch.zeros(16, dtype=torch.float64)})))
    with pytest.raises(CheckpointError, match="unexpected \\['extra'\\]"):
        load_checkpoint(variant("extra.pt", lambda s: s.update({"extra": torch.zeros(1)})))
    with pytest.raises(CheckpointError, match="missing \\['input_conv.bias'\\]"):
        load_checkpoint(variant("missing.pt", lambda s: s.pop("input_conv.bias")))
    # a config within the bounds (~30 M weights) with no weights: refused, nothing built
    big = {"channels": 512, "blocks": 8, "name": "custom", "in_planes": 9}
    torch.save({**obj, "config": big, "state_dict": {}}, tmp_path / "empty.pt")
    r, rss = _command("selfplay.evaluation.arena", f"net:{tmp_path / 'empty.pt'}:10", "random", "--pairs", "1")
    _one_error_line(r, "state_dict does not fit")
    assert rss < RSS_BOUND_KB
    load_checkpoint(good)  # the untouched file still loads


# ----------------------------------------------------------------------- numpy exports
def test_a_decompression_bomb_export_is_refused_with_one_line(tmp_path):
    path = _bomb(tmp_path / "bomb.npz")
    assert os.path.getsize(path) < 4_000_000
    with pytest.raises(ValueError, match="does not hold the arrays of its config"):
        NumpyNet.load(path)
    r, rss = _command("selfplay.evaluation.arena", f"net:{path}:10", "random", "--pairs", "1")
    _one_error_line(r, "does not hold the arrays of its config")
    assert rss < RSS_BOUND_KB


def test_export_members_are_checked_before_they_are_read(tmp_path):
    good = _npz_members(MODEL_NPZ)

    def refused(name, match, **changes):
        arrays = {**good, **changes}
        arrays = {k: v for k, v in arrays.items() if v is not None}
        np.savez_compressed(tmp_path / name, **arrays)
        with pytest.raises(ValueError, match=match):
            NumpyNet.load(tmp_path / name)

    refused("big_member.npz", r"member 'input.w' declares 1,073,741,952 bytes",
            **{"input.w": np.zeros(2**28, np.float32)})
    refused("shape.npz", r"member 'input.b' is float32\[65\], expected float32\[64\]",
            **{"input.b": np.zeros(65, np.float32)})
    refused("dtype.npz", r"member 'input.b' is float64", **{"input.b": np.zeros(64, np.float64)})
    refused("missing.npz", r"missing \['v.fc2.b'\]", **{"v.fc2.b": None})
    refused("no_meta.npz", "no __meta__ member", __meta__=None)
    refused("nan.npz", "non-finite", **{"v.fc2.b": np.full(3, np.nan, np.float32)})
    refused("huge_config.npz", "channels must be at most 512", __config__=np.array(json.dumps(HUGE_CONFIG)))
    (tmp_path / "text.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable numpy net"):
        NumpyNet.load(tmp_path / "text.npz")


def test_an_export_reads_back_exactly(tmp_path):
    cfg = get_preset("tiny")
    net = Net(cfg).eval()
    path = export_numpy(net, tmp_path / "tiny.npz")
    loaded = NumpyNet.load(path)
    assert loaded.config == cfg
    for k, v in _export_arrays(net).items():
        assert np.array_equal(loaded.p[k], v) and loaded.p[k].flags.writeable


# -------------------------------------------------------------------------- commands
@pytest.mark.parametrize("command", ["play", "rate", "saiblo"])
def test_every_command_that_loads_a_model_says_why_in_one_line(tmp_path, command):
    big, bomb = _huge_checkpoint(tmp_path / "big.pt"), _bomb(tmp_path / "bomb.npz")
    for path, needle in ((big, "channels must be at most 512"), (bomb, "does not hold the arrays")):
        if command == "play":
            r, _ = _command("selfplay.apps.play", "--engine", f"net:{path}:10", stdin="q\n")
        elif command == "rate":
            r, _ = _command("selfplay.evaluation.rate", path, "--out", str(tmp_path / "rate"), "--pairs", "1",
                            "--anchors", "random")
        else:
            r, _ = _command("selfplay.apps.saiblo", "--model", path, stdin="9 9 0 0\n")
        _one_error_line(r, needle)
