"""`python -m selfplay.bench.nets [SECTION ...]`: network and inference figures, one JSON line each.

Sections (default: all but ``counts``, minutes per engine, and ``gpu`` on a machine without
CUDA), each line has a ``"bench"`` key:

* ``roofline``: the CPU's achievable fp32 GFLOP/s, a square ``torch.mm`` at several sizes
  with the same threads, and the bf16 and int8 (``torch._int_mm``) peaks where the CPU has
  those instructions (``roofline_peak``: one line per precision; every ``of_peak`` below
  divides by the peak of the precision the engine computes in, ``of_best_peak`` by the
  machine's highest);
* ``model``: eager torch evals/s by preset, board and batch, with FLOPs per eval
  (:func:`nets.fused.flops_per_eval`), achieved GFLOP/s and the fraction of the peak;
* ``backends``: every :mod:`nets.backends` engine on the same batches (one size, and the
  16 Saiblo sizes in turn as self-play sends them), speed plus its error against eager
  fp32 on positions of random games (the shipped net's weights where its preset matches);
* ``counts``: every engine on the batch counts a self-play server meets (1 to 2 x
  ``--batch``, 12 counts on each of the 16 Saiblo sizes, one fixed sequence): evals/s of a
  first pass and of the same sequence again, and the distinct input shapes the engine runs
  (``CpuBackend.forward_rows``: an OpenVINO engine builds kernels per shape and runs padded
  parts, :func:`nets.backends.ov_batch_plan`; with n threads it builds each on each of its n
  streams);
* ``contention``: a direct forward alone and beside one busy process (a self-play worker's
  share of a 2-core machine), per backend and thread count;
* ``numpy_startup``: import + load time of the torch-free numpy net in a fresh interpreter;
* ``server``: a no-op round trip, then the same net through the inference server and by a
  direct call of the same forward in a fresh process with the same threads, side by side;
* ``search_share``: share of self-play time in the search vs the net (in-process);
* ``play``: playouts a network player (:mod:`nets.netplayer`, the shipped ``c4fast_cpu``)
  reaches in a fixed time per move, per play forward (``eager`` torch, ``ort``, the
  ``.npz``'s ``numpy``), one thread, on the same random Saiblo positions;
* ``gpu``: eager vs CUDA graphs, fp32 vs bf16 through the server (CUDA only).

Timings are wall-clock means after one warm-up call; the 1-minute load average is in the
``env`` line: other processes on the CPU distort multi-threaded timings badly.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import c4fast
from c4fast.board import RULES
from c4fast.game import SAIBLO_SIZES as SAIBLO
from nets import MODELS_DIR
from nets import shm_queue as q
from nets.config import PLAY_FORWARDS, PRESETS, get_preset

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = {"cpu_small": str(MODELS_DIR / "c4fast_cpu.pt")}  # preset -> trained weights
SECTIONS = ("roofline", "model", "backends", "counts", "contention", "numpy_startup", "server", "search_share", "play",
            "gpu")

_peak: dict[int, dict[str, float]] = {}  # threads -> {precision: measured matmul GFLOP/s}


def _emit(**rec) -> None:
    print(json.dumps({"bench": rec.pop("bench"), **rec}), flush=True)


def _time(fn, seconds: float) -> tuple[int, float]:
    """Warm up once, then call fn until `seconds` elapse (at least twice); (calls, secs)."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= seconds and n >= 2:
            return n, dt


def _rates(evals: float, flops: float, threads: int, precision: str = "fp32") -> dict:
    """evals/s plus achieved GFLOP/s and its fraction of the measured matmul peak of
    `precision` (``of_peak``) and of the machine's highest (``of_best_peak``)."""
    d = {"evals_per_s": round(evals, 1), "gflops": round(flops * evals / 1e9, 2)}
    peaks = _peak.get(threads, {})
    if precision in peaks:
        d["precision"] = precision
        d["of_peak"] = round(flops * evals / 1e9 / peaks[precision], 3)
        d["of_best_peak"] = round(flops * evals / 1e9 / max(peaks.values()), 3)
    return d


def _planes(b: int, h: int, w: int, c: int = c4fast.NUM_PLANES, seed: int = 0) -> np.ndarray:
    from c4fast.game import Game

    rng = np.random.default_rng(seed)
    x = (rng.random((b, c, h, w)) < 0.3).astype(np.float32)
    x[:, 3] = Game(h, w, None).planes()[3] if min(h, w) >= 4 else 1.0
    return x


def _model(preset: str, trained: bool = True):
    """(eval-mode Net, "weights" label): the shipped weights where they match, else seed 0."""
    from nets.checkpoint import load_checkpoint
    from nets.model import build_model

    path = SHIPPED.get(preset)
    if trained and path and os.path.exists(path):
        model, _, _ = load_checkpoint(path, map_location="cpu")
        return model.eval(), os.path.relpath(path, REPO)
    torch.manual_seed(0)
    return build_model(get_preset(preset)).eval(), "random"


# --------------------------------------------------------------------------- sections


def bench_roofline(threads: int, seconds: float) -> float:
    """fp32 GFLOP/s of square matmuls (2 n^3 FLOPs each), then the bf16 and int8 peaks
    where the CPU runs them natively; records them and returns the fp32 best."""
    from nets.precision import cpu_info, matmul_peak

    torch.set_num_threads(threads)
    best = 0.0
    for n in (256, 512, 1024, 2048, 4096):
        a, b = torch.randn(n, n), torch.randn(n, n)
        out = torch.empty(n, n)
        calls, dt = _time(lambda: torch.mm(a, b, out=out), seconds)
        g = 2 * n ** 3 * calls / dt / 1e9
        best = max(best, g)
        _emit(bench="roofline", threads=threads, n=n, gflops=round(g, 1))
    _peak[threads] = {"fp32": best}
    _emit(bench="roofline_peak", threads=threads, precision="fp32", gflops=round(best, 1))
    for prec in cpu_info().precisions:
        if prec != "fp32":
            _peak[threads][prec] = matmul_peak(prec, threads, seconds=seconds)
            _emit(bench="roofline_peak", threads=threads, precision=prec, gflops=round(_peak[threads][prec], 1))
    return best


def bench_model(presets, sizes, batches, seconds, threads) -> None:
    from nets.fused import flops_per_eval

    torch.set_num_threads(threads)
    for p in presets:
        model, _ = _model(p, trained=False)
        for h, w in sizes:
            f = flops_per_eval(model.config, h, w)
            for b in batches:
                x = torch.from_numpy(_planes(b, h, w))

                def run():
                    with torch.inference_mode():
                        model(x)

                n, dt = _time(run, seconds)
                _emit(bench="model", preset=p, board=f"{h}x{w}", batch=b, threads=threads, flops_per_eval=f,
                      ms_per_batch=round(1e3 * dt / n, 3), **_rates(n * b / dt, f, threads))


def bench_backends(presets, kinds, size, batch, seconds, threads) -> None:
    """Each backend on `batch` positions of `size`, then on the 16 Saiblo sizes in turn;
    errors against eager fp32 on positions of random games (worst and mean over sizes)."""
    from nets.backends import BackendUnavailable, CpuBackend, calibration_planes
    from nets.precision import PRECISION_OF, PrecisionUnavailable
    from nets.fused import flops_per_eval
    from nets.selfcheck import compare
    from nets.config import wdl_outputs

    torch.set_num_threads(threads)
    test = calibration_planes(SAIBLO + ((6, 7),), 64, seed=12345)
    h, w = size
    for p in presets:
        model, weights = _model(p)
        ref = CpuBackend(model, "eager")
        ref_out = [ref(x) for x in test]
        f_one = flops_per_eval(model.config, h, w)
        f_mix = float(np.mean([flops_per_eval(model.config, *s) for s in SAIBLO]))
        x_one = _planes(batch, h, w)
        x_mix = [_planes(batch, *s, seed=i) for i, s in enumerate(SAIBLO)]
        for kind in kinds:
            try:
                t0 = time.perf_counter()
                be = CpuBackend(model, kind, threads=threads)
                build_s = time.perf_counter() - t0
            except (BackendUnavailable, PrecisionUnavailable) as e:
                _emit(bench="backend", preset=p, backend=kind, available=False, note=str(e))
                continue
            pairs = list(zip(test, ref_out))
            if kind == "compiled":
                pairs = pairs[-2:]  # 12x12 and 6x7 only (a compilation per shape)
            errs = [compare(o[0], wdl_outputs(o[1], cells), rp, wdl_outputs(rv, cells))
                    for x, (rp, rv) in pairs for o in [be(x)] for cells in [x.shape[2] * x.shape[3]]]
            acc = {"policy_rel_max": max(e["policy_rel"] for e in errs),
                   "policy_rel_mean": float(np.mean([e["policy_rel"] for e in errs])),
                   "wdl_abs_max": max(e["wdl_abs"] for e in errs)}
            n, dt = _time(lambda: be(x_one), seconds)
            prec = PRECISION_OF[kind]
            one = _rates(n * batch / dt, f_one, threads, prec)
            mix = None
            if kind != "compiled":  # compiled: one compilation per shape (~30 s each) makes 16 sizes too slow
                it = iter(range(10 ** 9))
                n, dt = _time(lambda: be(x_mix[next(it) % len(x_mix)]), max(seconds, 0.5))
                mix = {"flops_per_eval": round(f_mix), **_rates(n * batch / dt, f_mix, threads, prec)}
            _emit(bench="backend", preset=p, backend=kind, weights=weights, threads=threads, batch=batch,
                  build_s=round(build_s, 2), **{k: float(f"{v:.3g}") for k, v in acc.items()},
                  board=f"{h}x{w}", flops_per_eval=f_one, **one,
                  saiblo_mix=mix)


def bench_counts(presets, kinds, batch, threads, per_size: int = 12, seed: int = 0) -> None:
    """Each backend on one fixed sequence of (Saiblo size, count) calls, counts uniform in
    1..2 x `batch`, `per_size` per size: evals/s of the first pass (shapes new to the
    engine) and of a second (the same shapes again)."""
    from nets.backends import BackendUnavailable, CpuBackend
    from nets.precision import PrecisionUnavailable

    torch.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    calls = [(hw, int(rng.integers(1, 2 * batch + 1))) for hw in SAIBLO for _ in range(per_size)]
    pool = {hw: _planes(2 * batch, *hw, seed=i) for i, hw in enumerate(SAIBLO)}
    evals = sum(n for _, n in calls)
    for p in presets:
        model, weights = _model(p)
        for kind in kinds:
            if kind == "compiled":  # one compilation per shape: minutes per pass
                _emit(bench="counts", preset=p, backend=kind, available=False,
                      note="skipped: one torch.compile per shape takes minutes a pass")
                continue
            try:
                be = CpuBackend(model, kind, threads=threads)
            except (BackendUnavailable, PrecisionUnavailable) as e:
                _emit(bench="counts", preset=p, backend=kind, available=False, note=str(e))
                continue
            rates = []
            for _ in range(2):
                t0 = time.perf_counter()
                for hw, n in calls:
                    be(pool[hw][:n])
                rates.append(round(evals / (time.perf_counter() - t0), 1))
            shapes = {(hw, rows) for hw, n in calls for rows in be.forward_rows(n)}
            _emit(bench="counts", preset=p, backend=kind, weights=weights, threads=threads, calls=len(calls),
                  counts=f"1..{2 * batch}", evals=evals, distinct_shapes=len(shapes),
                  evals_per_s_first_pass=rates[0], evals_per_s_second_pass=rates[1],
                  first_over_second=round(rates[0] / rates[1], 3))


def _spin() -> None:
    while True:
        pass


def bench_contention(presets, kinds, batch, seconds, threads) -> None:
    """The same direct forward with 0 and 1 busy processes beside it (one spinning core: what
    a self-play worker's search does to a server on a 2-core machine), for each backend
    and 1..`threads` threads. Shows which engines degrade gracefully when a core is taken."""
    from nets.backends import BackendUnavailable, CpuBackend

    ctx = mp.get_context("spawn")
    for p in presets:
        model, _ = _model(p)
        x = _planes(batch, 12, 12)
        for kind in kinds:
            for t in sorted({1, threads}):
                torch.set_num_threads(t)
                try:
                    be = CpuBackend(model, kind, threads=t)
                except BackendUnavailable as e:
                    _emit(bench="contention", preset=p, backend=kind, available=False, note=str(e))
                    break
                res = {}
                for busy in (0, 1):
                    spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(busy)]
                    for sp in spinners:
                        sp.start()
                    try:
                        n, dt = _time(lambda: be(x), seconds)
                    finally:
                        for sp in spinners:
                            sp.kill()
                            sp.join()
                    res[busy] = n * batch / dt
                _emit(bench="contention", preset=p, backend=kind, threads=t, batch=batch, board="12x12",
                      evals_per_s_alone=round(res[0], 1), evals_per_s_beside_1_busy=round(res[1], 1),
                      kept=round(res[1] / res[0], 3))
    torch.set_num_threads(threads)


def bench_numpy_startup(preset: str, runs: int = 3) -> None:
    from nets.model import Net
    from nets.numpy_net import export_numpy

    with tempfile.TemporaryDirectory() as d:
        path = export_numpy(Net(get_preset(preset)).eval(), os.path.join(d, f"{preset}.npz"))
        code = ("import time\nt = time.perf_counter()\nimport nets.numpy_net as m\n"
                f"m.NumpyNet.load({path!r})\nprint(time.perf_counter() - t)\n")
        env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
        best_in, best_proc = float("inf"), float("inf")
        for _ in range(runs):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO,
                                 capture_output=True, text=True, check=True)
            best_proc = min(best_proc, time.perf_counter() - t0)
            best_in = min(best_in, float(out.stdout.strip()))
        _emit(bench="numpy_startup", preset=preset, import_load_s=round(best_in, 4),
              process_s=round(best_proc, 4), npz_bytes=os.path.getsize(path))


def _request_stream(batches, size, seed=0):
    """The uint8 request batches of a server benchmark: one per (batch, size)."""
    rng = np.random.default_rng(seed)
    return [(rng.random((b, c4fast.NUM_PLANES, *size)) < 0.3).astype(np.uint8) for b in batches]


def _direct_child(cfg, batches, size, seconds, conn) -> None:
    """Fresh process: the server's own forward (uint8 -> float32 -> backend -> softmax) on
    the same requests, no queue. Sends back [(batch, call_us, evals_per_s)]."""
    from c4fast.runtime import keep_heap_mapped
    from nets.server import InferenceServer

    keep_heap_mapped()  # as server_main does
    fwd = InferenceServer.direct_forward(cfg)
    out = []
    for x in _request_stream(batches, size):
        t = torch.from_numpy(x)
        n, dt = _time(lambda: fwd(t), seconds)
        out.append((x.shape[0], dt / n * 1e6, n * x.shape[0] / dt))
    conn.send(out)


def bench_server(cfg, label: str, batches, size=(12, 12), seconds=1.0) -> list[dict]:
    """Round trips through a fresh server process; returns the emitted records."""
    from nets.server import request_shutdown, start_server

    ctx = mp.get_context("spawn")
    sq = q.SharedQueue(ctx, 1, max(batches), c4fast.NUM_PLANES)
    proc = start_server(ctx, sq.handles, cfg)
    recs = []
    try:
        c = q.InferenceClient(sq.handles, 0)
        for x in _request_stream(batches, size):
            b = x.shape[0]
            buf = c.planes_buffer(*size)[:b]
            buf[...] = x
            n, dt = _time(lambda: c.evaluate(buf), seconds)
            rec = dict(bench="server", model=label, forward=cfg.forward, device=cfg.device, threads=cfg.threads,
                       board=f"{size[0]}x{size[1]}", batch=b, round_trip_us=round(dt / n * 1e6, 1),
                       evals_per_s=round(n * b / dt))
            _emit(**rec)
            recs.append(rec)
        c.close()
    finally:
        request_shutdown(sq.handles)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        sq.close()
    return recs


def bench_direct(cfg, label: str, batches, size=(12, 12), seconds=1.0) -> list[dict]:
    """The server's forward called directly in a fresh process (same config and threads)."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_direct_child, args=(cfg, batches, size, seconds, send))
    p.start()
    res = recv.recv()
    p.join()
    recs = []
    for b, us, eps in res:
        rec = dict(bench="direct", model=label, forward=cfg.forward, device=cfg.device, threads=cfg.threads,
                   board=f"{size[0]}x{size[1]}", batch=b, call_us=round(us, 1), evals_per_s=round(eps))
        _emit(**rec)
        recs.append(rec)
    return recs


def bench_server_vs_direct(cfg, label, batches, size, seconds) -> None:
    """Server, direct call in a fresh process, and direct call in this (long-lived) process."""
    from nets.server import InferenceServer

    srv = bench_server(cfg, label, batches, size, seconds)
    direct = bench_direct(cfg, label, batches, size, seconds)
    fwd = InferenceServer.direct_forward(cfg)
    here = []
    for x in _request_stream(batches, size):
        t = torch.from_numpy(x)
        n, dt = _time(lambda: fwd(t), seconds)
        here.append(round(n * x.shape[0] / dt))
    for s, d, h in zip(srv, direct, here):
        _emit(bench="server_vs_direct", model=label, forward=cfg.forward, threads=cfg.threads,
              board=s["board"], batch=s["batch"], server_evals_per_s=s["evals_per_s"],
              direct_evals_per_s=d["evals_per_s"], ratio=round(s["evals_per_s"] / d["evals_per_s"], 3),
              overhead_us=round(s["round_trip_us"] - d["call_us"], 1), direct_in_bench_process_evals_per_s=h)


def bench_search_share(preset: str = "cpu_small", games: int = 64, playouts: int = 200,
                       size=(12, 12), threads: int = 2) -> None:
    """Share of self-play time in the search vs the evaluator: BatchedMCTS with a real net
    evaluated in-process (one core for the search, `threads` for torch)."""
    from c4fast.config import SearchConfig
    from c4fast.game import Game
    from c4fast.mcts import BatchedMCTS
    from nets.evaluator import TorchEvaluator

    torch.set_num_threads(threads)
    ev = TorchEvaluator(_model(preset, trained=False)[0])
    h, w = size
    mcts = BatchedMCTS(SearchConfig(), games, h, w, seed=0, max_playouts=playouts)
    planes = mcts.planes_buffer()

    def start(n):
        for g in range(games):
            mcts.set_position(g, Game(h, w, (h // 2, w // 2)).state)
            mcts.start_search(g, n, full=True)

    start(2)
    while not mcts.all_done():  # warm-up: compile and first torch calls
        n = mcts.select(planes)
        if n:
            mcts.expand_and_backup(n, *ev.evaluate(planes[:n], None))
    start(playouts)
    t_search = t_eval = 0.0
    evals = 0
    while not mcts.all_done():
        t0 = time.perf_counter()
        n = mcts.select(planes)
        t1 = time.perf_counter()
        if n:
            logits, wdl = ev.evaluate(planes[:n], None)
            t2 = time.perf_counter()
            mcts.expand_and_backup(n, logits, wdl)
            t_search += (t1 - t0) + (time.perf_counter() - t2)
            t_eval += t2 - t1
            evals += n
        else:
            t_search += t1 - t0
    total = t_search + t_eval
    _emit(bench="search_share", preset=preset, board=f"{h}x{w}", games=games, playouts=playouts, evals=evals,
          search_share=round(t_search / total, 4), evaluator_share=round(t_eval / total, 4),
          seconds=round(total, 2), evals_per_s=round(evals / total, 1))


def bench_play(forwards, seconds_per_move: float = 0.2, positions: int = 30, seed: int = 3,
               games: int = 2) -> None:
    """Playouts of a fresh search (no graph kept) by the shipped net's player per forward in
    `seconds_per_move`, one thread, the same positions for every forward; then `games` games
    against ``alphabeta`` at the same time per move, where the player keeps its graph between
    moves: the share of each move's root visits kept from the last move (``reused``). Moves
    decided by the exact endgame solve are left out."""
    from c4fast.players.bots import AlphaBetaPlayer, random_positions
    from nets.players import make_player

    pt = SHIPPED["cpu_small"]
    starts = random_positions(positions, seed, plies=(4, 30))
    for fwd in forwards:
        path = pt[:-3] + ".npz" if fwd == "numpy" else pt
        p = make_player(f"net:{path}:{seconds_per_move}s", threads=1, forward=fwd)
        p.reset(starts[0])
        p.choose(starts[0].copy())  # warm-up: compiled kernels and the first forward
        counts = []
        for g in starts:
            p.reset(g)
            p.choose(g.copy())
            a = p.analysis()
            if not a.get("solved"):
                counts.append(a["playouts"])
        rec = dict(positions=len(counts), median_playouts=int(np.median(counts)),
                   mean_playouts=round(float(np.mean(counts)), 1),
                   playouts_per_s=round(float(np.median(counts)) / seconds_per_move, 1))
        kept = []
        rng = np.random.default_rng(seed + 1)
        for i in range(games):
            g = c4fast.Game.random(rng)
            ab = AlphaBetaPlayer(seconds_per_move, seed=i)
            p.reset(g)
            ab.reset(g)
            while g.result is None:
                if g.ply % 2 == i % 2:
                    g.play(p.choose(g.copy()))
                    a = p.analysis()
                    if not a.get("solved"):
                        kept.append((a["playouts"], a["reused"]))
                else:
                    g.play(ab.choose(g.copy()))
        if kept:
            total, reused = np.array(kept, float).T
            rec.update(game_moves=len(kept), game_median_root_visits=int(np.median(total)),
                       game_median_reused_share=round(float(np.median(reused / total)), 3),
                       game_moves_with_reuse=round(float(np.mean(reused > 0)), 3))
        _emit(bench="play", forward=fwd, model=os.path.basename(path), seconds_per_move=seconds_per_move, **rec)


def bench_gpu(seconds: float) -> None:
    """Eager vs CUDA graph, fp32 vs bf16, and the server path, for b3c128nbt on 12x12."""
    from nets.server import ServerConfig

    for precision in ("fp32", "bf16"):
        for graphs in (False, True):
            cfg = ServerConfig(device="cuda", preset="b3c128nbt", precision=precision,
                               cuda_graphs=graphs, max_forward_batch=8192, sizes=((12, 12),))
            bench_server(cfg, f"b3c128nbt {precision} {'graphs' if graphs else 'eager'}",
                         [256, 1024, 4096], seconds=seconds)


# --------------------------------------------------------------------------- CLI


def _size(s: str) -> tuple[int, int]:
    try:
        (size,) = RULES.parse_sizes(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return size


def _list(conv):
    return lambda s: [conv(v) for v in s.split(",") if v]


def main(argv=None) -> int:
    from nets.backends import BACKENDS
    from nets.server import ServerConfig

    ap = argparse.ArgumentParser(prog="python -m selfplay.bench.nets", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sections", nargs="*", help=f"sections to run: {', '.join(SECTIONS)} (default: all)")
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per figure (default 1)")
    ap.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime threads (default 2)")
    ap.add_argument("--presets", type=_list(str), default=["cpu_small", "b3c128nbt"],
                    help="comma-separated presets (default: cpu_small,b3c128nbt)")
    ap.add_argument("--sizes", type=_list(_size), default=[(6, 7), (9, 9), (12, 12)],
                    help="boards of the model section (default: 6x7,9x9,12x12)")
    ap.add_argument("--batches", type=_list(int), default=[1, 8, 64, 256, 1024],
                    help="batches of the model section (default: 1,8,64,256,1024)")
    ap.add_argument("--backends", type=_list(str), default=list(BACKENDS),
                    help=f"engines of the backends section (default: {','.join(BACKENDS)})")
    ap.add_argument("--batch", type=int, default=256, help="batch of the backends section (default 256)")
    ap.add_argument("--server-forwards", type=_list(str), default=["eager"],
                    help="server forward paths compared with a direct call (default: eager)")
    ap.add_argument("--server-batches", type=_list(int), default=[48, 96, 256],
                    help="request batches of the server section (default 48,96,256: the CPU presets' "
                         "worker batches of 1 and 2 leaves per game, and the server's forward cap)")
    ap.add_argument("--play-forwards", type=_list(str), default=["eager", "ort", "numpy"],
                    help="play forwards of the play section (default: eager,ort,numpy)")
    ap.add_argument("--play-seconds", type=float, default=0.2, help="seconds per move of the play section (0.2)")
    ap.add_argument("--play-positions", type=int, default=30, help="positions of the play section (default 30)")
    ap.add_argument("--play-games", type=int, default=2,
                    help="games against alpha-beta per forward in the play section (default 2)")
    args = ap.parse_args(argv)
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {', '.join(SECTIONS)}")
    if args.seconds <= 0 or args.threads < 1 or args.batch < 1:
        ap.error("--seconds must be > 0, --threads and --batch >= 1")
    for p in args.presets:
        if p not in PRESETS:
            ap.error(f"unknown preset {p!r}; choose from {sorted(PRESETS)}")
    for k in args.backends:
        if k not in BACKENDS:
            ap.error(f"unknown backend {k!r}; choose from {', '.join(BACKENDS)}")
    for k in args.play_forwards:
        if k not in PLAY_FORWARDS or k == "auto":
            ap.error(f"unknown play forward {k!r}; choose from {', '.join(PLAY_FORWARDS[1:])}")
    if args.play_seconds <= 0 or args.play_positions < 1 or args.play_games < 0:
        ap.error("--play-seconds must be > 0, --play-positions >= 1 and --play-games >= 0")
    sections = args.sections or [s for s in SECTIONS if s != "counts" and (s != "gpu" or torch.cuda.is_available())]
    torch.set_num_threads(args.threads)
    from nets.precision import cpu_info

    _emit(bench="env", torch=torch.__version__, numpy=np.__version__, threads=args.threads,
          cpus=os.cpu_count(), loadavg_1m=round(os.getloadavg()[0], 2), **cpu_info().to_dict())
    if any(s in sections for s in ("roofline", "model", "backends")):
        bench_roofline(args.threads, args.seconds)  # of_peak needs it
    if "model" in sections:
        bench_model(args.presets, args.sizes, args.batches, min(args.seconds, 0.5), args.threads)
    if "backends" in sections:
        bench_backends(args.presets, args.backends, (12, 12), args.batch, args.seconds, args.threads)
    if "counts" in sections:
        bench_counts(args.presets, args.backends, args.batch, args.threads)
    if "contention" in sections:
        bench_contention(args.presets, [k for k in args.backends if k in ("eager", "fused", "ort", "ort_int8")],
                         args.batch, args.seconds, args.threads)
    if "numpy_startup" in sections:
        for p in args.presets:
            bench_numpy_startup(p)
    if "server" in sections:
        bench_server(ServerConfig(noop=True, threads=args.threads), "noop", [1, 64, 2048], seconds=args.seconds)
        for p in args.presets:
            model_path = SHIPPED.get(p) if os.path.exists(SHIPPED.get(p, "")) else None
            for fwd in args.server_forwards:
                cfg = ServerConfig(preset=p, model=model_path, threads=args.threads, forward=fwd,
                                   max_forward_batch=256)
                bench_server_vs_direct(cfg, p, args.server_batches, (12, 12), args.seconds)
    if "search_share" in sections:
        bench_search_share(threads=args.threads)
    if "play" in sections:
        bench_play(args.play_forwards, args.play_seconds, args.play_positions, games=args.play_games)
    if "gpu" in sections:
        if torch.cuda.is_available():
            bench_gpu(args.seconds)
        else:
            _emit(bench="gpu", available=False, note="no CUDA device: GPU figures skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
