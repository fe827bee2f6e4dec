"""`python -m selfplay.bench.gpucheck`: the GPU acceptance check, one JSON line per result.

Without CUDA it prints one line saying so and exits 0 (CI runs it). With CUDA, on
``cuda:0`` (and ``cuda:1`` when present), in about 8 minutes (``--only`` picks steps;
docs/benchmarks/gpu_h200_2026-11-27.md has a run split into three commands):

correctness (the first failure prints ``"ok": false`` with the reason and exits 1)
  1. ``canvas_graphs``: one canvas graph per batch bucket serving every Saiblo size
     (:mod:`nets.canvas`), each self-checked on a mixed batch of all sizes against the
     per-size eager fp32 forward (:mod:`nets.selfcheck`), on a net with perturbed weights and
     BatchNorm statistics; ``capture_s`` is the server's start-up capture;
  2. ``servers``: two server processes (on ``cuda:0`` and ``cuda:1``, or both on
     ``cuda:0`` with one GPU), each pinned through its own ``CUDA_VISIBLE_DEVICES``
     entry, answering real shared-memory requests that match the eager fp32 forward;
     ``hot_reload``: a newer checkpoint in the followed directory is served with no
     re-capture (the server's capture counter is unchanged) and its answers match;
  3. with ``--per-size``, ``graphs``: the per-size path (``--no-canvas``), every size x bucket.

figures (``"bench"`` lines; evals = positions evaluated; peak fractions use the dense
bf16 tensor-core peak of the device and the net's conv/linear FLOPs on each position's own
board, :func:`nets.fused.flops_per_eval`)
  4. ``canvas_replay``: raw canvas replays per bucket (no host copies), evals/s;
  5. ``canvas_kinds``: BN-folded vs torch.compile'd canvas graphs (and their compile time);
  6. ``server``: evals/s through shared memory with host copies, 8 clients of 8 sizes;
  7. ``selfplay``: ``selfplay.generation.run --gpus 1`` end to end with b3c128nbt and all usable
     cores: evals/s, playouts/s, samples/s (whole run and steady state), mean forward batch;
  8. ``train``: trainer samples/s per kind (per-size passes, padded canvas, padded compiled) and
     the host's share (``sample_ms``);
  9. ``memory``: GPU memory of one server's graphs; with ``--per-size`` also
     ``graph_replay``, ``forward_kinds`` and ``server_per_size`` (the per-size path's figures).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import c4fast
from c4fast.game import SAIBLO_SIZES

log = logging.getLogger("selfplay.bench.gpucheck")

SAIBLO = SAIBLO_SIZES

#: Dense bf16 tensor-core peak (FLOP/s) by device-name fragment, most specific first.
BF16_PEAK = (
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12), ("H200", 989e12),
    ("GH200", 989e12), ("B200", 2250e12), ("A100", 312e12), ("L40S", 362e12), ("L40", 181e12),
    ("L4", 121e12), ("A10G", 70e12), ("A10", 125e12), ("RTX 4090", 165e12), ("RTX 3090", 71e12),
)


def bf16_peak(device_name: str) -> float | None:
    """Dense bf16 peak FLOP/s of a device by name, or None if unknown."""
    for frag, peak in BF16_PEAK:
        if frag in device_name:
            return peak
    return None


def mean_flops(config, sizes=SAIBLO) -> float:
    """FLOPs of one evaluation averaged over board sizes (the Saiblo mix by default)."""
    from nets.fused import flops_per_eval

    return float(np.mean([flops_per_eval(config, h, w) for h, w in sizes]))


def peak_fraction(evals_per_s: float, flops: float, peak: float | None) -> float | None:
    return None if peak is None else round(evals_per_s * flops / peak, 4)


def perturbed_model(preset: str, seed: int):
    """A fresh eval-mode Net with random BatchNorm statistics and perturbed weights (so
    BN folding and the self-check are not trivially exact)."""
    from nets.config import get_preset
    from nets.model import build_model

    torch.manual_seed(seed)
    m = build_model(get_preset(preset))
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.3)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.normal_(1.0, 0.2)
                mod.bias.normal_(0.0, 0.2)
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m.eval()


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def no_cuda_line() -> str:
    build = "CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    return json.dumps({"gpucheck": "skipped", "cuda": False,
                       "reason": f"no CUDA device available (torch {torch.__version__}, {build}): "
                                 "GPU checks and figures skipped"})


# --------------------------------------------------------------------------- checks


def check_graphs(preset: str, sizes, max_batch: int, canvas: bool = False):
    """1. Capture and self-check every (size, bucket), or with `canvas` one graph per batch
    bucket for every size at once, each self-checked on a mixed batch of all `sizes` against
    the per-size eager fp32 forward; returns the runner. ``capture_s`` is the server's
    start-up capture."""
    from nets.cuda_runner import GraphRunner

    model = perturbed_model(preset, 0)
    t0 = time.perf_counter()
    runner = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=sizes, max_batch=max_batch, canvas=canvas)
    runner.capture_all()
    _emit({"check": "canvas_graphs" if canvas else "graphs", "ok": True, "preset": preset,
           "graphs": len(runner.graphs), "sizes": len(runner.sizes), "buckets": list(runner.buckets),
           "self_checks": len(runner.checks), "tolerance": vars(runner.tol),
           "worst_policy_rel": round(max(c["policy_rel"] for c in runner.checks), 5),
           "worst_wdl_abs": round(max(c["wdl_abs"] for c in runner.checks), 5),
           "capture_s": round(runner.capture_seconds, 1), "seconds": round(time.perf_counter() - t0, 1)})
    return runner


def bench_canvas_replay(runner, seconds: float, peak, sizes) -> None:
    """4. (canvas) Raw replays per bucket (no host copies): evals/s, the share of the bf16
    peak in useful FLOPs (each position's own board, the Saiblo mix) and in the canvas's
    12x12 FLOPs (what the GPU computes)."""
    from nets.fused import flops_per_eval

    rates = {b: round(b * runner.replay_rate(0, 0, b, seconds)) for b in runner.buckets}
    best = max(rates, key=rates.get)
    _emit({"bench": "canvas_replay", "evals_per_s": rates, "best_bucket": best, "best_evals_per_s": rates[best],
           "bf16_peak_fraction": peak_fraction(rates[best], mean_flops(runner.config, sizes), peak),
           "bf16_peak_fraction_canvas": peak_fraction(rates[best], flops_per_eval(runner.config, 12, 12), peak)})


def bench_canvas_kinds(preset: str, seconds: float, peak, sizes, buckets=(2048, 8192)) -> None:
    """5. (canvas) BN-folded vs torch.compile'd canvas graphs (fused elementwise work):
    replays per second of the largest buckets, each self-checked on a mixed batch; the
    compile time is reported too."""
    from nets.config import get_preset
    from nets.cuda_runner import GraphRunner

    model = perturbed_model(preset, 0)
    out: dict = {}
    for kind in ("fused", "compiled"):
        try:
            t0 = time.perf_counter()
            r = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=sizes, max_batch=max(buckets), kind=kind,
                            canvas=True)
            out[kind] = {}
            for b in buckets:
                r._capture_canvas(b)  # includes the mixed-size self-check
                out[kind][b] = round(b * r.replay_rate(0, 0, b, seconds))
            out[kind]["capture_s"] = round(time.perf_counter() - t0, 1)
            del r
        except Exception as e:  # noqa: BLE001 - a figure, not a check (e.g. no Triton for compile)
            out[kind] = {"error": f"{type(e).__name__}: {e}"[:300]}
        torch.cuda.empty_cache()
    ok = {k: v[max(buckets)] for k, v in out.items() if max(buckets) in v}
    best = max(ok, key=ok.get) if ok else None
    _emit({"bench": "canvas_kinds", "evals_per_s": out, "fastest": best,
           "bf16_peak_fraction": peak_fraction(ok[best], mean_flops(get_preset(preset), sizes), peak) if best else None})


def _reference(model, x: np.ndarray):
    from nets.cuda_runner import exact_fp32

    m = model.to("cuda:0").float().eval()
    with torch.no_grad(), exact_fp32():
        pol, val = m(torch.from_numpy(x).to("cuda:0").float())
    return pol.flatten(1).cpu().numpy(), torch.softmax(val, 1).cpu().numpy()


def _check_answers(client, model, sizes, tol, what: str) -> dict:
    from nets.selfcheck import SelfCheckError, compare, random_planes

    worst = {"policy_rel": 0.0, "wdl_abs": 0.0}
    for i, (h, w) in enumerate(sizes):
        x = random_planes(min(client.max_batch, 300 + 97 * i), c4fast.NUM_PLANES, h, w, seed=100 + i)
        pol, wdl = client.evaluate(x)
        err = compare(pol, wdl, *_reference(model, x))
        if not (err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs):
            raise SelfCheckError(f"{what} on {h}x{w}: {err} exceeds {tol}")
        for k in worst:
            worst[k] = max(worst[k], round(err[k], 5))
    return worst


def check_servers_and_reload(preset: str, sizes, tmp: str) -> None:
    """2 and 3: two pinned server processes; hot reload without re-capture."""
    from nets import shm_queue as q
    from nets.checkpoint import checkpoint_name, save_checkpoint
    from nets.cuda_runner import tolerance_for
    from nets.server import ServerConfig, load_model, request_shutdown, start_server

    ctx = mp.get_context("spawn")
    models = os.path.join(tmp, "models")
    os.makedirs(models)
    m1 = perturbed_model(preset, 1)
    save_checkpoint(os.path.join(models, checkpoint_name(1)), m1, m1.config, 1)
    second = "cuda:1" if torch.cuda.device_count() >= 2 else "cuda:0"
    cfgs = [ServerConfig(device="cuda:0", model=models, reload_interval=0.2, sizes=sizes,
                         max_forward_batch=1024),
            ServerConfig(device=second, preset=preset, seed=5, sizes=sizes, max_forward_batch=1024)]
    queues = [q.SharedQueue(ctx, 1, 1024, c4fast.NUM_PLANES) for _ in cfgs]
    procs = [start_server(ctx, sq.handles, cfg, name=f"gpucheck-server-{i}") for i, (sq, cfg)
             in enumerate(zip(queues, cfgs))]
    tol = tolerance_for(torch.bfloat16, "cuda")
    try:
        clients = [q.InferenceClient(sq.handles, 0, start_timeout=900) for sq in queues]
        t0 = time.perf_counter()
        clients[0].evaluate(np.zeros((1, 9, *sizes[0]), np.uint8))  # waits for start-up
        clients[1].evaluate(np.zeros((1, 9, *sizes[0]), np.uint8))
        startup = time.perf_counter() - t0
        fresh, _, _ = load_model(cfgs[1], torch.device("cpu"))
        worst = [_check_answers(clients[0], m1, sizes, tol, "server 0 (cuda:0)"),
                 _check_answers(clients[1], fresh, sizes, tol, f"server 1 ({second})")]
        hdr0 = clients[0].global_hdr
        _emit({"check": "servers", "ok": True, "devices": ["cuda:0", second],
               "captures": [int(c.global_hdr[q.G_CAPTURES]) for c in clients],
               "startup_s": round(startup, 1), "worst": worst, "tolerance": vars(tol)})
        captures = int(hdr0[q.G_CAPTURES])
        m2 = perturbed_model(preset, 2)
        t0 = time.perf_counter()
        save_checkpoint(os.path.join(models, checkpoint_name(2)), m2, m2.config, 2)
        x = np.zeros((1, 9, *sizes[0]), np.uint8)
        while clients[0].model_version != 2:
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("hot reload: version 2 not served within 120 s")
            clients[0].evaluate(x)
            time.sleep(0.05)
        reload_s = time.perf_counter() - t0
        worst2 = _check_answers(clients[0], m2, sizes, tol, "server 0 after hot reload")
        recaptures = int(hdr0[q.G_CAPTURES]) - captures
        if recaptures:
            raise RuntimeError(f"hot reload re-captured {recaptures} graphs")
        _emit({"check": "hot_reload", "ok": True, "recaptures": recaptures, "reload_s": round(reload_s, 2),
               "worst": worst2})
        for c in clients:
            c.close()
    finally:
        for sq, p in zip(queues, procs):
            request_shutdown(sq.handles)
            p.join(30)
            if p.is_alive():
                p.kill()
            sq.close()


# --------------------------------------------------------------------------- figures


def bench_replay(runner, seconds: float, peak) -> None:
    """4. Raw replay evals/s per size and bucket."""
    from nets.fused import flops_per_eval

    for h, w in runner.sizes:
        rates = {b: round(b * runner.replay_rate(h, w, b, seconds)) for b in runner.buckets}
        best = max(rates, key=rates.get)
        _emit({"bench": "graph_replay", "board": f"{h}x{w}", "evals_per_s": rates, "best_bucket": best,
               "best_evals_per_s": rates[best],
               "bf16_peak_fraction": peak_fraction(rates[best], flops_per_eval(runner.config, h, w), peak)})


def bench_forward_kinds(preset: str, seconds: float, buckets=(1024, 4096), size=(12, 12)) -> None:
    """5. Eager vs fused vs compiled graph replays (the server's `forward` choice)."""
    from nets.cuda_runner import GraphRunner

    model = perturbed_model(preset, 0)
    out: dict = {}
    for kind in ("eager", "fused", "compiled"):
        try:
            r = GraphRunner(model, "cuda:0", torch.bfloat16, sizes=[size], max_batch=max(buckets), kind=kind)
            out[kind] = {}
            for b in buckets:
                r._capture(*size, b)  # includes the self-check
                out[kind][b] = round(b * r.replay_rate(*size, b, seconds))
            del r
        except Exception as e:  # noqa: BLE001 - a figure, not a check (e.g. no Triton for compile)
            out[kind] = {"error": f"{type(e).__name__}: {e}"[:300]}
        torch.cuda.empty_cache()
    ok = {k: v[max(buckets)] for k, v in out.items() if max(buckets) in v}
    _emit({"bench": "forward_kinds", "board": f"{size[0]}x{size[1]}", "evals_per_s": out,
           "fastest": max(ok, key=ok.get) if ok else None})


def _bench_client(handles, slot, h, w, batch, seconds, out_q):
    from nets.selfcheck import random_planes
    from nets.shm_queue import InferenceClient

    c = InferenceClient(handles, slot, start_timeout=900)
    buf = c.planes_buffer(h, w)[:batch]
    buf[...] = random_planes(batch, buf.shape[1], h, w, seed=slot)
    c.evaluate(buf)  # start-up and warm-up
    out_q.put(("ready", slot))
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        c.evaluate(buf)
        n += batch
    out_q.put(("done", n, time.perf_counter() - t0))


def bench_server(preset: str, seconds: float, peak, clients: int = 6, batch: int = 2048,
                 sizes=((12, 12),), canvas: bool = True, forward: str = "auto") -> None:
    """6. evals/s through the server with host copies (clients in their own processes, client
    i on board ``sizes[i % len(sizes)]``; a canvas server merges their sizes)."""
    from nets import shm_queue as q
    from nets.config import get_preset
    from nets.fused import flops_per_eval
    from nets.server import ServerConfig, request_shutdown, start_server

    ctx = mp.get_context("spawn")
    sq = q.SharedQueue(ctx, clients, batch, c4fast.NUM_PLANES)
    cfg = ServerConfig(device="cuda:0", preset=preset, sizes=tuple(sizes), canvas=canvas, forward=forward,
                       max_forward_batch=clients * batch if canvas else 2 * batch)
    t_start = time.perf_counter()
    proc = start_server(ctx, sq.handles, cfg, name="gpucheck-bench-server")
    out_q = ctx.Queue()
    cps = [ctx.Process(target=_bench_client, args=(sq.handles, s, *sizes[s % len(sizes)], batch, seconds, out_q))
           for s in range(clients)]
    try:
        for p in cps:
            p.start()
        res = [out_q.get(timeout=900) for _ in range(clients)]  # every client ready: the server is up
        startup = time.perf_counter() - t_start
        res += [out_q.get(timeout=900) for _ in range(clients)]
        done = [r for r in res if r[0] == "done"]
        n = sum(r[1] for r in done)
        dt = max(r[2] for r in done)
        eps = n / dt
        used = [sizes[i % len(sizes)] for i in range(clients)]
        flops = float(np.mean([flops_per_eval(get_preset(preset), *hw) for hw in used]))
        _emit({"bench": "server", "boards": sorted({f"{h}x{w}" for h, w in used}), "canvas": canvas, "forward": forward,
               "clients": clients, "batch": batch, "evals_per_s": round(eps), "startup_s": round(startup, 1),
               "bf16_peak_fraction": peak_fraction(eps, flops, peak)})
    finally:
        for p in cps:
            p.join(30)
            if p.is_alive():
                p.kill()
        request_shutdown(sq.handles)
        proc.join(30)
        if proc.is_alive():
            proc.kill()
        sq.close()


_STATUS = re.compile(r"selfplay\.(?:generation\.)?run:\s+(\d+)s games (\d+)\s+samples (\d+) \(([\d.]+)/s\)\s+evals (\d+)/s")


def steady_rates(stdout: str) -> dict | None:
    """Steady-state samples/s and evals/s of a selfplay.generation.run log, measured from the first
    status line after the first game was written (start-up, i.e. graph capture and the
    first games, excluded) to the last one. Each status line holds cumulative averages
    since the start. ``serving_from_s``: the first status line with evals > 0 (the
    server's start-up ends before it). None with fewer than two such lines."""
    pts = [(int(m[1]), int(m[3]), int(m[5])) for m in _STATUS.finditer(stdout)]
    serving = next((t for t, _, e in pts if e > 0), None)
    played = [p for p in pts if p[1] > 0]
    if len(played) < 2:
        return None
    (t1, s1, e1), (t2, s2, e2) = played[0], played[-1]
    if t2 <= t1:
        return None
    return {"serving_from_s": serving, "from_s": t1, "to_s": t2, "samples_per_s": round((s2 - s1) / (t2 - t1), 1),
            "evals_per_s": round((e2 * t2 - e1 * t1) / (t2 - t1))}


def bench_selfplay(seconds: float, peak, tmp: str, preset: str = "b3c128nbt", canvas: bool = True,
                   forward: str = "auto") -> None:
    """7. selfplay.generation.run --gpus 1 end to end ('seconds' include the start-up: capturing the
    16 sizes x 28 buckets took 141 s on an H100 with 16 cores, so the steady-state
    window starts after the first games; a run that wrote no game is an error)."""
    from nets.config import get_preset

    out = os.path.join(tmp, "selfplay")
    cmd = [sys.executable, "-m", "selfplay.generation.run", "--gpus", "1", "--preset", preset, "--time", str(seconds),
           "--out", out, "--status-every", "15", "--samples-per-shard", "100000",
           "--canvas" if canvas else "--no-canvas", "--forward", forward]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"selfplay.generation.run exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    summ = json.loads(lines[-1])
    summ.pop("shards", None)
    steady = steady_rates(proc.stderr)  # status lines are log lines (stderr)
    if steady is None:
        raise RuntimeError(f"selfplay.generation.run wrote games in fewer than two status intervals of {seconds:.0f} s "
                           "(start-up longer than the run?): raise --selfplay-seconds")
    flops = mean_flops(get_preset(preset))
    captured = [ln.strip()[-160:] for ln in proc.stderr.splitlines() if "captured" in ln]
    _emit({"bench": "selfplay", "preset": preset, "canvas": canvas, "forward": forward, "capture_log": captured, "usable_cores": len(os.sched_getaffinity(0)),
           "wall_s": round(time.perf_counter() - t0, 1), **summ, "steady": steady,
           "bf16_peak_fraction": peak_fraction((steady or summ)["evals_per_s"], flops, peak)})


TRAIN_KINDS = {"per_size": (False, False), "padded": (True, False), "padded_compiled": (True, True)}


def bench_train(peak, per_sizes=(16, 128), preset: str = "b3c128nbt", kinds=tuple(TRAIN_KINDS)) -> None:
    """8. Trainer samples/s on CUDA (fwd + bwd = 3x the forward FLOPs): per-size passes, the
    padded canvas step, and the padded step compiled; ``sample_ms``: the host's share."""
    from nets.config import get_preset
    from nets.train import bench

    for per_size in per_sizes:
        for name in kinds:
            padded, compiled = TRAIN_KINDS[name]
            try:
                r = bench(preset, 20, per_size, list(SAIBLO), device="cuda:0", padded=padded, compile=compiled)
            except Exception as e:  # noqa: BLE001 - a figure, not a check
                _emit({"bench": "train", "kind": name, "per_size": per_size, "error": f"{type(e).__name__}: {e}"[:300]})
                continue
            r["kind"] = name
            r["bf16_peak_fraction"] = peak_fraction(r["samples_per_s"], 3 * mean_flops(get_preset(preset)), peak)
            _emit(r)
            torch.cuda.empty_cache()


#: gpucheck's steps in the order they run (--only picks some); the per-size ones run with --per-size
STEPS = ("canvas_graphs", "canvas_replay", "canvas_kinds", "servers", "graphs", "graph_replay", "forward_kinds", "server",
         "server_per_size", "selfplay", "train")
PER_SIZE_STEPS = ("graphs", "graph_replay", "forward_kinds", "server_per_size")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.bench.gpucheck", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="b3c128nbt", help="network preset (default b3c128nbt)")
    ap.add_argument("--max-batch", type=int, default=4096, help="largest bucket of the graph check (4096)")
    ap.add_argument("--selfplay-seconds", type=float, default=240.0,
                    help="selfplay.generation.run --time, start-up included (240; the compiled canvas server "
                         "started in 31 s on an H200, the per-size one captured for 141 s on an H100)")
    ap.add_argument("--replay-seconds", type=float, default=0.05, help="timed seconds per replay figure (0.05)")
    ap.add_argument("--quick", action="store_true", help="two board sizes and short figures (smoke test)")
    ap.add_argument("--per-size", action="store_true",
                    help="also the per-size path (--no-canvas): 16 sizes x buckets of graphs, replay per size, "
                         "forward kinds, its server figure")
    ap.add_argument("--only", default="", help="comma-separated steps to run (default all): " + ",".join(STEPS))
    ap.add_argument("--skip-selfplay", action="store_true", help="skip the end-to-end self-play figure")
    ap.add_argument("--skip-train", action="store_true", help="skip the trainer figure")
    ap.add_argument("--train-per-size", default="", help="trainer figures at these samples per size (default 16,128; "
                                                         "quick 16)")
    ap.add_argument("--forward", default="auto", choices=("auto", "fused", "compiled"),
                    help="the server's forward in the server and self-play figures (auto: fused)")
    ap.add_argument("--train-kinds", default=",".join(TRAIN_KINDS),
                    help="trainer figures of these kinds: " + ", ".join(TRAIN_KINDS))
    args = ap.parse_args(argv)
    kinds = tuple(k for k in args.train_kinds.split(",") if k)
    if set(kinds) - set(TRAIN_KINDS):
        ap.error(f"--train-kinds: unknown {sorted(set(kinds) - set(TRAIN_KINDS))}; kinds: {', '.join(TRAIN_KINDS)}")
    only = [x for x in args.only.split(",") if x]
    bad = sorted(set(only) - set(STEPS))
    if bad:
        ap.error(f"--only: unknown step(s) {', '.join(bad)}; steps: {', '.join(STEPS)}")
    if not torch.cuda.is_available():
        print(no_cuda_line(), flush=True)
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[gpucheck] %(message)s")
    t_start = time.perf_counter()
    sizes = ((12, 12), (9, 10)) if args.quick else SAIBLO
    name = torch.cuda.get_device_name(0)
    peak = bf16_peak(name)
    free, total = torch.cuda.mem_get_info(0)
    _emit({"gpucheck": "start", "device": name, "devices": torch.cuda.device_count(),
           "torch": torch.__version__, "cuda": torch.version.cuda, "bf16_peak_tflops": peak and peak / 1e12,
           "memory_total_mb": round(total / 2**20), "usable_cores": len(os.sched_getaffinity(0))})

    def wanted(step: str) -> bool:
        if only:
            return step in only
        if step in PER_SIZE_STEPS and not args.per_size:
            return False
        return not ((step == "selfplay" and args.skip_selfplay) or (step == "train" and args.skip_train))

    per_sizes = tuple(int(v) for v in args.train_per_size.split(",") if v) or ((16,) if args.quick else (16, 128))
    step = "start"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if wanted("canvas_graphs") or wanted("canvas_replay"):
                step = "canvas_graphs"
                runner = check_graphs(args.preset, sizes, 2 * args.max_batch, canvas=True)
                if wanted("canvas_replay"):
                    step = "canvas_replay"
                    bench_canvas_replay(runner, args.replay_seconds, peak, sizes)
                _emit({"bench": "memory", "canvas": True, "one_server_graphs_reserved_mb":
                       round(torch.cuda.memory_reserved(0) / 2**20, 1)})
                del runner
                torch.cuda.empty_cache()
            if wanted("canvas_kinds"):
                step = "canvas_kinds"
                bench_canvas_kinds(args.preset, args.replay_seconds * 4, peak, sizes)
            if wanted("servers"):
                step = "servers"
                check_servers_and_reload(args.preset, ((12, 12), (9, 10)), tmp)
            if wanted("graphs") or wanted("graph_replay"):
                step = "graphs"
                runner = check_graphs(args.preset, sizes, args.max_batch)
                graphs_mb = torch.cuda.memory_reserved(0) / 2**20
                if wanted("graph_replay"):
                    step = "graph_replay"
                    bench_replay(runner, args.replay_seconds, peak)
                _emit({"bench": "memory", "canvas": False, "one_server_graphs_reserved_mb": round(graphs_mb, 1),
                       "max_allocated_mb": round(torch.cuda.max_memory_allocated(0) / 2**20, 1),
                       "device_free_mb": round(torch.cuda.mem_get_info(0)[0] / 2**20)})
                del runner
                torch.cuda.empty_cache()
            if wanted("forward_kinds"):
                step = "forward_kinds"
                bench_forward_kinds(args.preset, args.replay_seconds * 4)
            if wanted("server"):
                step = "server"
                bench_server(args.preset, 3.0 if args.quick else 10.0, peak, clients=8, batch=1024, sizes=sizes,
                             forward=args.forward)
            if wanted("server_per_size"):
                step = "server_per_size"
                bench_server(args.preset, 3.0 if args.quick else 10.0, peak, sizes=((12, 12),), canvas=False)
            if wanted("selfplay"):
                step = "selfplay"
                bench_selfplay(120.0 if args.quick else args.selfplay_seconds, peak, tmp, args.preset,
                               forward=args.forward)
            if wanted("train"):
                step = "train"
                bench_train(peak, per_sizes, args.preset, kinds)
    except Exception as e:  # noqa: BLE001 - report any failure as the check's result
        log.exception("%s failed", step)
        _emit({"check": step, "ok": False, "error": f"{type(e).__name__}: {e}"})
        _emit({"gpucheck": "failed", "step": step, "seconds": round(time.perf_counter() - t_start, 1)})
        return 1
    _emit({"gpucheck": "passed", "seconds": round(time.perf_counter() - t_start, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
