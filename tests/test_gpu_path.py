"""The GPU path's device-independent pieces, on the CPU: BN-folded forward, self-check,
buckets, device pinning, in-place hot reload, trainer host syncs, run defaults, gpucheck.

The CUDA-only parts (capture, replay, copies, two devices) are in tests/test_cuda.py."""

import json
import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import c4fast
from nets import shm_queue as q
from nets.checkpoint import checkpoint_name, save_checkpoint
from nets.cuda_runner import (
    bucket_sizes,
    choose_bucket,
    inference_module,
    load_inference_weights,
    pin_process_to_device,
    tolerance_for,
    visible_device_entry,
)
from nets.fused import FusedNet, flops_per_eval
from selfplay.bench.gpucheck import bf16_peak, no_cuda_line, perturbed_model, steady_rates
from nets.selfcheck import TOLERANCES, SelfCheckError, compare, random_planes, self_check

ROOT = Path(__file__).resolve().parents[1]
SIZES = [(4, 4), (6, 7), (9, 12), (12, 12)]


def eager(model):
    def run(x):
        with torch.no_grad():
            pol, val = model(torch.from_numpy(np.asarray(x)).float())
        return pol.flatten(1).numpy(), torch.softmax(val, 1).numpy()
    return run


def module_fn(fwd, dtype=torch.float32):
    def run(x):
        with torch.no_grad():
            pol, val = fwd(torch.from_numpy(np.asarray(x)).to(dtype))
        return pol.float().flatten(1).numpy(), torch.softmax(val.float(), 1).numpy()
    return run


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# ----------------------------------------------------------------- BN-folded forward


@pytest.mark.parametrize("preset", ["tiny", "cpu_small", "b3c128nbt"])
def test_fused_net_matches_the_eager_model_on_several_sizes(preset):
    """Tolerance: fp32, policy logits within 2e-5 x their largest magnitude, wdl 1e-6."""
    model = perturbed_model(preset, 0)
    fused = FusedNet.from_model(model)
    for h, w in SIZES:
        x = torch.from_numpy(random_planes(6, c4fast.NUM_PLANES, h, w, seed=h * w)).float()
        with torch.no_grad():
            p_ref, v_ref = model(x)
            p, v = fused(x)
        assert p.shape == p_ref.shape == (6, h, w) and v.shape == (6, 3)
        scale = p_ref.abs().max().item()
        assert (p - p_ref).abs().max().item() <= 2e-5 * scale, (h, w)
        assert (torch.softmax(v, 1) - torch.softmax(v_ref, 1)).abs().max().item() <= 1e-6


def test_fused_net_accepts_uint8_and_channels_last_and_bf16():
    model = perturbed_model("cpu_small", 1)
    x = random_planes(5, c4fast.NUM_PLANES, 9, 10)
    ref = eager(model)(x)
    fused = FusedNet.from_model(model).to(memory_format=torch.channels_last)
    with torch.no_grad():
        p, v = fused(torch.from_numpy(x).contiguous(memory_format=torch.channels_last))
    err = compare(p.numpy(), torch.softmax(v, 1).numpy(), *ref)
    assert err["policy_rel"] < TOLERANCES["fp32"].policy_rel
    bf = FusedNet.from_model(model).to(torch.bfloat16)
    err = self_check("bf16 fused", module_fn(bf, torch.bfloat16), eager(model), 9, 10, 64, c4fast.NUM_PLANES, TOLERANCES["bf16"])
    assert err["policy_rel"] > 0  # really computed in bf16


def test_load_from_copies_in_place_and_checks_the_architecture():
    a, b = perturbed_model("tiny", 1), perturbed_model("tiny", 2)
    fused = FusedNet.from_model(a)
    ptrs = {k: t.data_ptr() for k, t in fused.state_dict().items()}
    fused.load_from(b)
    assert {k: t.data_ptr() for k, t in fused.state_dict().items()} == ptrs
    x = random_planes(7, c4fast.NUM_PLANES, 6, 7)
    err = compare(*module_fn(fused)(x), *eager(b)(x))
    assert err["policy_rel"] < 1e-5 and err["wdl_abs"] < 1e-6
    with pytest.raises(ValueError, match="cpu_small"):
        fused.load_from(perturbed_model("cpu_small", 0))


@pytest.mark.parametrize("kind", ["eager", "fused"])
def test_inference_module_reload_keeps_tensor_addresses(kind):
    a, b = perturbed_model("tiny", 3), perturbed_model("tiny", 4)
    net, fwd = inference_module(a, kind, torch.float32, "cpu", channels_last=True)
    ptrs = [t.data_ptr() for t in net.state_dict().values()]
    load_inference_weights(net, b)
    assert [t.data_ptr() for t in net.state_dict().values()] == ptrs
    self_check(f"{kind} after reload", module_fn(fwd), eager(b), 9, 9, 16, c4fast.NUM_PLANES, TOLERANCES["fp32"])


@pytest.mark.slow
def test_compiled_forward_passes_the_self_check():
    """torch.compile of the fused net (inductor, CPU C++ backend): ~40 s to compile."""
    model = perturbed_model("tiny", 5)
    _, fwd = inference_module(model, "compiled", torch.float32, "cpu", channels_last=False)
    self_check("compiled", module_fn(fwd), eager(model), 6, 7, 8, c4fast.NUM_PLANES, TOLERANCES["fp32"])


def test_numpy_net_passes_the_self_check(tmp_path):
    from nets.numpy_net import NumpyNet, export_numpy

    model = perturbed_model("cpu_small", 6)
    net = NumpyNet.load(export_numpy(model, tmp_path / "n.npz"))

    def run(x):
        pol, val = net.forward(x)
        e = np.exp(val - val.max(1, keepdims=True))
        return pol.reshape(len(x), -1), e / e.sum(1, keepdims=True)

    for h, w in SIZES:
        self_check("numpy", run, eager(model), h, w, 8, c4fast.NUM_PLANES, TOLERANCES["fp32"])


def test_flops_per_eval_matches_torch_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    for preset in ("tiny", "b3c128nbt"):
        model = perturbed_model(preset, 0)
        for h, w in ((4, 4), (12, 12), (9, 11)):
            with FlopCounterMode(display=False) as fc, torch.no_grad():
                model(torch.zeros(1, 9, h, w))
            assert flops_per_eval(model.config, h, w) == fc.get_total_flops()


# ----------------------------------------------------------------- self-check


def test_self_check_rejects_a_constant_output_like_an_empty_graph():
    model = perturbed_model("b3c128nbt", 0)
    ref = eager(model)
    frozen = ref(np.zeros((1, 9, 12, 12), np.uint8))  # what a graph captured on zeros would replay

    def empty_graph(x):
        return np.repeat(frozen[0], len(x), 0), np.repeat(frozen[1], len(x), 0)

    for tol in TOLERANCES.values():
        with pytest.raises(SelfCheckError, match=r"12x12, batch 32: policy_rel"):
            self_check("empty graph", empty_graph, ref, 12, 12, 32, c4fast.NUM_PLANES, tol)


def test_self_check_rejects_other_weights_nan_and_wrong_shapes():
    a, b = perturbed_model("tiny", 1), perturbed_model("tiny", 2)
    with pytest.raises(SelfCheckError, match="other weights"):
        self_check("other weights", eager(b), eager(a), 9, 9, 16, c4fast.NUM_PLANES, TOLERANCES["bf16"])

    def nan(x):
        p, w = eager(a)(x)
        p[0, 0] = np.nan
        return p, w

    with pytest.raises(SelfCheckError, match="finite False"):
        self_check("nan", nan, eager(a), 9, 9, 16, c4fast.NUM_PLANES, TOLERANCES["bf16"])
    with pytest.raises(SelfCheckError):
        self_check("short", lambda x: eager(a)(x[:-1]), eager(a), 9, 9, 16, c4fast.NUM_PLANES, TOLERANCES["bf16"])
    with pytest.raises(SelfCheckError, match="reference itself is not finite"):
        self_check("bad ref", eager(a), nan, 9, 9, 16, c4fast.NUM_PLANES, TOLERANCES["bf16"])


def test_tolerances_by_precision():
    assert tolerance_for(torch.bfloat16, "cuda") == TOLERANCES["bf16"]
    assert tolerance_for(torch.float16, "cuda") == TOLERANCES["fp16"]
    assert tolerance_for(torch.float32, "cpu") == TOLERANCES["fp32"]
    assert TOLERANCES["fp32"].policy_rel < TOLERANCES["tf32"].policy_rel < TOLERANCES["bf16"].policy_rel < 0.5


# ----------------------------------------------------------------- buckets and pinning


def test_buckets_are_fine_aligned_and_cover_the_largest_batch():
    b = bucket_sizes(4096)
    assert b[0] == 8 and b[-1] == 4096 and list(b) == sorted(set(b))
    assert all(v % 8 == 0 for v in b)
    assert bucket_sizes(2000)[-1] == 2048 and bucket_sizes(1) == (8,)
    ns = np.arange(64, 4097)
    waste = np.array([1 - n / choose_bucket(b, n) for n in ns])
    assert waste.max() < 0.2 and waste.mean() < 0.1  # powers of two: 0.5 and ~0.25
    assert choose_bucket(b, 1) == 8 and choose_bucket(b, 1025) == 1280 and choose_bucket(b, 4096) == 4096
    for bad in (0, 4097):
        with pytest.raises(ValueError):
            choose_bucket(b, bad)


def test_visible_device_entry_keeps_uuids_and_mig_slices():
    assert visible_device_entry(2, None) == "2"
    assert visible_device_entry(1, "3,1,0") == "1"
    uuids = "GPU-8f3a1b2c-aaaa-bbbb-cccc-0123456789ab, GPU-11111111-2222-3333-4444-555555555555"
    assert visible_device_entry(1, uuids) == "GPU-11111111-2222-3333-4444-555555555555"
    assert visible_device_entry(0, "MIG-4b5c6d7e-1111-2222-3333-444455556666") == \
        "MIG-4b5c6d7e-1111-2222-3333-444455556666"
    with pytest.raises(ValueError, match="cuda:2 is not visible"):
        visible_device_entry(2, "0,1")
    with pytest.raises(ValueError):
        visible_device_entry(0, "")


def test_pinning_narrows_the_visible_devices_before_cuda_starts():
    assert not torch.cuda.is_initialized()
    env = {"CUDA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb,GPU-ccc"}
    assert pin_process_to_device("cuda:2", env) == "cuda:0"
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-ccc"
    env = {}
    assert pin_process_to_device("cuda:3", env) == "cuda:0" and env["CUDA_VISIBLE_DEVICES"] == "3"
    assert pin_process_to_device("cuda", env := {}) == "cuda:0" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert pin_process_to_device("cpu", env := {}) == "cpu" and env == {}


def test_a_cuda_server_process_starts_with_only_its_gpu_visible():
    from nets.cuda_runner import child_device_env

    assert child_device_env("cuda:1", "GPU-a,GPU-b") == ("cuda:0", {"CUDA_VISIBLE_DEVICES": "GPU-b"})
    assert child_device_env("cuda:2", None) == ("cuda:0", {"CUDA_VISIBLE_DEVICES": "2"})
    assert child_device_env("cpu", "0,1") == ("cpu", {})


def test_server_main_pins_before_any_cuda_call():
    """Source order of server_main: pinning precedes building the server (CUDA init)."""
    import inspect

    from nets import server

    src = inspect.getsource(server.server_main)
    assert src.index("pin_process_to_device") < src.index("InferenceServer(")


# ----------------------------------------------------------------- server on the CPU


def test_cpu_server_with_the_fused_forward_reloads(tmp_path):
    from nets.server import InferenceServer, ServerConfig

    ctx = mp.get_context("spawn")
    a, b = perturbed_model("tiny", 7), perturbed_model("tiny", 8)
    save_checkpoint(tmp_path / checkpoint_name(1), a, a.config, 1)
    sq = q.SharedQueue(ctx, 1, 64, c4fast.NUM_PLANES)
    try:
        srv = InferenceServer(sq.handles, ServerConfig(model=str(tmp_path), forward="fused", threads=1))
        x = random_planes(20, c4fast.NUM_PLANES, 9, 11)
        err = compare(*srv.forward(torch.from_numpy(x)), *eager(a)(x))
        assert err["policy_rel"] < TOLERANCES["fp32"].policy_rel
        backend = srv.backend
        save_checkpoint(tmp_path / checkpoint_name(2), b, b.config, 2)
        assert srv.maybe_reload() and srv.version == 2
        assert srv.backend is backend and backend.kind == "fused"  # same engine, new weights
        err = compare(*srv.forward(torch.from_numpy(x)), *eager(b)(x))
        assert err["policy_rel"] < TOLERANCES["fp32"].policy_rel
        del srv
    finally:
        sq.close()


def test_gpu_server_config_defaults_and_validation():
    from nets.server import ServerConfig

    cfg = ServerConfig(sizes=[[9, 10], (12, 12)])
    assert cfg.sizes == ((9, 10), (12, 12)) and cfg.forward == "auto" and cfg.self_check
    with pytest.raises(ValueError, match="forward"):
        ServerConfig(forward="fast")
    with pytest.raises(ValueError, match="13x9"):
        ServerConfig(sizes=((13, 9),))


def test_gpu_servers_use_one_cpu_thread_by_default():
    from nets.server import ServerConfig, server_threads

    assert server_threads(ServerConfig(device="cuda:1")) == 1
    assert server_threads(ServerConfig(device="cuda:0", threads=3)) == 3
    assert server_threads(ServerConfig()) == 0


def test_graph_runner_refuses_a_cpu_device():
    from nets.cuda_runner import GraphRunner

    with pytest.raises(ValueError, match="CUDA device"):
        GraphRunner(perturbed_model("tiny", 0), "cpu")


# ----------------------------------------------------------------- trainer


def test_train_step_reads_the_device_back_once_per_step(monkeypatch):
    from nets.replay import ReplayWindow
    from nets.train import TrainConfig, Trainer

    sys.path.insert(0, str(ROOT / "tests"))
    from test_train import make_shards

    import tempfile

    from nets.shards import list_shards

    with tempfile.TemporaryDirectory() as tmp:
        make_shards(Path(tmp) / "d", games=8, sizes=((6, 7), (9, 9), (7, 7), (8, 9)))
        win = ReplayWindow()
        win.update(list_shards([Path(tmp) / "d"]))
        assert len(win.sizes) == 4
        tr = Trainer(TrainConfig(preset="tiny", per_size=8), tmp)
        tr.train_step(win)
        calls = []
        for name in ("item", "tolist", "cpu", "numpy", "__float__"):
            orig = getattr(torch.Tensor, name)

            def wrapped(self, *a, _orig=orig, _name=name, **k):
                calls.append(_name)
                return _orig(self, *a, **k)

            monkeypatch.setattr(torch.Tensor, name, wrapped)
        m = tr.train_step(win)
        monkeypatch.undo()
    assert calls == ["tolist"], calls  # one read-back per step, none per board size
    assert m["sizes"] == 4 and np.isfinite(m["loss"])


def test_train_bench_on_cuda_without_cuda_is_a_clear_error():
    from nets.train import bench

    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(ValueError, match="CUDA is not available"):
        bench("tiny", 1, 4, [(6, 7)], device="cuda")
    proc = subprocess.run([sys.executable, "-m", "nets.train", "--bench", "--device", "cuda"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "CUDA is not available" in proc.stderr and not proc.stdout


# ----------------------------------------------------------------- self-play defaults


def test_gpu_runs_default_to_b3c128nbt_and_all_usable_cores(monkeypatch):
    from selfplay.generation import loop, run
    from selfplay.generation.config import RunConfig

    assert RunConfig(gpus=1).net_preset == RunConfig(gpus=4).net_preset == "b3c128nbt"
    assert RunConfig().net_preset == "cpu_small" and RunConfig(gpus=1, preset="tiny").net_preset == "tiny"
    assert loop.PRESETS["gpu"].net == "b3c128nbt" and loop.PRESETS["gpu"].selfplay.gpus >= 1
    gpu_train, cpu_train = loop.PRESETS["gpu"].train.train, loop.PRESETS["cpu"].train.train
    assert gpu_train.padded and gpu_train.compile  # one compiled canvas pass per step (the per-size maths)
    assert not (cpu_train.padded or cpu_train.compile)
    monkeypatch.setattr(run.os, "sched_getaffinity", lambda pid: {0, 1, 2, 5})
    monkeypatch.setattr(run.os, "cpu_count", lambda: 64)
    assert run.default_workers(1) == 3 and run.default_workers(4) == 1 and run.default_workers(0) == 2
    cfg = run.config_from_argv(["--out", "x"])
    run.validate(cfg)
    assert cfg.net_preset == "cpu_small"


def test_a_server_error_ends_the_run_with_the_reason(tmp_path, monkeypatch):
    """Workers that lose the server exit with SERVER_ERROR_EXIT: no restarts, exit 1."""
    from selfplay.generation import run, worker

    sys.path.insert(0, str(ROOT / "tests"))
    import _server_workers

    monkeypatch.setattr(worker, "worker_main", _server_workers.server_error_worker)
    cfg = run.config_from_argv(["--out", str(tmp_path / "d"), "--preset", "tiny", "--workers", "2",
                                "--games-per-worker", "2", "--time", "600", "--status-every", "30"])
    run.validate(cfg)
    summary = run.run(cfg)
    assert summary["worker_restarts"] == 0
    assert "lost the inference server" in summary["error"] and "boom" in summary["error"]
    assert summary["seconds"] < 600  # stopped by the error, not by --time


# ----------------------------------------------------------------- gpucheck


def test_gpucheck_without_cuda_says_so_in_one_line_and_exits_0():
    if torch.cuda.is_available():
        pytest.skip("CUDA present: run python -m selfplay.bench.gpucheck by hand")
    proc = subprocess.run([sys.executable, "-m", "selfplay.bench.gpucheck"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0] == no_cuda_line()
    d = json.loads(lines[0])
    assert d["cuda"] is False and "no CUDA device" in d["reason"]


def test_gpucheck_helpers():
    assert bf16_peak("NVIDIA H100 80GB HBM3") == 989e12 and bf16_peak("NVIDIA H100 PCIe") == 756e12
    assert bf16_peak("NVIDIA H200") == 989e12 and bf16_peak("Some GPU") is None
    status = "12:00:{0:02d} I [MainProcess] selfplay.generation.run:  {0:6d}s games {1}  samples {2} ({3}/s)  evals {4}/s  mean length 30.0\n"
    log = (status.format(15, 0, 0, 0.0, 0)  # capturing graphs: nothing served yet
           + status.format(30, 0, 0, 0.0, 1000)  # serving, no game written yet
           + status.format(45, 10, 300, 6.7, 2000)  # the first games: the window starts here
           + status.format(60, 30, 900, 15.0, 3000))
    # evals: 3000 * 60 - 2000 * 45 = 90,000 in 15 s; samples: 600 in 15 s
    assert steady_rates(log) == {"serving_from_s": 30, "from_s": 45, "to_s": 60, "samples_per_s": 40.0,
                                 "evals_per_s": 6000}
    assert steady_rates("".join(log.splitlines(keepends=True)[:3])) is None  # one line with games
    assert steady_rates("") is None
    proc = subprocess.run([sys.executable, "-m", "selfplay.bench.gpucheck", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "--selfplay-seconds" in proc.stdout
