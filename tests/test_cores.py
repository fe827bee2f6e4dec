"""The loop's core split: the pure rule against an independent reference, and a real
measurement on this machine (its figures are only checked for sense, never for speed)."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selfplay.generation.cores import CoreSplit, RoleCosts, measure_costs, split_cores

cost = st.floats(1e-7, 1e-2, allow_nan=False)


def reference_shares(cores, costs: RoleCosts, ratio):
    """Each role's share of the cores, in proportion to its core-seconds per generated sample."""
    e = costs.evals_per_sample
    per = {"server": e * costs.forward_s_per_eval, "search": e * costs.search_s_per_eval,
           "trainer": ratio * costs.train_s_per_sample}
    return {k: cores * v / sum(per.values()) for k, v in per.items()}, cores / sum(per.values())


@settings(max_examples=300, deadline=None)
@given(cores=st.integers(1, 64), fwd=cost, search=cost, train=cost, evals=st.floats(1, 1000),
       ratio=st.floats(0.5, 16))
def test_the_split_follows_the_costs_within_rounding(cores, fwd, search, train, evals, ratio):
    costs = RoleCosts(fwd, search, train, evals)
    plan = split_cores(cores, costs, ratio)
    shares, rate = reference_shares(cores, costs, ratio)
    assert plan.shares == pytest.approx({k: round(v, 3) for k, v in shares.items()}, abs=1e-3)
    assert math.isclose(plan.samples_per_s, round(rate, 2), rel_tol=1e-6, abs_tol=0.01)
    assert plan.workers >= 1 and plan.server_threads >= 1 and plan.train_threads >= 1
    assert plan.workers == max(1, math.ceil(shares["search"] - 1e-9))
    if cores >= 2:
        assert plan.server_threads + plan.train_threads <= cores
        # whole threads stay within a core of the shares, unless the floor of 1 lifts them
        assert plan.server_threads <= max(1, shares["server"] + 1)
        assert plan.train_threads <= max(1, shares["trainer"] + 1)
        if shares["server"] >= 1.5 and shares["trainer"] >= 1.5:
            assert abs(plan.server_threads - shares["server"]) <= 1
            assert abs(plan.train_threads - shares["trainer"]) <= 1


def test_golden_splits():
    # a forward of 120 us per evaluation, 68 evaluations per sample, a 1 ms trainer sample at
    # ratio 6 (the cpu preset on the AMX machine): 8.2 vs 6 ms per sample
    costs = RoleCosts(1.2e-4, 2.6e-6, 1e-3, 68.0)
    assert dataclasses.astuple(split_cores(2, costs, 6.0))[:3] == (1, 1, 1)
    assert dataclasses.astuple(split_cores(16, costs, 6.0))[:3] == (1, 9, 7)
    assert dataclasses.astuple(split_cores(1, costs, 6.0))[:3] == (1, 1, 1)
    # a trainer four times as costly takes most of 8 cores
    assert dataclasses.astuple(split_cores(8, RoleCosts(1.2e-4, 2.6e-6, 4e-3, 68.0), 6.0))[:3] == (1, 2, 6)


def test_bad_inputs_are_refused():
    costs = RoleCosts(1e-4, 1e-6, 1e-3, 50.0)
    for cores in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="cores"):
            split_cores(cores, costs, 6.0)
    with pytest.raises(ValueError, match="ratio"):
        split_cores(2, costs, float("nan"))
    with pytest.raises(ValueError, match="train_s_per_sample"):
        RoleCosts(1e-4, 1e-6, 0.0, 50.0)
    assert isinstance(split_cores(3, costs, 0.0), CoreSplit)


def test_a_real_measurement_is_cached_per_machine(tmp_path, monkeypatch):
    from c4fast.config import SearchConfig
    from selfplay.generation.config import SelfPlayConfig

    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    search = SearchConfig(full_playouts=16, fast_playouts=4, full_probability=0.5)
    args = ("tiny", [(6, 7)], search, SelfPlayConfig(), "fused", 64, "fp32", 4)
    costs = measure_costs(*args, seconds=0.3)
    assert costs.forward == "fused" and costs.evals_per_sample >= 1
    assert 0 < costs.search_s_per_eval < 1 and 0 < costs.forward_s_per_eval < 1 and 0 < costs.train_s_per_sample < 10
    assert (tmp_path / "forward.json").exists()
    assert measure_costs(*args, seconds=0.3) == costs  # the cache: the same figures, not a new timing


def test_the_benchmark_prints_the_machine_the_costs_and_the_splits(tmp_path, monkeypatch, capsys):
    import json

    from selfplay.generation.cores import main

    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    assert main(["--preset", "standard", "--cores", "2,4"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["bench"] == "cores" and out["cpu_model"] and out["net"] == "cpu_small"
    assert set(out["splits"]) == {"2", "4"} and out["splits"]["2"]["server_threads"] == 1
    assert set(out["per_sample_ms"]) == {"server", "search", "trainer"}
