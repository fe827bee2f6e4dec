"""CPU precisions (issue 34): what the processor offers, the bf16 engine against eager fp32,
and ``--forward auto``'s measured choice. Tests that need bf16 or int8 instructions skip
cleanly on CPUs without them; nothing here asserts a speed."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
import torch

from nets import precision
from nets.config import get_preset
from nets.model import build_model
from nets.precision import CpuInfo, PrecisionUnavailable, choose_forward, cpu_info

HERE = cpu_info()
needs_bf16 = pytest.mark.skipif(not HERE.has("bf16"), reason="this CPU has no bf16 instructions")

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Test CPU
flags\t\t: fpu sse2 avx avx2 fma avx512f {extra}

processor\t: 1
model name\t: Intel(R) Xeon(R) Test CPU
flags\t\t: fpu sse2 avx avx2 fma avx512f {extra}
"""


@pytest.mark.parametrize("extra, want", [
    ("", ("fp32",)),
    ("avx_vnni", ("fp32", "int8")),
    ("avx512_bf16 avx512_vnni", ("fp32", "bf16", "int8")),
    ("amx_bf16 amx_tile amx_int8", ("fp32", "bf16", "int8")),
])
def test_cpu_info_reads_the_flags(tmp_path, extra, want):
    f = tmp_path / "cpuinfo"
    f.write_text(CPUINFO.format(extra=extra))
    info = cpu_info(str(f))
    assert info.model == "Intel(R) Xeon(R) Test CPU" and info.precisions == want
    if "bf16" not in want:
        with pytest.raises(PrecisionUnavailable, match="lacks bf16 instructions"):
            info.require("bf16")
    assert json.loads(json.dumps(info.to_dict()))["precisions"] == list(want)


def test_matmul_peaks_are_measured_for_each_native_precision():
    roof = precision.roofline(threads=1, seconds=0.05)
    assert set(roof["peak_gflops"]) == set(HERE.precisions)
    assert all(v > 0 for v in roof["peak_gflops"].values())
    assert roof["best_peak"] == max(roof["peak_gflops"].values()) and roof["cpu_model"] == HERE.model


@pytest.fixture
def small_net():
    torch.manual_seed(0)
    return build_model(get_preset("tiny")).eval()


@needs_bf16
def test_bf16_engine_agrees_with_eager_fp32_within_the_bf16_tolerance(small_net):
    from nets.backends import CpuBackend, tolerance_of
    from nets.selfcheck import TOLERANCES, self_check

    assert tolerance_of("bf16") == TOLERANCES["bf16"]
    be = CpuBackend(small_net, "bf16", threads=1)

    def ref(x):
        with torch.inference_mode():
            pol, val = small_net(torch.from_numpy(np.asarray(x, np.float32)))
        return pol, torch.softmax(val, 1)

    for h, w in ((6, 7), (9, 12), (12, 12)):
        err = self_check("bf16", lambda x: precision._wdl(be(np.asarray(x, np.float32))), ref, h, w, 16,
                         small_net.config.in_planes, tolerance_of("bf16"))
        assert err["finite"]
    pol, val = be(np.zeros((3, small_net.config.in_planes, 9, 9), np.float32))
    assert pol.dtype == np.float32 and pol.shape == (3, 81) and val.shape == (3, 3)


def test_an_engine_the_cpu_cannot_run_is_refused_with_the_reason(small_net, monkeypatch):
    from nets.backends import CpuBackend

    monkeypatch.setattr(precision, "cpu_info", lambda path="/proc/cpuinfo": CpuInfo("Old CPU", frozenset({"avx2"})))
    for kind, what in (("bf16", "bf16"), ("ort_int8", "int8")):
        with pytest.raises(PrecisionUnavailable, match=f"lacks {what} instructions"):
            CpuBackend(small_net, kind, threads=1)


def test_auto_picks_the_fastest_engine_that_passes_and_caches_it(small_net, tmp_path, monkeypatch):
    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    choice = choose_forward(small_net, [(9, 9), (12, 12)], batch=32, threads=1, budget_s=1.0)
    speeds = {k: v for k, v in choice.table.items() if isinstance(v, float)}
    assert choice.kind in speeds and speeds[choice.kind] == max(speeds.values()) and not choice.cached
    assert set(choice.table) == set(precision.AUTO_CANDIDATES)
    for kind, v in choice.table.items():
        if precision.PRECISION_OF[kind] not in HERE.precisions:
            assert v == f"no {precision.PRECISION_OF[kind]} instructions"
        else:  # timed, or probed and left out as too slow (or refused: no runtime here), or
            # skipped or left untimed for lack of budget on a slow or busy machine
            assert isinstance(v, float) or v.startswith(("probe ", "refused: ", "skipped: ")), v
    again = choose_forward(small_net, [(9, 9), (12, 12)], batch=32, threads=1, budget_s=1.0)
    cut = any(str(v).startswith("skipped: ") or "no time left" in str(v) for v in choice.table.values())
    assert not (cut and choice.complete)
    assert again.cached == choice.complete  # a choice cut short by the budget is not reused as it is
    if again.cached:
        assert again.kind == choice.kind and again.table == choice.table and again.complete
    else:  # the second start went on from the first
        assert again.starts == 2 and choice.starts == 1
    other = choose_forward(small_net, [(9, 9), (12, 12)], batch=64, threads=1, budget_s=1.0)
    assert not other.cached  # another batch: another key


@given(k=st.integers(1, 5), n_inputs=st.integers(1, 4), budget=st.integers(0, 200000),
       cost=st.lists(st.integers(1, 9), min_size=5, max_size=5))
def test_auto_times_no_engine_right_after_another_engine(k, n_inputs, budget, cost):
    """A model of a predecessor's spinning threads: on a clock of ticks, a call of engine i
    on input j costs 300 cost[i] (j + 1) ticks after a call of the same engine on the same
    input and 1,000 more otherwise. The timed figures carry none of the 1,000s, every input
    is timed; with several engines the rounds go on while the next one (as long as that
    input's last round) fits before the deadline: none after the first pass ends past it,
    and the round that would have come next would not have fitted."""
    now, last = [0], [None]
    inputs = [np.zeros((8 * (j + 1), 1)) for j in range(n_inputs)]
    index = {id(x): j for j, x in enumerate(inputs)}
    calls = Counter()
    ends = []  # (input, clock) at the end of each round: the last engine's timed call

    def engine(i):
        def call(x):
            calls[i, id(x)] += 1
            now[0] += 300 * cost[i] * (index[id(x)] + 1) + (0 if last[0] == (i, id(x)) else 1000)
            last[0] = (i, id(x))
            if i == k - 1 and calls[i, id(x)] % 2 == 0:
                ends.append((index[id(x)], now[0]))
        return call

    speeds = precision.time_engines({f"e{i}": engine(i) for i in range(k)}, inputs, budget,
                                    clock=lambda: now[0])
    for i in range(k):
        # each timed call on input j costs 300 cost[i] (j + 1) ticks
        n = [calls[i, id(x)] // 2 for x in inputs]
        assert min(n) >= 1 and all(c % 2 == 0 for (e, _), c in calls.items() if e == i)
        positions = sum(m * len(x) for m, x in zip(n, inputs))
        ticks = sum(m * 300 * cost[i] * (j + 1) for j, m in enumerate(n))
        assert speeds[f"e{i}"] == round(positions / ticks, 1)
    rounds = len(ends)
    if k == 1:
        assert rounds == n_inputs  # a lone engine: the first pass only
        return
    def round_ticks(j):  # every round on input j costs the same here
        return sum(1000 + 600 * c * (j + 1) for c in cost[:k])
    assert [j for j, _ in ends] == [r % n_inputs for r in range(rounds)]
    assert all(t <= budget for _, t in ends[n_inputs:])  # past the first pass: nothing ends late
    assert now[0] + round_ticks(rounds % n_inputs) > budget  # it stopped only when the next would not fit


@given(speeds=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=5),
       n_inputs=st.integers(1, 4), left=st.floats(-1.0, 20.0))
def test_auto_times_the_finalists_whose_first_pass_fits_in_the_budget_left(speeds, n_inputs, left):
    """plan_timing against a brute force: the longest prefix of the finalists (fastest
    first) whose passes add up to at most `left`, at least the first; a lone one on the
    longest prefix of the inputs that fits, at least one."""
    kinds = [f"e{i}" for i in range(len(speeds))]
    costs = {k: [s * (j + 1) for j in range(n_inputs)] for k, s in zip(kinds, speeds)}
    kept, n = precision.plan_timing(kinds, costs, left)
    fits = [m for m in range(1, len(kinds) + 1) if sum(sum(costs[k]) for k in kinds[:m]) <= left]
    assert kept == kinds[:max([1] + fits)]
    if len(kept) > 1:
        assert n == n_inputs
    else:
        fit = [m for m in range(1, n_inputs + 1) if sum(costs[kept[0]][:m]) <= left]
        assert n == max([1] + fit)


def test_auto_starts_the_fastest_native_precision_first():
    avx2 = CpuInfo("AVX2 CPU", frozenset({"avx2"}))
    amx = CpuInfo("AMX CPU", frozenset({"avx2", "avx512f", "amx_bf16", "amx_int8", "avx512_vnni"}))
    assert precision._start_order(precision.AUTO_CANDIDATES, avx2)[:3] == ["ort", "fused", "ov"]
    assert precision._start_order(precision.AUTO_CANDIDATES, amx) == ["bf16", "ov_bf16", "ort_int8", "ort",
                                                                      "fused", "ov"]


def test_auto_with_no_budget_times_one_engine_a_start_and_settles_after_the_last(small_net, tmp_path, monkeypatch):
    """A budget of 0 s: each start starts, probes and times (on one input) the first engine
    that passes among those no earlier start tried, and skips the rest; the cut-short choice
    is cached unfinished, each start keeps the earlier starts' figures and picks the best of
    all, and after AUTO_MAX_STARTS starts that is the choice, reused as it is."""
    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    order = [k for k in precision._start_order(precision.AUTO_CANDIDATES, HERE)
             if precision.PRECISION_OF[k] in HERE.precisions]
    timed_so_far = []
    for start in range(1, precision.AUTO_MAX_STARTS + 1):
        choice = choose_forward(small_net, [(9, 9), (12, 12)], batch=32, threads=1, budget_s=0.0)
        timed = [k for k in order if isinstance(choice.table[k], float)]
        new = [k for k in timed if k not in timed_so_far]
        passing = [k for k in order if not choice.table[k].__str__().startswith("refused: ")]
        assert new == [k for k in passing if k not in timed_so_far][:1]  # the next untried engine that passes
        timed_so_far += new
        assert sorted(timed) == sorted(timed_so_far) and choice.kind == max(timed, key=choice.table.get)
        assert not choice.complete and not choice.cached
        assert choice.starts == start and choice.final == (start == precision.AUTO_MAX_STARTS)
        for kind in passing:
            if kind not in timed:
                assert choice.table[kind].startswith("skipped: starting engines used 60% of the 0 s budget"), kind
        entry = next(iter(json.loads((tmp_path / "forward.json").read_text()).values()))
        assert entry["starts"] == start and entry["complete"] is False
        assert ("settled" in entry) == (start < precision.AUTO_MAX_STARTS)
    assert len(timed_so_far) == min(precision.AUTO_MAX_STARTS, len(passing))
    reused = choose_forward(small_net, [(9, 9), (12, 12)], batch=32, threads=1, budget_s=0.0)
    assert reused.cached and reused.kind == choice.kind and reused.table == choice.table
    assert reused.starts == precision.AUTO_MAX_STARTS and not reused.complete and reused.final


def test_auto_goes_on_from_a_start_the_budget_cut_short(small_net, tmp_path, monkeypatch):
    """An unfinished cache entry that settled every engine but ``ort``: the next start
    starts ``ort`` and the earlier best (``fused``) only, keeps the other verdicts and
    figures as they were, and caches the complete choice."""
    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    sizes, cands = [(9, 9), (12, 12)], precision.AUTO_CANDIDATES
    key = precision._cache_key(small_net.config, 1, sizes, 32, cands)
    earlier = {k: "refused: an earlier start's verdict" for k in cands}
    earlier.update(ort="skipped: starting engines used 60% of the 5 s budget", fused=5.0, ov=3.0)
    (tmp_path / "forward.json").write_text(json.dumps({key: {
        "kind": "fused", "precision": "fp32", "table": earlier, "seconds": 5.1, "complete": False, "starts": 1,
        "tried": [k for k in cands if k != "ort"], "settled": [k for k in cands if k != "ort"]}}))
    choice = choose_forward(small_net, sizes, batch=32, threads=1, budget_s=120.0)
    assert not choice.cached and choice.starts == 2 and choice.complete and choice.final
    started = {k for k, v in choice.table.items() if v != earlier[k]}
    assert started <= {"ort", "fused"} and "ort" in started
    assert {k: v for k, v in choice.table.items() if k not in {"ort", "fused"}} == \
        {k: v for k, v in earlier.items() if k not in {"ort", "fused"}}  # ov's 3.0 carried, not timed again
    speeds = {k: v for k, v in choice.table.items() if isinstance(v, float)}
    assert choice.kind == max(speeds, key=speeds.get) and speeds[choice.kind] > 5.0
    again = choose_forward(small_net, sizes, batch=32, threads=1, budget_s=120.0)
    assert again.cached and again.complete and again.kind == choice.kind and again.table == choice.table


@pytest.mark.parametrize("entry, cached, starts", [
    ({"kind": "ort", "table": {"ort": 100.0}}, True, 1),  # written before unfinished entries: complete
    ({"kind": "ort", "table": {"ort": "refused: edited"}}, False, 1),  # no figure for its choice
    ({"kind": "ort", "table": {"ort": float("nan")}}, False, 1),
    ({"kind": "nope", "table": {"nope": 100.0}}, False, 1),
    ({"kind": "ort", "table": [100.0]}, False, 1),
    ({"kind": "ort", "table": {"ort": 100.0}, "complete": False, "starts": 1}, False, 1),  # no lists: afresh
    ({"kind": "ort", "table": {"ort": 100.0}, "complete": False, "starts": True, "tried": ["ort"],
      "settled": []}, False, 2),  # a bool is no count: one start before
    ({"kind": "ort", "table": {"ort": 100.0}, "complete": False, "starts": 2, "tried": ["ort", 7, ["x"]],
      "settled": "ort"}, False, 1)])  # a string is no list: afresh
def test_auto_reads_a_hand_edited_cache_entry_or_measures_afresh(small_net, tmp_path, monkeypatch, entry, cached,
                                                                starts):
    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    sizes = [(9, 9), (12, 12)]
    key = precision._cache_key(small_net.config, 1, sizes, 32, precision.AUTO_CANDIDATES)
    (tmp_path / "forward.json").write_text(json.dumps({key: entry}))
    choice = choose_forward(small_net, sizes, batch=32, threads=1, budget_s=0.0)
    assert choice.cached == cached and choice.starts == starts
    assert isinstance(choice.table[choice.kind], float) and choice.precision == precision.PRECISION_OF[choice.kind]
    if starts == 2:  # went on from the entry: one engine never tried started and timed, ort's figure kept
        assert choice.table["ort"] == 100.0
        assert len([k for k, v in choice.table.items() if isinstance(v, float) and k != "ort"]) == 1


def test_auto_drops_an_engine_that_fails_its_self_check(small_net, tmp_path, monkeypatch):
    """With an impossible tolerance every engine but exact fp32 ones fails the real check."""
    from nets import backends
    from nets.selfcheck import Tolerance

    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backends, "tolerance_of", lambda kind: Tolerance(policy_rel=1e-12, wdl_abs=1e-12))
    with pytest.raises(RuntimeError, match="no CPU forward engine passed"):
        choose_forward(small_net, [(9, 9)], batch=16, threads=1, budget_s=0.5, use_cache=False)


def test_the_trainer_trains_in_bf16_by_default_only_where_the_cpu_has_bf16_units(monkeypatch):
    from nets.train import TrainConfig

    auto = TrainConfig(preset="tiny", device="cpu")
    monkeypatch.setattr(precision, "cpu_info", lambda path="/proc/cpuinfo": CpuInfo("Old CPU", frozenset({"avx2"})))
    assert auto.resolved_precision() == "fp32"
    with pytest.raises(PrecisionUnavailable, match="bf16"):
        TrainConfig(preset="tiny", device="cpu", precision="bf16").resolved_precision()
    monkeypatch.setattr(precision, "cpu_info",
                        lambda path="/proc/cpuinfo": CpuInfo("AMX CPU", frozenset({"avx512_bf16", "amx_bf16"})))
    assert auto.resolved_precision() == "bf16"
    assert TrainConfig(preset="tiny", device="cpu", precision="fp32").resolved_precision() == "fp32"


def test_a_net_player_computes_in_openvino_bf16_only_where_the_cpu_has_bf16_units(monkeypatch):
    """auto_play_forward: ov_bf16 with bf16 units (and OpenVINO installed), else ONNX Runtime."""
    from nets.netplayer import auto_play_forward

    monkeypatch.setattr(precision, "cpu_info", lambda path="/proc/cpuinfo": CpuInfo("Old CPU", frozenset({"avx2"})))
    assert auto_play_forward() == "ort"
    monkeypatch.setattr(precision, "cpu_info",
                        lambda path="/proc/cpuinfo": CpuInfo("AMX CPU", frozenset({"avx512_bf16", "amx_bf16"})))
    pytest.importorskip("openvino")
    assert auto_play_forward() == "ov_bf16"


def _entry(starts, table, settled=None, tried=None, complete=False):
    """A cached choice as choose_forward writes it: its kind the fastest figure of `table`."""
    kind = max((k for k, v in table.items() if isinstance(v, float)), key=table.get)
    e = {"kind": kind, "precision": precision.PRECISION_OF[kind], "table": table, "seconds": 1.0,
         "complete": complete, "starts": starts}
    if settled is not None:
        e["settled"], e["tried"] = sorted(settled), sorted(tried if tried is not None else settled)
    return e


def test_a_start_that_wrote_meanwhile_is_counted_and_its_verdicts_kept():
    """Two starts that read the same unfinished entry (or none) write in turn: the second's
    entry counts both starts and keeps what only the first settled; a final entry of either
    stands; an entry with fewer starts than this one read is an older one, replaced."""
    skip = "skipped: starting engines used 60% of the 5 s budget"
    first = _entry(1, {"ort": 10.0, "fused": skip, "bf16": "no bf16 instructions"}, settled={"bf16"},
                   tried={"ort", "bf16"})
    second = _entry(1, {"ort": skip, "fused": 20.0, "bf16": "no bf16 instructions"}, settled={"bf16", "fused"},
                    tried={"fused", "bf16"})
    merged = precision._merge_starts(first, second)
    assert merged["starts"] == 2 and not merged["complete"]
    assert merged["table"] == {**second["table"], "ort": 10.0}  # the figure ort had from the first
    assert merged["kind"] == "fused" and merged["precision"] == "fp32"
    assert merged["settled"] == ["bf16", "fused"] and merged["tried"] == ["bf16", "fused", "ort"]
    # the first settled ort (timed on every input, faster): its figure and verdict are kept
    first_timed = _entry(1, {"ort": 30.0, "fused": skip, "bf16": "no bf16 instructions"}, settled={"bf16", "ort"})
    merged = precision._merge_starts(first_timed, second)
    assert merged["table"]["ort"] == 30.0 and merged["kind"] == "ort" and merged["complete"]
    assert "settled" not in merged and "tried" not in merged  # complete: no lists, as choose_forward writes it
    # counted up to the last start, which is final
    at_two = {**precision._merge_starts(first, second), "starts": precision.AUTO_MAX_STARTS - 1}
    last = precision._merge_starts(at_two, {**second, "starts": 1})
    assert last["starts"] == precision.AUTO_MAX_STARTS and "settled" not in last
    # a final entry stands against an unfinished one, and a final new one replaces anything
    done = _entry(1, {"ort": 10.0, "fused": 5.0, "bf16": "no bf16 instructions"}, complete=True)
    assert precision._merge_starts(done, second) == done
    assert precision._merge_starts(first, {**done, "starts": 1}) == {**done, "starts": 1}
    assert precision._merge_starts(None, second) == second
    assert precision._merge_starts({**first, "starts": 1}, {**second, "starts": 2}) == {**second, "starts": 2}
    # a complete entry written meanwhile stands against one final only by its count of starts
    assert precision._merge_starts({**done, "starts": 3}, {**second, "starts": 3}) == {**done, "starts": 3}
    # an engine this start left without a figure keeps the other start's figure, and a verdict
    # of the other start never leaves the merged choice without one
    partial = _entry(1, {"ort": "probe 5.0 evals/s: below 1/1.5 of the best", "fused": 20.0,
                         "bf16": "no bf16 instructions"}, settled={"bf16", "ort"}, tried={"ort", "fused", "bf16"})
    only_ort = _entry(1, {"ort": 9.0, "fused": skip, "bf16": "no bf16 instructions"}, settled={"bf16"},
                      tried={"ort", "bf16"})
    merged = precision._merge_starts(partial, only_ort)
    assert merged["table"]["fused"] == 20.0 and merged["kind"] == "fused" and merged["starts"] == 2
    assert merged["table"]["ort"].startswith("probe ") and merged["settled"] == ["bf16", "ort"]
    # a malformed entry written by hand: this start's own
    assert precision._merge_starts({"starts": 5, "table": "x"}, second) == second
    assert precision._merge_starts({**first, "kind": ["x"]}, second) == second
    assert precision._merge_starts({**first, "kind": "fused"}, second) == second  # no figure for its kind
    odd = precision._merge_starts({**first, "tried": ["ort", 7, ["x"]], "settled": "bf16"}, second)
    assert odd["starts"] == 2 and odd["tried"] == ["bf16", "fused", "ort"] and odd["settled"] == ["bf16", "fused"]


def _write_keys(cache_dir, name, n, barrier):
    import os

    os.environ["C4FAST_CACHE_DIR"] = cache_dir
    barrier.wait()
    for i in range(n):
        precision.write_cache_entry(f"{name}-{i % 3}", {"writer": name, "i": i})


def test_processes_writing_the_cache_at_once_lose_none_of_each_others_entries(tmp_path):
    """Four real processes each rewrite three keys 40 times at once: every key holds its
    writer's last value (without the lock, one's read-modify-write drops another's keys)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_write_keys, args=(str(tmp_path), f"w{j}", 40, barrier)) for j in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    data = json.loads((tmp_path / "forward.json").read_text())
    assert {k: v for k, v in data.items()} == {f"w{j}-{r}": {"writer": f"w{j}", "i": 39 - (39 - r) % 3}
                                               for j in range(4) for r in range(3)}


def _choose_cut_short(cache_dir, barrier, out):
    import os

    os.environ["C4FAST_CACHE_DIR"] = cache_dir
    torch.manual_seed(0)
    net = build_model(get_preset("tiny")).eval()
    barrier.wait()
    out.put(choose_forward(net, [(9, 9), (12, 12)], batch=32, threads=1, budget_s=0.0).starts)


def test_starts_cut_short_at_once_are_both_counted(tmp_path, small_net):
    """Two real processes start ``auto`` with no budget at the same moment: each counts
    itself as the first start, and the cache counts two."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_choose_cut_short, args=(str(tmp_path), barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    got = sorted(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    key = precision._cache_key(small_net.config, 1, [(9, 9), (12, 12)], 32, precision.AUTO_CANDIDATES)
    entry = json.loads((tmp_path / "forward.json").read_text())[key]
    assert entry["starts"] == 2 and got in ([1, 1], [1, 2]), (entry, got)
    assert not entry["complete"] and isinstance(entry["table"][entry["kind"]], float)
