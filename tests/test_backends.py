"""CPU inference backends (nets.backends) against the eager fp32 net, the server's use of
them, the FLOP accounting of the server and of selfplay.generation.run, and the loop's CPU split."""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from hypothesis import given, settings
from hypothesis import strategies as st

import c4fast
from c4fast.evaluators import softmax_rows
from c4fast.runtime import cpu_seconds
from nets.backends import (BACKENDS, INT8_TOLERANCE, OV_MAX_PART, OV_PAD, BackendError, BackendUnavailable,
                           CpuBackend, calibration_planes, ov_batch_plan, tolerance_of)
from nets.checkpoint import load_checkpoint
from nets.fused import flops_per_eval
from selfplay.bench.gpucheck import perturbed_model
from nets.selfcheck import TOLERANCES, compare, random_planes
from nets.server import ServerConfig
from conftest import skip_without_instructions

ROOT = Path(__file__).resolve().parents[1]
SIZES = [(4, 4), (6, 7), (9, 12), (12, 12)]
FAST = [k for k in BACKENDS if k != "compiled"]  # compiled: test_gpu_path's slow test


def eager_out(model, x):
    with torch.no_grad():
        pol, val = model(torch.from_numpy(x))
    return pol.flatten(1).numpy(), torch.softmax(val, 1).numpy()


def within(out, ref, tol):
    err = compare(out[0], softmax_rows(out[1]), *ref)
    assert err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs, err
    return err


def test_an_engine_answering_the_wrong_shape_raises_a_clear_error():
    # OpenVINO under an emulated ISA cap (ONEDNN_MAX_CPU_ISA=AVX2 on an AMX CPU) answered empty
    # tensors, which failed as a bare numpy reshape error deep in the server; the backend now
    # checks every answer's shape ((n, H*W) or (n, H, W), and (n, 3|4)) and names the engine (a RuntimeError: --forward auto skips it)
    be = CpuBackend(perturbed_model("cpu_small", 1), "numpy")
    x = random_planes(5, c4fast.NUM_PLANES, 6, 7, seed=3).astype(np.float32)
    pol, val = be(x)
    assert pol.shape == (5, 42) and val.shape == (5, 3)
    good = be._fn
    answers = {"empty": lambda x: (np.zeros(0, np.float32), np.zeros(0, np.float32)),
               "short batch": lambda x: tuple(a[:-1] for a in good(x)),
               "value width": lambda x: (good(x)[0], np.zeros((len(x), 4), np.float32)),
               "board size": lambda x: (np.zeros((len(x), 6, 6), np.float32), good(x)[1]),
               "transposed": lambda x: (np.zeros((len(x), 7, 6), np.float32), good(x)[1])}
    for name, fn in answers.items():
        be._fn = fn
        with pytest.raises(BackendError, match=r"engine 'numpy' answered .* expected \(5, 42\) and \(5, 3\)"):
            be(x)
    assert issubclass(BackendError, RuntimeError)


@pytest.mark.parametrize("kind", FAST)
def test_every_backend_computes_the_eager_net_on_every_size_and_batch(kind):
    if kind.startswith("ort"):
        pytest.importorskip("onnxruntime")
    if kind.startswith("ov"):
        pytest.importorskip("openvino")
    skip_without_instructions(kind)
    model = perturbed_model("cpu_small", 1)
    be = CpuBackend(model, kind, threads=1, calibration=calibration_planes(SIZES, 16, seed=1))
    for h, w in SIZES:
        for n in (1, 7):
            x = random_planes(n, c4fast.NUM_PLANES, h, w, seed=h * w + n).astype(np.float32)
            pol, val = be(x)
            assert pol.shape == (n, h * w) and val.shape == (n, 3) and pol.dtype == np.float32
            within((pol, val), eager_out(model, x), tolerance_of(kind))


class _WrongAnswer:
    """An OpenVINO request that runs the real forward but reads back `policy`/`value` arrays
    of another shape: what a runtime broken on the machine answers (OpenVINO under an
    emulated instruction-set cap returns empty tensors), which cannot be produced here."""

    def __init__(self, request, policy=None, value=None):
        self.request, self.shapes = request, {"policy": policy, "value": value}

    def start_async(self, *args, **kwargs):
        return self.request.start_async(*args, **kwargs)

    def wait(self):
        return self.request.wait()

    def get_tensor(self, port):
        shape = self.shapes[port.get_any_name()]
        tensor = self.request.get_tensor(port)
        return tensor if shape is None else type("Tensor", (), {"data": np.ones(shape, np.float32)})()


@pytest.mark.parametrize("policy, value", [((0,), None), ((0, 6, 7), None), ((5, 7, 6), None), ((5, 1, 7), None),
                                           ((8, 42), None), (None, (5, 1)), (None, (0, 3)), (None, (5, 4))])
def test_an_openvino_answer_of_the_wrong_shape_is_refused_never_broadcast(policy, value):
    """Each part's outputs are checked before they are copied into the result: a wrong shape
    is a BackendError (``auto`` refuses the engine), never a numpy error nor rows spread over
    the result by broadcasting ((5, 1, 7) and (5, 1) would broadcast)."""
    pytest.importorskip("openvino")
    be = CpuBackend(perturbed_model("cpu_small", 3), "ov", threads=1)
    x = random_planes(5, c4fast.NUM_PLANES, 6, 7, seed=2).astype(np.float32)
    good = be(x)
    be._ov_requests[0] = _WrongAnswer(be._ov_requests[0], policy, value)
    with pytest.raises(BackendError, match=r"engine 'ov' answered policy .* for a part of 5 positions of 6x7"):
        be(x)
    be._ov_requests[0] = be._ov_requests[0].request  # the real answers again: exactly as before
    assert all(np.array_equal(a, b) for a, b in zip(be(x), good))


@pytest.mark.parametrize("kind", ["ov", "ov_bf16"])
def test_an_openvino_engine_on_two_threads_splits_big_batches_over_two_streams_in_order(kind):
    """Batches of 2 * 16 positions or more run as two halves on two streams (more than two
    parts in waves of two); the parts come back in order (every row is a different position,
    so a swap would fail)."""
    pytest.importorskip("openvino")
    skip_without_instructions(kind)
    model = perturbed_model("cpu_small", 2)
    be = CpuBackend(model, kind, threads=2)
    for n in (1, 31, 32, 77, 600):  # 600: four parts of 150 (padded to 152), two waves of two
        x = random_planes(n, c4fast.NUM_PLANES, 10, 11, seed=n).astype(np.float32)
        pol, val = be(x)
        assert pol.shape == (n, 110) and val.shape == (n, 3)
        within((pol, val), eager_out(model, x), tolerance_of(kind))
    # what OpenVINO ran last: both streams a padded part of 152 positions
    assert [r.get_input_tensor().shape[0] for r in be._ov_requests] == [152, 152] == be.forward_rows(600)[2:]


@pytest.mark.parametrize("kind", ["ov", "ov_bf16"])
def test_an_openvino_engine_pads_parts_and_drops_the_padding_rows(kind):
    """Counts off the padding grid (13 -> 16 rows), at it (8), and past OV_MAX_PART (257 -> 2
    parts of 129 and 128, each padded to 136 and 128) answer exactly their own positions."""
    pytest.importorskip("openvino")
    skip_without_instructions(kind)
    model = perturbed_model("cpu_small", 5)
    be = CpuBackend(model, kind, threads=1)
    for n, ran in ((8, 8), (13, 16), (257, 128)):  # ran: the rows of the last part OpenVINO got
        x = random_planes(n, c4fast.NUM_PLANES, 9, 12, seed=n).astype(np.float32)
        pol, val = be(x)
        assert pol.shape == (n, 108) and val.shape == (n, 3)
        within((pol, val), eager_out(model, x), tolerance_of(kind))
        assert be._ov_requests[0].get_input_tensor().shape[0] == ran == be.forward_rows(n)[-1]
    assert be.forward_rows(257) == [136, 128]
    pol, val = be(np.zeros((0, c4fast.NUM_PLANES, 9, 12), np.float32))  # an empty batch
    assert pol.shape == (0, 108) and val.shape == (0, 3)


def test_an_openvino_that_refuses_the_cache_capacity_compiles_without_it_and_says_so(monkeypatch, caplog):
    """The runtime cache capacity is an internal plugin property: a release that rejects it
    (here: a value it cannot parse) must not cost the engine."""
    pytest.importorskip("openvino")
    import nets.backends as backends

    monkeypatch.setattr(backends, "_OV_CACHE_CAPACITY", "lots")
    model = perturbed_model("tiny", 1)
    with caplog.at_level("WARNING", logger="nets.backends"):
        be = CpuBackend(model, "ov", threads=1)
    assert "refused CPU_RUNTIME_CACHE_CAPACITY" in caplog.text and "default cache" in caplog.text
    x = random_planes(3, c4fast.NUM_PLANES, 6, 7, seed=1).astype(np.float32)
    within(be(x), eager_out(model, x), tolerance_of("ov"))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 5000), streams=st.integers(1, 4))
def test_the_openvino_batch_plan_covers_the_batch_in_few_padded_shapes(n, streams):
    plan = ov_batch_plan(n, streams)
    assert [p[0] for p in plan] == [0] + [p[1] for p in plan[:-1]] and plan[-1][1] == n
    counts = [hi - lo for lo, hi, _ in plan]
    assert max(counts) - min(counts) <= 1 and max(counts) <= OV_MAX_PART
    # as few parts as the cap allows, but one per stream for a batch of >= 16 per stream,
    # and full waves (a multiple of the streams) once there are more parts than streams
    fewest = max(-(-n // OV_MAX_PART), min(streams, n // 16), 1)
    assert len(plan) == (fewest if fewest <= streams else streams * -(-fewest // streams))
    for (lo, hi, rows), m in zip(plan, counts):
        assert rows == (m if m < OV_PAD else OV_PAD * -(-m // OV_PAD))


@pytest.mark.parametrize("streams", [1, 2, 3])
def test_an_openvino_engine_runs_at_most_39_shapes_per_board_size(streams):
    """The bound the docs quote (OV_PAD - 1 counts below the pad, then every multiple of it up
    to OV_MAX_PART), whatever the count and the streams."""
    shapes = {rows for k in range(0, 3 * OV_MAX_PART * streams) for _, _, rows in ov_batch_plan(k, streams)}
    assert len(shapes) <= OV_PAD - 1 + OV_MAX_PART // OV_PAD == 39
    assert ov_batch_plan(0, streams) == []
    with pytest.raises(ValueError):
        ov_batch_plan(-1, streams)


@pytest.mark.parametrize("kind", ["fused", "numpy", "ort", "ov", "ov_bf16"])
def test_a_reload_serves_the_new_weights_and_refuses_another_architecture(kind):
    if kind == "ort":
        pytest.importorskip("onnxruntime")
    if kind.startswith("ov"):
        pytest.importorskip("openvino")
    skip_without_instructions(kind)
    a, b = perturbed_model("tiny", 3), perturbed_model("tiny", 4)
    be = CpuBackend(a, kind, threads=1)
    x = random_planes(5, c4fast.NUM_PLANES, 9, 10, seed=2).astype(np.float32)
    tol = tolerance_of(kind)
    within(be(x), eager_out(a, x), tol)
    be.load(b)
    within(be(x), eager_out(b, x), tol)
    assert compare(be(x)[0], softmax_rows(be(x)[1]), *eager_out(a, x))["policy_rel"] > 0.01  # really b
    with pytest.raises(ValueError, match="cpu_small"):
        be.load(perturbed_model("cpu_small", 0))


def test_int8_stays_within_its_tolerance_on_the_shipped_net_and_positions_of_real_games():
    pytest.importorskip("onnxruntime")
    skip_without_instructions("ort_int8")
    model, _, _ = load_checkpoint(ROOT / "models" / "c4fast_cpu.pt", map_location="cpu")
    sizes = [(9, 9), (10, 12), (12, 12)]
    be = CpuBackend(model, "ort_int8", threads=1, calibration=calibration_planes(sizes, 32, seed=5))
    worst = 0.0
    for x in calibration_planes(sizes, 64, seed=6):  # other positions than the calibration's
        err = within(be(x), eager_out(model.eval(), x), INT8_TOLERANCE)
        worst = max(worst, err["policy_rel"])
    assert worst > 1e-4  # it really is reduced precision, not an fp32 path by mistake


def test_calibration_positions_are_legal_positions_of_unfinished_games():
    from c4fast.game import Game

    for x in calibration_planes([(6, 7), (9, 10)], 20, seed=3):
        assert x.dtype == np.float32 and set(np.unique(x)) <= {0.0, 1.0}
        stones = x[:, 0].sum((1, 2)) + x[:, 1].sum((1, 2))
        assert (x[:, 3].sum((1, 2)) >= stones).all() and len(set(stones)) > 3  # varied depths
    with pytest.raises(ValueError, match="backend must be one of"):
        CpuBackend(perturbed_model("tiny", 0), "tensorrt")
    assert Game(6, 7).planes().shape == (c4fast.NUM_PLANES, 6, 7)


def test_without_onnxruntime_the_ort_backend_says_what_to_install():
    code = ("import sys; sys.modules['onnxruntime'] = None\n"
            "from nets.backends import CpuBackend, BackendUnavailable\n"
            "from selfplay.bench.gpucheck import perturbed_model\n"
            "try:\n    CpuBackend(perturbed_model('tiny', 0), 'ort')\n"
            "except BackendUnavailable as e:\n    print('OK', e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("OK") and "pip install onnxruntime onnx" in out.stdout, out.stderr
    assert issubclass(BackendUnavailable, RuntimeError)


def test_without_openvino_the_ov_engines_say_what_to_install_and_auto_goes_on_without_them():
    code = ("import sys; sys.modules['openvino'] = None\n"
            "from nets.backends import CpuBackend, BackendUnavailable\n"
            "from nets.netplayer import auto_play_forward\n"
            "from nets.precision import choose_forward\n"
            "from selfplay.bench.gpucheck import perturbed_model\n"
            "m = perturbed_model('tiny', 0)\n"
            "try:\n    CpuBackend(m, 'ov')\n"
            "except BackendUnavailable as e:\n    print('OK', e)\n"
            "c = choose_forward(m, [(6, 7)], 16, 1, candidates=('ov', 'ov_bf16', 'fused'), budget_s=0.5,"
            " use_cache=False)\n"
            "print('CHOICE', c.kind, c.table['ov'])\n"
            "print('PLAY', auto_play_forward())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert lines and lines[0].startswith("OK") and "pip install openvino" in lines[0], out.stderr
    assert lines[1].startswith("CHOICE fused refused:") and "OpenVINO" in lines[1], out.stdout + out.stderr
    assert lines[2] in ("PLAY ort", "PLAY eager"), out.stdout  # never ov_bf16 without openvino


def test_a_players_auto_goes_on_with_onnx_runtime_where_an_installed_openvino_is_broken(tmp_path):
    """An openvino package that is found but fails to import (a broken native library):
    the player's auto forward warns and serves ONNX Runtime instead of failing."""
    pytest.importorskip("onnxruntime")
    skip_without_instructions("ov_bf16")  # elsewhere auto never picks OpenVINO
    broken = tmp_path / "site" / "openvino"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libopenvino.so.2540: cannot open shared object file')\n")
    code = ("import logging; logging.basicConfig(level=logging.WARNING)\n"
            "from nets.netplayer import auto_play_forward, load_evaluator\n"
            "print('AUTO', auto_play_forward())\n"
            "ev = load_evaluator('models/c4fast_cpu.pt', threads=1)\n"
            "print('SERVED', ev.backend.kind)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert "AUTO ov_bf16" in out.stdout and "SERVED ort" in out.stdout, out.stdout + out.stderr
    assert "ov_bf16 did not start" in out.stderr and "needs OpenVINO" in out.stderr


def test_an_engine_with_its_own_threads_settles_torch_on_one_thread_and_gives_them_back():
    pytest.importorskip("onnxruntime")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        fused = CpuBackend(perturbed_model("tiny", 0), "fused", threads=2)
        fused.settle_torch_threads()  # computes on torch's threads: nothing changes
        assert torch.get_num_threads() == 2
        be = CpuBackend(perturbed_model("tiny", 0), "ort", threads=2)
        be.settle_torch_threads()
        be.settle_torch_threads()  # twice: still restores the count from before the first
        assert torch.get_num_threads() == 1
        be.restore_torch_threads()
        assert torch.get_num_threads() == 2
        be.restore_torch_threads()  # no-op now
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_server_forward_options_are_checked():
    with pytest.raises(ValueError, match="CPU only"):
        ServerConfig(device="cuda", forward="ort")
    with pytest.raises(ValueError, match="forward must be one of"):
        ServerConfig(forward="tensorrt")
    from selfplay.generation.config import RunConfig

    with pytest.raises(ValueError, match="--forward"):
        RunConfig(forward="tensorrt")
    with pytest.raises(ValueError, match="CPU only"):
        RunConfig(forward="ort_int8", gpus=1)


def test_direct_forward_is_the_servers_forward():
    from nets.server import InferenceServer, load_model

    cfg = ServerConfig(preset="tiny", threads=1, seed=3, max_forward_batch=4)
    fwd = InferenceServer.direct_forward(cfg)
    x = random_planes(10, c4fast.NUM_PLANES, 6, 7, seed=1)  # > max_forward_batch: split into 3 calls
    pol, wdl = fwd(torch.from_numpy(x))
    model, _, _ = load_model(cfg, torch.device("cpu"))
    ref = eager_out(model, x.astype(np.float32))
    np.testing.assert_allclose(pol, ref[0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(wdl, ref[1], rtol=0, atol=1e-6)


def run_selfplay(out, *extra):
    cmd = [sys.executable, "-m", "selfplay.generation.run", "--out", str(out), "--preset", "tiny", "--games-per-worker", "4",
           "--full-playouts", "16", "--fast-playouts", "8", "--max-games", "4", "--workers", "1", *extra]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_selfplay_summary_counts_the_flops_of_every_evaluation(tmp_path):
    from nets.config import get_preset

    summ = run_selfplay(tmp_path / "a", "--sizes", "6x7")
    assert summ["flops_per_eval"] == flops_per_eval(get_preset("tiny"), 6, 7)
    evals = summ["evals_per_s"] * summ["seconds"]
    assert summ["net_gflops"] == pytest.approx(evals * summ["flops_per_eval"] / summ["seconds"] / 1e9, rel=0.01)
    assert summ["net_gflops_in_forward"] >= summ["net_gflops"] > 0 and 0 < summ["server_busy"] <= 1
    mixed = run_selfplay(tmp_path / "b", "--sizes", "6x7,12x12", "--workers", "2")  # worker i starts on size i
    lo, hi = flops_per_eval(get_preset("tiny"), 6, 7), flops_per_eval(get_preset("tiny"), 12, 12)
    assert lo < mixed["flops_per_eval"] < hi


def test_selfplay_serves_through_onnx_runtime(tmp_path):
    pytest.importorskip("onnxruntime")
    summ = run_selfplay(tmp_path / "o", "--sizes", "6x7", "--forward", "ort")
    assert summ["games"] >= 4 and summ["config"]["forward"] == "ort"


def test_cpu_seconds_of_a_busy_process_grow_and_a_gone_process_has_none():
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 120
        while cpu_seconds(p.pid) < 0.2:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()
    assert cpu_seconds(p.pid) == 0.0  # reaped: gone
    assert cpu_seconds(os.getpid(), reaped_children=True) >= cpu_seconds(os.getpid()) + 0.2  # the child's share


def test_loop_cpu_split_attributes_cores_to_their_roles(tmp_path):
    from selfplay.generation.loop import LocalPlacement

    loop = LocalPlacement()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        loop.procs = {"train": busy, "selfplay": idle}
        assert loop.cpu_split({"worker_pids": [idle.pid], "server_pids": []}) == {}  # first call: a baseline
        t0 = cpu_seconds(busy.pid)
        deadline = time.monotonic() + 120
        while cpu_seconds(busy.pid) < t0 + 0.3 or time.monotonic() < loop._cpu_last[0] + 1.0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        split = loop.cpu_split({"worker_pids": [idle.pid], "server_pids": []})
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()
    assert set(split) == {"search", "inference", "train", "other"}
    assert split["train"] > 0.05 and split["search"] < split["train"] and split["inference"] == 0.0


def test_keep_heap_mapped_keeps_freed_blocks_mapped_for_the_next_allocation():
    """glibc's contract that keep_heap_mapped sets, on the allocation pattern of a forward
    (a set of 1-8 MiB activations, written, then all freed): by default glibc trims the freed
    heap top back to the kernel and the next pass page-faults it in again; kept mapped, the
    steady state has no faults. A forward's own fault count depends on the ISA's kernels and
    their scratch buffers, so it is measured in the benchmark (docs/PERFORMANCE.md), not here."""
    code = ("import ctypes, resource, sys\nfrom c4fast.runtime import keep_heap_mapped\n"
            "if sys.argv[1] == 'on':\n    assert keep_heap_mapped()\n"
            "libc = ctypes.CDLL('libc.so.6')\nlibc.malloc.restype = ctypes.c_void_p\n"
            "libc.malloc.argtypes = [ctypes.c_size_t]\nlibc.free.argtypes = [ctypes.c_void_p]\n"
            "sizes = [(1 + i) << 20 for i in range(8)]\n"
            "def cycle():\n    blocks = [libc.malloc(n) for n in sizes]\n"
            "    for p, n in zip(blocks, sizes):\n        ctypes.memset(p, 1, n)\n"
            "    for p in blocks:\n        libc.free(p)\n"
            "for _ in range(3):\n    cycle()\n"
            "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for _ in range(5):\n    cycle()\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 5)\n")
    faults = {m: float(subprocess.run([sys.executable, "-c", code, m], cwd=ROOT, capture_output=True, text=True,
                                      check=True, timeout=120).stdout) for m in ("off", "on")}
    pages = sum((1 + i) << 20 for i in range(8)) // resource.getpagesize()  # 9,216 with 4 KiB pages
    assert faults["off"] > 0.5 * pages, faults  # trimmed and faulted in again on every pass
    assert faults["on"] < 0.01 * pages, faults  # minor page faults per pass


def test_the_counts_benchmark_reports_both_passes_and_the_shapes_each_engine_ran():
    """`selfplay.bench.nets counts`: one JSON line per engine; OpenVINO's distinct shapes are
    its padded parts (a count n < 8 as it is, else the next multiple of 8), the others' every
    (size, count) of the fixed sequence (seed 0, counts uniform in 1..2 x batch)."""
    pytest.importorskip("openvino")
    batch = 12
    proc = subprocess.run([sys.executable, "-m", "selfplay.bench.nets", "counts", "--presets", "tiny",
                           "--backends", "numpy,ov", "--batch", str(batch), "--threads", "1"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(s) for s in proc.stdout.splitlines()]
    assert lines[0]["bench"] == "env" and "cpu_model" in lines[0]
    rec = {r["backend"]: r for r in lines if r["bench"] == "counts"}
    assert set(rec) == {"numpy", "ov"}
    rng = np.random.default_rng(0)
    calls = [(hw, int(rng.integers(1, 2 * batch + 1))) for hw in c4fast.SAIBLO_SIZES for _ in range(12)]
    padded = {(hw, n if n < 8 else 8 * -(-n // 8)) for hw, n in calls}
    assert rec["numpy"]["distinct_shapes"] == len(set(calls)) > rec["ov"]["distinct_shapes"] == len(padded)
    for r in rec.values():
        assert r["calls"] == len(calls) and r["evals"] == sum(n for _, n in calls) and r["counts"] == f"1..{2 * batch}"
        assert r["first_over_second"] == pytest.approx(r["evals_per_s_first_pass"] / r["evals_per_s_second_pass"],
                                                       abs=1e-3)
