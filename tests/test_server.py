"""The shared-memory inference server: real processes, real torch, real shared memory."""

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest
import torch

import c4fast
from nets import _atomics
from nets import shm_queue as q
from nets.checkpoint import checkpoint_name, save_checkpoint
from nets.config import get_preset
from nets.model import build_model
from nets.server import ServerConfig, load_model, request_shutdown, start_server

import _server_workers as workers

CTX = mp.get_context("spawn")


@pytest.fixture
def server_factory():
    started = []

    def make(cfg=None, slots=4, max_batch=64):
        sq = q.SharedQueue(CTX, slots, max_batch, c4fast.NUM_PLANES)
        cfg = cfg or ServerConfig(preset="tiny", threads=1, seed=3)
        proc = start_server(CTX, sq.handles, cfg)
        started.append((sq, proc))
        return sq, proc

    yield make
    for sq, proc in started:
        if proc.is_alive():
            request_shutdown(sq.handles)
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        proc.join(5)
        sq.close()


def direct(cfg, x):
    torch.set_num_threads(1)
    model, _, _ = load_model(cfg, torch.device("cpu"))
    with torch.inference_mode():
        pol, val = model(torch.from_numpy(x).float())
    return pol.numpy(), torch.softmax(val, 1).numpy()


def test_round_trip_equals_direct_forward_with_several_workers(server_factory):
    cfg = ServerConfig(preset="tiny", threads=1, seed=3, forward="eager")  # bit-exact with training
    sq, _ = server_factory(cfg, slots=3)
    out = CTX.Queue()
    sizes = [(6, 7), (9, 10), (12, 12)]  # one size per worker: each forward is one request
    procs = [CTX.Process(target=workers.eval_worker, args=(sq.handles, s, h, w, 5, s, out))
             for s, (h, w) in enumerate(sizes)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    for slot, results in got:
        h, w = sizes[slot]
        for x, pol, wdl in results:
            assert pol.shape == (x.shape[0], h, w) and wdl.shape == (x.shape[0], 3)
            ref_pol, ref_wdl = direct(cfg, x)
            np.testing.assert_array_equal(pol, ref_pol)  # exact on the CPU
            np.testing.assert_array_equal(wdl, ref_wdl)
            np.testing.assert_allclose(wdl.sum(1), 1.0, atol=1e-6)


def test_same_size_requests_are_batched_together_and_still_correct(server_factory):
    cfg = ServerConfig(preset="tiny", threads=1, seed=5)
    sq, _ = server_factory(cfg, slots=4)
    out = CTX.Queue()
    procs = [CTX.Process(target=workers.eval_worker, args=(sq.handles, s, 9, 9, 8, 10 + s, out))
             for s in range(4)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
    for _, results in got:
        for x, pol, wdl in results:
            ref_pol, ref_wdl = direct(cfg, x)
            np.testing.assert_allclose(pol, ref_pol, atol=1e-5)
            np.testing.assert_allclose(wdl, ref_wdl, atol=1e-6)
    hdr = np.ndarray(q.GLOBAL_WORDS, np.int64, sq.shm.buf, 0)
    hist = hdr[q.G_BATCH_HIST:q.G_BATCH_HIST + q.BATCH_HIST_BINS]
    assert hist.sum() == hdr[q.G_BATCHES] > 0  # every forward batch in the histogram ...
    assert hist[8:].sum() == 0  # ... of at most 4 requests of at most 39 positions: below 256


def test_submit_and_collect_split_evaluate(server_factory):
    """A worker's populations overlap search and inference with submit / collect."""
    cfg = ServerConfig(preset="tiny", threads=1, seed=5, forward="eager")
    sq, _ = server_factory(cfg, slots=2)
    a, b = q.InferenceClient(sq.handles, 0), q.InferenceClient(sq.handles, 1)
    x = (np.random.default_rng(1).random((5, 9, 7, 8)) < 0.3).astype(np.uint8)
    y = (np.random.default_rng(2).random((3, 9, 6, 7)) < 0.3).astype(np.uint8)
    with pytest.raises(RuntimeError, match="no request in flight"):
        a.collect()
    a.submit(x)
    b.submit(y)  # two slots in flight at once
    with pytest.raises(RuntimeError, match="already in flight"):
        a.submit(x)
    pol_b, wdl_b = b.collect()
    pol_a, wdl_a = a.collect()
    for (pol, wdl), z in (((pol_a, wdl_a), x), ((pol_b, wdl_b), y)):
        ref_pol, ref_wdl = direct(cfg, z)
        np.testing.assert_allclose(pol, ref_pol, atol=1e-5)
        np.testing.assert_allclose(wdl, ref_wdl, atol=1e-6)


def test_batch_bins_are_powers_of_two():
    assert [q.batch_bin(n) for n in (1, 2, 3, 4, 7, 8, 255, 256, 8191, 8192, 10**6)] == \
        [0, 1, 1, 2, 2, 3, 7, 8, 12, 13, 13]


def test_killed_server_makes_the_worker_raise_within_a_second(server_factory):
    sq, proc = server_factory()
    c = q.InferenceClient(sq.handles, 0)
    x = np.zeros((2, 9, 6, 7), np.uint8)
    c.evaluate(x)
    os.kill(proc.pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(q.ServerError, match="died"):
        for _ in range(100):
            c.evaluate(x)
    assert time.monotonic() - t0 < 1.0


def test_bad_requests_are_rejected_clearly(server_factory):
    sq, _ = server_factory(max_batch=16)
    c = q.InferenceClient(sq.handles, 1)
    with pytest.raises(ValueError, match="17 positions"):
        c.evaluate(np.zeros((17, 9, 6, 7), np.uint8))
    with pytest.raises(ValueError, match="13x7"):
        c.evaluate(np.zeros((1, 9, 13, 7), np.uint8))
    with pytest.raises(ValueError, match="3x7"):
        c.evaluate(np.zeros((1, 9, 3, 7), np.uint8))
    with pytest.raises(ValueError, match="channels"):
        c.evaluate(np.zeros((1, 5, 6, 7), np.uint8))
    # a malformed request that bypasses the client's checks is refused by the server
    hdr = c.view.header
    hdr[q.S_COUNT], hdr[q.S_HEIGHT], hdr[q.S_WIDTH] = 1, 20, 7
    c._seq += 1
    _atomics.store_release(hdr, q.S_REQ, c._seq)
    sq.handles.doorbell.release()
    c._wait()
    assert hdr[q.S_STATUS] == q.STATUS_BAD_REQUEST
    assert "20x7" in c.view.get_error()
    hdr[q.S_COUNT], hdr[q.S_HEIGHT], hdr[q.S_WIDTH] = 99, 6, 7
    c._seq += 1
    _atomics.store_release(hdr, q.S_REQ, c._seq)
    sq.handles.doorbell.release()
    c._wait()
    assert "count 99" in c.view.get_error()
    # and the slot still works afterwards
    pol, wdl = c.evaluate(np.zeros((2, 9, 6, 7), np.uint8))
    assert pol.shape == (2, 6, 7)


def test_dead_worker_does_not_stop_the_server(server_factory):
    sq, proc = server_factory()
    ready = CTX.Event()
    p = CTX.Process(target=workers.hang_worker, args=(sq.handles, 2, ready))
    p.start()
    assert ready.wait(30)
    time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)  # killed mid-request (it loops on evaluate)
    p.join(5)
    c = q.InferenceClient(sq.handles, 0)
    for _ in range(5):
        pol, _ = c.evaluate(np.ones((4, 9, 6, 7), np.uint8))
        assert np.isfinite(pol).all()
    assert proc.is_alive()


def test_hot_reload_follows_a_checkpoint_directory(server_factory, tmp_path):
    cfgnet = get_preset("tiny")
    torch.manual_seed(1)
    m1 = build_model(cfgnet).eval()
    save_checkpoint(tmp_path / checkpoint_name(1), m1, cfgnet, 1)
    cfg = ServerConfig(model=str(tmp_path), threads=1, reload_interval=0.1, forward="eager")
    sq, _ = server_factory(cfg)
    c = q.InferenceClient(sq.handles, 0)
    x = (np.random.default_rng(0).random((3, 9, 7, 8)) < 0.4).astype(np.uint8)
    pol1 = c.evaluate(x)[0].copy()  # results are views into shared memory
    assert c.model_version == 1
    torch.manual_seed(2)
    m2 = build_model(cfgnet).eval()
    with torch.no_grad():  # fresh heads may start at zero: make the two nets differ
        for p in m2.parameters():
            p.add_(0.1 * torch.randn_like(p))
    save_checkpoint(tmp_path / checkpoint_name(2), m2, cfgnet, 2)
    deadline = time.monotonic() + 300  # a wait, not a speed check: a loaded machine reloads late
    while c.model_version != 2 and time.monotonic() < deadline:
        c.evaluate(x)
        time.sleep(0.05)
    assert c.model_version == 2
    pol2, _ = c.evaluate(x)
    torch.set_num_threads(1)
    with torch.inference_mode():
        ref2 = m2(torch.from_numpy(x).float())[0].numpy()
    np.testing.assert_array_equal(pol2, ref2)
    assert not np.array_equal(pol1, pol2)


def test_mcts_searches_through_the_server_without_copies(server_factory):
    from c4fast.config import SearchConfig
    from c4fast.mcts import BatchedMCTS

    sq, _ = server_factory(max_batch=64)
    c = q.InferenceClient(sq.handles, 3)
    mcts = BatchedMCTS(SearchConfig(leaves_per_step=4), 8, 9, 9, seed=0, max_playouts=40)
    planes = c.planes_buffer(9, 9)  # the search writes leaves straight into shared memory
    for g in range(8):
        mcts.set_position(g, c4fast.Game(9, 9, (0, g)).state)
        mcts.start_search(g, 40, full=False)
    while not mcts.all_done():
        n = mcts.select(planes)
        if n:
            logits, wdl = c.evaluate(planes[:n])
            mcts.expand_and_backup(n, logits, wdl)
    assert all(mcts.root_playouts(g) >= 40 for g in range(8))
    assert c.positions_sent > 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_bf16_server_matches_fp32_forward(server_factory):
    cfg = ServerConfig(device="cuda", preset="b3c128nbt", seed=4, precision="bf16", cuda_graphs=True,
                       sizes=((12, 12),))
    sq, _ = server_factory(cfg, max_batch=256)
    c = q.InferenceClient(sq.handles, 0)
    x = (np.random.default_rng(0).random((100, 9, 12, 12)) < 0.3).astype(np.uint8)
    pol, wdl = c.evaluate(x)
    ref_pol, ref_wdl = direct(ServerConfig(preset="b3c128nbt", seed=4), x)
    assert np.abs(wdl - ref_wdl).max() < 0.05
    assert np.corrcoef(pol.ravel(), ref_pol.ravel())[0, 1] > 0.99


def test_auto_falls_back_to_exact_fp32_when_a_reload_fails_the_approximate_engines_check(
        server_factory, tmp_path, monkeypatch):
    """Forward auto chose int8 (here: from the per-machine cache, so the choice is fixed);
    a reloaded net whose int8 version fails the self-check (int8 is calibrated per net) is
    then served by the exact fp32 engine instead of stopping the server; int8 is tried
    again at later reloads (1, then 2, 4, ... apart) and served again once it passes."""
    from conftest import skip_without_instructions
    from nets import precision
    from nets.backends import BACKENDS

    skip_without_instructions("ort_int8")
    pytest.importorskip("onnxruntime")
    cfgnet = get_preset("tiny")

    def net(seed, scale):
        torch.manual_seed(seed)
        m = build_model(cfgnet).eval()
        with torch.no_grad():
            for p in m.parameters():
                p.add_(scale * 0.1 * torch.randn_like(p))
        return m

    monkeypatch.setenv("C4FAST_CACHE_DIR", str(tmp_path / "cache"))
    key = precision._cache_key(cfgnet, 1, [(12, 12)], 64, precision.AUTO_CANDIDATES)
    precision._write_cache_entry(tmp_path / "cache" / "forward.json", key,
                                 {"kind": "ort_int8", "precision": "int8", "table": {}, "seconds": 0.0})
    models = tmp_path / "models"
    save_checkpoint(models / checkpoint_name(1), net(1, 1.0), cfgnet, 1)  # its int8 passes the check
    cfg = ServerConfig(model=str(models), threads=1, reload_interval=0.1, forward="auto", sizes=((12, 12),))
    sq, proc = server_factory(cfg, max_batch=64)
    c = q.InferenceClient(sq.handles, 0)
    x = (np.random.default_rng(0).random((3, 9, 12, 12)) < 0.4).astype(np.uint8)
    c.evaluate(x)
    hdr = np.ndarray(q.GLOBAL_WORDS, np.int64, sq.shm.buf, 0)
    assert BACKENDS[hdr[q.G_FORWARD] - 1] == "ort_int8"
    m2 = net(2, 3.0)  # its int8 version fails the self-check
    save_checkpoint(models / checkpoint_name(2), m2, cfgnet, 2)
    deadline = time.monotonic() + 300  # a wait, not a speed check
    while c.model_version != 2 and time.monotonic() < deadline:
        c.evaluate(x)
        time.sleep(0.05)
    assert c.model_version == 2 and proc.is_alive()
    assert BACKENDS[hdr[q.G_FORWARD] - 1] == "fused"
    pol, _ = c.evaluate(x)
    with torch.inference_mode():
        ref = m2(torch.from_numpy(x).float())[0].numpy()
    np.testing.assert_allclose(pol, ref, atol=1e-4, rtol=1e-4)

    # int8 is tried again at the next reload (fails: m2's weights again), then 2 reloads
    # later (version 4: not yet; version 5: passes with m1's weights and is served again)
    m1 = net(1, 1.0)
    for version, m, served in ((3, m2, "fused"), (4, m1, "fused"), (5, m1, "ort_int8")):
        save_checkpoint(models / checkpoint_name(version), m, cfgnet, version)
        while c.model_version != version and time.monotonic() < deadline:
            c.evaluate(x)
            time.sleep(0.05)
        assert c.model_version == version and proc.is_alive()
        assert BACKENDS[hdr[q.G_FORWARD] - 1] == served, version
