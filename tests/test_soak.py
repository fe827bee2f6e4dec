"""The soak command: its growth detector against hand-made series, and a short real soak
(the dummy loop and the web board with one synthetic client) writing its CSV, JSON and plot."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selfplay.bench.soak import analyse, slope_per_hour


def _rows(role, values, every=10.0, pid=1):
    return [{"t": i * every, "pid": pid, "role": role, "rss_mb": v, "fds": 10, "threads": 1}
            for i, v in enumerate(values)]


def test_slope_golden_values():
    assert slope_per_hour([0, 1800, 3600], [100, 150, 200]) == pytest.approx(100.0)
    assert slope_per_hour([0, 10], [1, 2]) == 0.0  # too few points to say
    assert slope_per_hour([5, 5, 5], [1, 2, 3]) == 0.0


@settings(max_examples=60, deadline=None)
@given(base=st.floats(50, 2000), leak=st.floats(0, 400), noise_seed=st.integers(0, 1000))
def test_growth_flag_matches_the_rule(base, leak, noise_seed):
    """A series rising `leak` MB/h (plus bounded noise) is flagged exactly when the leak is
    clearly above both thresholds, and never when it is clearly below one."""
    import random

    rng = random.Random(noise_seed)
    ts = [i * 60.0 for i in range(61)]  # an hour, one sample a minute
    values = [base + leak * t / 3600 + rng.uniform(-0.5, 0.5) for t in ts]
    out = analyse(_rows("r", values, every=60.0), warmup_s=300, max_growth_mb=20)["r"]
    threshold = max(20.0, 0.10 * (base + leak * 300 / 3600))
    if leak > 1.1 * threshold + 2:
        assert out["growth"]
    elif leak < 0.9 * threshold - 2:
        assert not out["growth"]
    assert out["rss_mb_peak"] >= out["rss_mb_at_end"] - 1e-9


def test_roles_sum_their_processes_and_restarts_count():
    rows = _rows("w", [100] * 40, pid=1) + _rows("w", [50] * 40, pid=2)
    out = analyse(rows, warmup_s=0, max_growth_mb=20)["w"]
    assert out["rss_mb_at_end"] == 150 and out["processes"] == 2 and not out["growth"]


@pytest.mark.slow
def test_a_short_real_soak_writes_its_reports(tmp_path):
    pytest.importorskip("starlette")
    out = tmp_path / "soak"
    proc = subprocess.run([sys.executable, "-m", "selfplay.bench.soak", "--minutes", "0.5", "--preset", "dummy",
                           "--out", str(out), "--every", "2", "--clients", "1", "--pause", "0.1",
                           "--warmup", "0"], capture_output=True, text=True, timeout=600)
    report = json.loads((out / "soak.json").read_text())
    assert report["error"] is None, (report["error"], proc.stderr[-2000:])
    roles = report["roles"]
    assert any(r.startswith("loop:selfplay.generation.loop") for r in roles) and "web:selfplay.apps.web" in roles
    assert any("selfplay.generation.run" in r for r in roles) and any("nets.train" in r for r in roles)
    assert report["web"]["requests"] > 0
    with open(out / "soak.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and {"t", "pid", "role", "rss_mb", "fds", "threads"} <= set(rows[0])
    assert all(float(r["rss_mb"]) > 0 for r in rows)
    assert (out / "soak.png").stat().st_size > 1000
    assert proc.returncode in (0, 1)  # 1: a 30-second run still warming up may show "growth"
    bad = subprocess.run([sys.executable, "-m", "selfplay.bench.soak", "--minutes", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "error" in bad.stderr
