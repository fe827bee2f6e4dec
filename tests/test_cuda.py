"""CUDA path (skipped without CUDA): graphs vs eager on every bucket, a capture that
replays nothing is caught, servers on two devices (or two on one), device pinning, hot
reload without re-capture, trainer host syncs. Run all of it with
``python -m selfplay.bench.gpucheck``; these are the fast, assertive subset."""

import multiprocessing as mp
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

import c4fast  # noqa: E402
from nets import shm_queue as q  # noqa: E402
from nets.checkpoint import checkpoint_name, save_checkpoint  # noqa: E402
from nets.cuda_runner import GraphRunner, bucket_sizes, exact_fp32, tolerance_for  # noqa: E402
from selfplay.bench.gpucheck import perturbed_model  # noqa: E402
from nets.selfcheck import SelfCheckError, compare, random_planes  # noqa: E402
from nets.backends import BACKENDS  # noqa: E402
from nets.server import ServerConfig, load_model, request_shutdown, resolve_forward, start_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CTX = mp.get_context("spawn")
BF16 = tolerance_for(torch.bfloat16, "cuda")


def reference(model, x, device="cuda:0"):
    m = model.to(device).float().eval()
    with torch.no_grad(), exact_fp32():
        pol, val = m(torch.from_numpy(x).to(device).float())
    return pol.flatten(1).cpu().numpy(), torch.softmax(val, 1).cpu().numpy()


def assert_close(got, ref, tol=BF16):
    err = compare(*got, *ref)
    assert err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs, err


def test_graphs_match_the_eager_fp32_forward_on_every_bucket():
    model = perturbed_model("b3c128nbt", 0)
    sizes = ((12, 12), (9, 10))
    runner = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=sizes, max_batch=4096)
    runner.capture_all()  # self-checks every capture (raises on a mismatch)
    assert len(runner.graphs) == len(sizes) * len(runner.buckets) == len(runner.checks)
    for h, w in sizes:
        for b in runner.buckets:
            x = random_planes(max(1, b - 5), c4fast.NUM_PLANES, h, w, seed=b)
            assert_close(runner.run_sync(x), reference(model, x))


def test_fp32_graphs_match_within_the_tf32_tolerance():
    model = perturbed_model("cpu_small", 1)
    runner = GraphRunner(model, "cuda:0", torch.float32, sizes=((11, 9),), max_batch=256)
    runner.capture_all()
    x = random_planes(200, c4fast.NUM_PLANES, 11, 9)
    assert_close(runner.run_sync(x), reference(model, x), tolerance_for(torch.float32, "cuda"))


def test_graphs_carry_the_moves_left_output():
    """A net with the moves-left head (NetConfig.moves_left): the graphs' wdl has the plies
    as a 4th column, within the bf16 tolerance (compared in the head's unit, plies / cells)."""
    from nets.model import torch_wdl_outputs

    model = perturbed_model("cpu_small_ml", 2)
    with torch.no_grad():
        model.value_head.fc2.bias[3] += 1.0
    runner = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=((9, 10),), max_batch=256)
    runner.capture_all()  # self-checks every capture, the 4th column included
    x = random_planes(100, c4fast.NUM_PLANES, 9, 10, seed=3)
    pol, wdl = runner.run_sync(x)
    assert wdl.shape == (100, 4) and (wdl[:, 3] > 0).any()
    m = model.to("cuda:0").float().eval()
    with torch.no_grad(), exact_fp32():
        rp, rv = m(torch.from_numpy(x).to("cuda:0").float())
    assert_close((pol, wdl), (rp.flatten(1).cpu().numpy(), torch_wdl_outputs(rv, 90).cpu().numpy()))


class _NoReplay:
    def replay(self):
        pass


def test_a_graph_that_replays_nothing_fails_the_self_check():
    runner = GraphRunner(perturbed_model("b3c128nbt", 2), "cuda:0", torch.bfloat16, sizes=((9, 9),),
                         max_batch=64, check=False)
    runner.capture_all()
    runner.run_sync(random_planes(64, c4fast.NUM_PLANES, 9, 9))  # static outputs now hold a real answer
    for g in runner.graphs.values():
        g.graph = _NoReplay()  # the empty graph of a capture on the wrong device's stream
    with pytest.raises(SelfCheckError, match="policy_rel"):
        runner.self_check(9, 9, 64)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_in_process_capture_on_a_second_device():
    torch.cuda.set_device(0)
    model = perturbed_model("b3c128nbt", 3)
    runner = GraphRunner(model, "cuda:1", torch.bfloat16, sizes=((12, 12),), max_batch=512)
    runner.capture_all()
    g = runner.graphs[(12, 12, 512)]
    assert g.pol.device == torch.device("cuda:1") and g.x.device == torch.device("cuda:1")
    x = random_planes(300, c4fast.NUM_PLANES, 12, 12)
    assert_close(runner.run_sync(x), reference(model, x, "cuda:1"), BF16)


def test_a_pinned_process_sees_only_its_gpu():
    n = torch.cuda.device_count() - 1
    code = ("from nets.cuda_runner import pin_process_to_device; import torch; "
            f"d = pin_process_to_device('cuda:{n}'); "
            "print(d, torch.cuda.device_count(), torch.cuda.get_device_name(0))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 2) == ["cuda:0", "1", torch.cuda.get_device_name(n) + "\n"]


@pytest.fixture
def servers():
    started = []

    def make(cfg, slots=1, max_batch=512):
        sq = q.SharedQueue(CTX, slots, max_batch, c4fast.NUM_PLANES)
        started.append((sq, start_server(CTX, sq.handles, cfg)))
        return sq

    yield make
    for sq, p in started:
        request_shutdown(sq.handles)
        p.join(30)
        if p.is_alive():
            p.kill()
        sq.close()


def test_servers_on_two_devices_each_answer_with_their_own_net(servers):
    """Defect 1: a server on cuda:1 captured on a cuda:0 stream; with one GPU, two servers
    share it (two pinned processes)."""
    second = "cuda:1" if torch.cuda.device_count() >= 2 else "cuda:0"
    sizes = ((12, 12), (9, 10))
    cfgs = [ServerConfig(device="cuda:0", preset="b3c128nbt", seed=1, sizes=sizes, max_forward_batch=512),
            ServerConfig(device=second, preset="b3c128nbt", seed=2, sizes=sizes, max_forward_batch=512)]
    clients = [q.InferenceClient(servers(cfg).handles, 0, start_timeout=600) for cfg in cfgs]
    for h, w in sizes:
        x = random_planes(333, c4fast.NUM_PLANES, h, w, seed=h + w)
        answers = []
        for c, cfg in zip(clients, cfgs):
            pol, wdl = c.evaluate(x)
            answers.append((pol.reshape(len(x), -1).copy(), wdl.copy()))
            model, _, _ = load_model(cfg, torch.device("cpu"))
            assert_close(answers[-1], reference(model, x))
        assert compare(*answers[0], *answers[1])["policy_rel"] > 0.5  # two different nets
    for c in clients:  # canvas servers (the default): one graph per bucket for every size
        assert c.global_hdr[q.G_CAPTURES] == len(bucket_sizes(512, smallest=64))


def test_hot_reload_copies_weights_without_recapture(servers, tmp_path):
    m1, m2 = perturbed_model("b3c128nbt", 4), perturbed_model("b3c128nbt", 5)
    save_checkpoint(tmp_path / checkpoint_name(1), m1, m1.config, 1)
    sq = servers(ServerConfig(device="cuda:0", model=str(tmp_path), reload_interval=0.1, sizes=((10, 11),),
                              max_forward_batch=256), max_batch=256)
    c = q.InferenceClient(sq.handles, 0, start_timeout=600)
    x = random_planes(250, c4fast.NUM_PLANES, 10, 11)
    assert_close(c.evaluate(x), reference(m1, x))
    captures = int(c.global_hdr[q.G_CAPTURES])
    assert captures == len(bucket_sizes(256, smallest=64))
    save_checkpoint(tmp_path / checkpoint_name(2), m2, m2.config, 2)
    deadline = time.monotonic() + 60
    while c.model_version != 2 and time.monotonic() < deadline:
        c.evaluate(x[:1])
        time.sleep(0.05)
    assert c.model_version == 2
    assert_close(c.evaluate(x), reference(m2, x))
    assert int(c.global_hdr[q.G_CAPTURES]) == captures


def test_canvas_graphs_match_the_per_size_fp32_forward_in_mixed_batches():
    """One canvas graph per bucket serves every size: mixed batches (groups of several sizes,
    stale canvas contents from the previous batch) match each size's eager fp32 forward."""
    model = perturbed_model("b3c128nbt", 6)
    sizes = ((12, 12), (9, 10), (11, 9), (6, 7))
    runner = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=sizes, max_batch=1024, canvas=True)
    runner.capture_all()  # each capture self-checked on a mixed batch
    assert len(runner.graphs) == len(runner.buckets) == len(bucket_sizes(1024, smallest=64))
    for b in runner.buckets:
        groups, xs = [], []
        for i, (h, w) in enumerate(sizes):
            k = max(1, (b - 5) // len(sizes) - i)
            x = random_planes(k, c4fast.NUM_PLANES, h, w, seed=b + i)
            xs.append(x)
            groups.append((h, w, [x], [(np.empty((k, h * w), np.float32), np.empty((k, 3), np.float32))]))
        runner.complete(runner.submit_groups(groups))
        for (h, w, _, [(pol, wdl)]), x in zip(groups, xs):
            assert_close((pol, wdl), reference(model, x))


def test_canvas_graphs_carry_the_moves_left_output_in_each_boards_plies():
    from nets.model import torch_wdl_outputs

    model = perturbed_model("cpu_small_ml", 3)
    runner = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=((12, 12), (9, 10)), max_batch=128, canvas=True)
    runner.capture_all()
    for h, w in ((12, 12), (9, 10)):
        x = random_planes(50, c4fast.NUM_PLANES, h, w, seed=h)
        pol, wdl = runner.run_sync(x)
        m = model.to("cuda:0").float().eval()
        with torch.no_grad(), exact_fp32():
            rp, rv = m(torch.from_numpy(x).to("cuda:0").float())
        assert_close((pol, wdl), (rp.flatten(1).cpu().numpy(), torch_wdl_outputs(rv, h * w).cpu().numpy()))


def test_a_canvas_server_merges_clients_of_different_sizes(servers):
    sizes = ((12, 12), (9, 10), (10, 12))
    cfg = ServerConfig(device="cuda:0", preset="b3c128nbt", seed=3, sizes=sizes, max_forward_batch=1024)
    sq = servers(cfg, slots=3)
    model, _, _ = load_model(cfg, torch.device("cpu"))
    clients = [q.InferenceClient(sq.handles, i, start_timeout=600) for i in range(3)]
    xs = [random_planes(300, c4fast.NUM_PLANES, h, w, seed=i) for i, (h, w) in enumerate(sizes)]
    from concurrent.futures import ThreadPoolExecutor

    def ask(i):  # concurrent requests of three sizes: served in merged canvas batches
        out = []
        for _ in range(20):
            pol, wdl = clients[i].evaluate(xs[i])
            out.append((pol.reshape(len(xs[i]), -1).copy(), wdl.copy()))
        return out

    with ThreadPoolExecutor(3) as ex:
        answers = list(ex.map(ask, range(3)))
    for x, outs in zip(xs, answers):
        ref = reference(model, x)
        for got in outs:
            assert_close(got, ref)
    assert clients[0].global_hdr[q.G_CAPTURES] == len(bucket_sizes(1024, smallest=64))
    # the header names what it serves: auto's compiled canvas (fused only if the compile failed)
    assert BACKENDS[clients[0].global_hdr[q.G_FORWARD] - 1] == resolve_forward(cfg) == "compiled"


@pytest.mark.parametrize("padded", [False, True])
def test_train_step_synchronises_once_on_cuda(tmp_path, padded):
    sys.path.insert(0, str(ROOT / "tests"))
    from test_train import make_shards

    from nets.replay import ReplayWindow
    from nets.train import TrainConfig, Trainer
    from nets.shards import list_shards

    make_shards(tmp_path / "d", games=8, sizes=((6, 7), (9, 9), (7, 7), (8, 9)))
    win = ReplayWindow()
    win.update(list_shards([tmp_path / "d"]))
    tr = Trainer(TrainConfig(preset="b3c128nbt", per_size=32, device="cuda", padded=padded), str(tmp_path / "t"))
    tr.train_step(win)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = tr.train_step(win)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= 1, [str(w.message) for w in syncs]
    assert np.isfinite(m["loss"])


def test_a_warm_up_leaves_one_static_compile_for_the_runs_layout(tmp_path):
    """Trainer.warm_up on CUDA (static shapes, automatic dynamic otherwise): after the warm-up
    for the run's sizes, steps on a window of those sizes compile nothing more, and the
    weights are a fresh trainer's until the first step."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_train import make_shards
    from torch._dynamo.utils import counters

    from nets.replay import ReplayWindow
    from nets.shards import list_shards
    from nets.train import TrainConfig, Trainer

    sizes = ((6, 7), (9, 9), (7, 7))
    make_shards(tmp_path / "d", games=6, sizes=sizes)
    win = ReplayWindow()
    win.update(list_shards([tmp_path / "d"]))
    tr = Trainer(TrainConfig(preset="b3c128nbt", per_size=32, device="cuda", padded=True, compile=True),
                 str(tmp_path / "t"))
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    assert tr.warm_up(sizes) > 0.0
    for k, v in tr.model.state_dict().items():
        assert torch.equal(v, before[k]), k
    graphs = counters["stats"]["unique_graphs"]
    for _ in range(3):
        assert np.isfinite(tr.train_step(win)["loss"])
    assert counters["stats"]["unique_graphs"] == graphs
