"""The package as users install it: a wheel built from the source tree, installed into a
fresh virtual environment outside it, running real commands from there.

An editable install (what CI and developers use) hides a missing package or data file;
this test does not: every import must come from the wheel. The environment sees the
machine's site-packages for the dependencies (torch, numba, ...), so nothing is
downloaded, and the test checks that ``c4fast``, ``nets`` and ``selfplay`` come from the
virtual environment, not from the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _source_copy(dst: Path) -> Path:
    """The files git tracks (or the tree without build outputs) copied to `dst`."""
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
                               ).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts]
    for f in filter(None, files):
        src = REPO / f
        if src.is_symlink() or not src.is_file():
            continue  # models/ (a link to nets/models) and deleted-but-tracked files
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / f)
    return dst


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(python of a fresh venv with the wheel installed, the wheel's path)."""
    root = tmp_path_factory.mktemp("pkg")
    src = _source_copy(root / "src")
    wheels = root / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("c4fast-*.whl")
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    inst = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert inst.returncode == 0, inst.stderr[-3000:]
    return py, wheel


def test_wheel_holds_every_package_and_data_file(venv):
    _, wheel = venv
    names = set(zipfile.ZipFile(wheel).namelist())
    for pkg in ("c4fast", "c4fast/players", "nets", "selfplay", "selfplay/apps/web", "selfplay/cluster", "selfplay/generation",
                "selfplay/evaluation", "selfplay/bench"):
        assert f"{pkg}/__init__.py" in names, pkg
    for f in ("nets/models/c4fast_cpu.npz", "nets/models/c4fast_cpu.pt", "nets/models/c4fast_gpu.npz",
              "nets/models/c4fast_std6x7.npz", "selfplay/apps/web/static/index.html"):
        assert f in names, f
    assert any(n.startswith("nets/_atomics") and n.endswith(".so") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "c4fast = selfplay.cli:main" in text and "net = nets.players" in text


def test_installed_commands_run_outside_the_source_tree(venv, tmp_path):
    py, _ = venv
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(py), "-c", "import c4fast, nets, selfplay, c4fast.players.bots, nets.players; "
                                           "print(c4fast.__file__); print(nets.MODELS_DIR)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert where.returncode == 0, where.stderr[-2000:]
    venv_root = str(py.parent.parent)
    assert all(line.startswith(venv_root) for line in where.stdout.split()), where.stdout

    # the console script: an arena match between two bots
    script = py.parent / "c4fast"
    arena = subprocess.run([str(script), "arena", "random", "greedy", "--pairs", "2", "--workers", "1",
                            "--sizes", "6x7", "--out", str(tmp_path / "games.jsonl")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert arena.returncode == 0, arena.stderr[-2000:]
    assert "random vs greedy: 4 games" in arena.stdout
    assert len((tmp_path / "games.jsonl").read_text().splitlines()) == 4

    # the player specs come from the registry, net: included (an entry point of the wheel)
    players = subprocess.run([str(script), "players"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    assert players.returncode == 0 and "net:PATH" in players.stdout and "alphabeta" in players.stdout

    # a one-move Saiblo exchange with the shipped model (package data): 9x9, forbidden
    # cell (8, 4) in Saiblo's coordinates, we move first
    saiblo = subprocess.run([str(py), "-m", "selfplay.apps.saiblo", "--time", "0.5"], cwd=tmp_path,
                            input=b"9 9 8 4\n-1 -1\n", env=env, capture_output=True, timeout=900)
    assert saiblo.returncode == 0, saiblo.stderr[-2000:]
    size = int.from_bytes(saiblo.stdout[:4], "big")  # a message is its length (4 bytes, big-endian), then "x y"
    x, y = (int(v) for v in saiblo.stdout[4:4 + size].split())
    assert 0 <= x < 9 and 0 <= y < 9 and (x, y) != (8, 4)
