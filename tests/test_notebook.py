"""notebooks/elo.ipynb executes headless on a small fixture run directory."""

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]


def make_fixture(run_dir: Path) -> None:
    """Simulated evaluation games of three checkpoints improving against fixed anchors."""
    rng = np.random.default_rng(0)
    true = {"random": 0.0, "greedy": 300.0, "uct:500": 500.0}
    ckpts = []
    for k, (step, elo) in enumerate(((200, 150.0), (400, 420.0), (600, 650.0))):
        name = f"net:{run_dir}/train/models/model_{step:08d}.pt:100"
        true[name] = elo
        ckpts.append((step, 4000 * (k + 1), 600.0 * (k + 1), name))
    recs = []
    names = list(true)
    for a in names:
        for b in names:
            if a == b:
                continue
            for _ in range(12):
                d = (true[a] + 30 - true[b]) / 400
                p_first = 1 / (1 + 10 ** -d)
                u = rng.random()
                res = 0 if abs(u - p_first) < 0.05 else (1 if u < p_first else 2)
                recs.append({"first": a, "second": b, "result": res})
    (run_dir / "arena").mkdir(parents=True)
    with open(run_dir / "arena" / "games.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    with open(run_dir / "elo_curve.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "samples", "wall_s", "elo", "elo_lo", "elo_hi", "checkpoint"])
        for step, samples, wall, name in ckpts:
            w.writerow([step, samples, wall, 0, 0, 0, name.split(":")[1]])


def test_elo_notebook_executes(tmp_path, monkeypatch):
    make_fixture(tmp_path / "run")
    monkeypatch.setenv("C4FAST_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(ROOT / "notebooks" / "elo.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = json.dumps([o for o in outputs])
    assert "evaluation games" in text and "image/png" in text
    assert (tmp_path / "run" / "elo_curve.png").exists()
