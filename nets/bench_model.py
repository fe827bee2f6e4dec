"""CPU throughput of the policy/value nets: ``python -m nets.bench_model [--help]``.

Prints one JSON object per line:

- ``{"kind": "env", ...}``: versions, threads and the 1-minute load average (other
  processes on the CPU distort multi-threaded timings badly);
- ``{"kind": "torch", "preset", "board": "HxW", "batch", "evals_per_s", "ms_per_batch",
  "threads", "channels_last"}`` for eval-mode torch under ``inference_mode`` (random weights, random
  0/1 planes; evals = positions);
- ``{"kind": "numpy", ...}`` the same for :class:`nets.numpy_net.NumpyNet`;
- ``{"kind": "numpy_startup", "preset", "import_load_s", "process_s"}``: time to import
  ``nets.numpy_net`` and load the exported net in a fresh interpreter (``process_s``
  includes interpreter start-up), best of a few runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from nets.config import PRESETS, get_preset
from nets.model import Net
from nets.numpy_net import NumpyNet, export_numpy

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _size(s: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"board size must look like 9x12, got {s!r}") from None
    if not (4 <= h <= 12 and 4 <= w <= 12):
        raise argparse.ArgumentTypeError(f"board size {s!r} outside 4..12 x 4..12")
    return h, w


def _list(conv):
    return lambda s: [conv(v) for v in s.split(",") if v]


def _planes(b: int, h: int, w: int, c: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.random((b, c, h, w)) < 0.3).astype(np.float32)
    x[:, 3] = 1.0
    x[:, 3, h // 2, w // 2] = 0.0
    return x


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


def _emit(**rec) -> None:
    print(json.dumps(rec), flush=True)


def bench_torch(preset, sizes, batches, seconds, threads, channels_last=False):
    model = Net(get_preset(preset)).eval()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    for h, w in sizes:
        for b in batches:
            x = torch.from_numpy(_planes(b, h, w, model.config.in_planes))
            x = x.contiguous(memory_format=fmt)

            def run():
                with torch.inference_mode():
                    model(x)

            n, dt = _time(run, seconds)
            _emit(kind="torch", preset=preset, board=f"{h}x{w}", batch=b,
                  evals_per_s=round(n * b / dt, 1), ms_per_batch=round(1e3 * dt / n, 3),
                  threads=threads, channels_last=channels_last)


def bench_numpy(preset, path, size, batches, seconds):
    net = NumpyNet.load(path)
    h, w = size
    for b in batches:
        x = _planes(b, h, w, net.config.in_planes)
        n, dt = _time(lambda: net.forward(x), seconds)
        _emit(kind="numpy", preset=preset, board=f"{h}x{w}", batch=b,
              evals_per_s=round(n * b / dt, 1), ms_per_batch=round(1e3 * dt / n, 3))


def bench_startup(preset, path, runs=3):
    code = (
        "import time\nt = time.perf_counter()\nimport nets.numpy_net as m\n"
        f"m.NumpyNet.load({path!r})\nprint(time.perf_counter() - t)\n"
    )
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    best_in, best_proc = float("inf"), float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO,
                             capture_output=True, text=True, check=True)
        best_proc = min(best_proc, time.perf_counter() - t0)
        best_in = min(best_in, float(out.stdout.strip()))
    _emit(kind="numpy_startup", preset=preset, import_load_s=round(best_in, 4),
          process_s=round(best_proc, 4), npz_bytes=os.path.getsize(path))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m nets.bench_model",
        description="Network evals/s on the CPU (torch eval mode + numpy forward); JSON lines.",
    )
    ap.add_argument("--presets", type=_list(str), default=["b3c128nbt", "cpu_small"],
                    help=f"comma-separated presets from {sorted(PRESETS)} (default: %(default)s)")
    ap.add_argument("--sizes", type=_list(_size), default=[(6, 7), (9, 9), (12, 12)],
                    help="comma-separated HxW board sizes (default: 6x7,9x9,12x12)")
    ap.add_argument("--batches", type=_list(int), default=[1, 8, 64, 256, 1024],
                    help="comma-separated torch batch sizes (default: 1,8,64,256,1024)")
    ap.add_argument("--seconds", type=float, default=0.4,
                    help="timed seconds per measurement, after one warm-up call (default: 0.4)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default: 2)")
    ap.add_argument("--numpy-size", type=_size, default=(12, 12),
                    help="board for the numpy forward (default: 12x12)")
    ap.add_argument("--numpy-batches", type=_list(int), default=[1, 64],
                    help="numpy forward batch sizes (default: 1,64)")
    ap.add_argument("--channels-last", action="store_true",
                    help="run torch in channels_last memory format")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch measurements")
    ap.add_argument("--no-numpy", action="store_true", help="skip numpy forward and start-up")
    args = ap.parse_args(argv)
    for p in args.presets:
        try:
            get_preset(p)
        except ValueError as e:
            ap.error(str(e))
    torch.set_num_threads(args.threads)
    _emit(kind="env", torch=torch.__version__, numpy=np.__version__, threads=args.threads,
          cpus=os.cpu_count(), loadavg_1m=round(os.getloadavg()[0], 2))
    if not args.no_torch:
        for p in args.presets:
            bench_torch(p, args.sizes, args.batches, args.seconds, args.threads,
                        args.channels_last)
    if not args.no_numpy:
        with tempfile.TemporaryDirectory() as d:
            for p in args.presets:
                path = export_numpy(Net(get_preset(p)).eval(), os.path.join(d, f"{p}.npz"))
                bench_numpy(p, path, args.numpy_size, args.numpy_batches, args.seconds)
                bench_startup(p, path)


if __name__ == "__main__":
    main()
