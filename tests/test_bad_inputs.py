"""Bad paths and values get a clear message and exit code 2, and write nothing.

Each case runs the real command in a subprocess (or the real function), as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import c4fast

ROOT = Path(__file__).resolve().parents[1]


def run(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("forbidden", [(0.5, 1.7), (1,), "ab", (True, 1), (1, 2, 3)])
def test_a_forbidden_cell_that_is_not_two_integers_is_refused(forbidden):
    with pytest.raises(ValueError, match="integers"):
        c4fast.Game(6, 7, forbidden)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_loop_minutes_must_be_a_finite_positive_number(tmp_path, value):
    proc = run("selfplay.generation.loop", "--preset", "dummy", "--dir", str(tmp_path / "run"), "--minutes", value)
    assert proc.returncode == 2 and "minutes" in proc.stderr
    assert not (tmp_path / "run" / "loop.json").exists()


def test_loop_dir_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    proc = run("selfplay.generation.loop", "--preset", "dummy", "--dir", str(f))
    assert proc.returncode == 2 and "is a file" in proc.stderr and f.read_text() == "x"


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_train_on_cuda_without_cuda(tmp_path):
    proc = run("nets.train", "--follow", str(tmp_path / "f"), "--out", str(tmp_path / "o"), "--device", "cuda")
    assert proc.returncode == 2 and "CUDA is not available" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_arena_out_that_is_a_directory_or_under_a_file(tmp_path):
    proc = run("selfplay.evaluation.arena", "random", "greedy", "--pairs", "1", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--out" in proc.stderr
    f = tmp_path / "file"
    f.write_text("x")
    proc = run("selfplay.evaluation.arena", "random", "greedy", "--pairs", "1", "--out", str(f / "games.jsonl"))
    assert proc.returncode == 2 and "--out" in proc.stderr


def test_bundle_output_path_is_checked_before_building(tmp_path):
    proc = run("selfplay.apps.saiblo", "--bundle", str(tmp_path / "missing" / "b.zip"))
    assert proc.returncode == 2 and "not a writable file path" in proc.stderr
    assert not (tmp_path / "missing").exists()


def test_importing_the_checkpoint_module_keeps_the_umask():
    code = ("import os; before = os.umask(0o027); os.umask(before); os.umask(0o027)\n"
            "import nets.checkpoint, nets.train\n"
            "print(oct(os.umask(0o027)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "0o27", out.stderr


def test_a_preset_that_contradicts_the_model_is_refused(tmp_path):
    from nets.checkpoint import save_checkpoint
    from nets.config import get_preset
    from nets.model import build_model

    path = tmp_path / "model_00000001.pt"
    save_checkpoint(path, build_model(get_preset("tiny")), get_preset("tiny"), 1)
    proc = run("selfplay.generation.run", "--out", str(tmp_path / "o"), "--model", str(path), "--preset", "cpu_small")
    assert proc.returncode == 2 and "conflicts with --model" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_the_trainer_clears_temp_files_of_a_killed_writer(tmp_path):
    out = tmp_path / "o"
    (out / "models").mkdir(parents=True)
    stale = [out / "train_state.pt.abc123.tmp", out / "models" / "model_00000010.pt.xyz.tmp"]
    for p in stale:
        p.write_bytes(b"partial")
    proc = run("nets.train", "--follow", str(tmp_path / "f"), "--out", str(out), "--preset", "tiny",
               "--max-wait", "0.5", "--poll", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert not any(p.exists() for p in stale)


def test_a_config_file_with_an_unknown_key_names_it(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"gpus": 0, "searchh": {}}')
    proc = run("selfplay.generation.run", "--config", str(cfg), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "searchh" in proc.stderr
    cfg.write_text("{not json")
    proc = run("selfplay.generation.run", "--config", str(cfg), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    assert not (tmp_path / "o").exists()
