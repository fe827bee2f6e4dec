"""Inference server: one process per GPU (or one on the CPU) answering shared-memory requests.

The server scans every slot of its :mod:`nets.shm_queue` block when its doorbell rings,
groups pending requests by board size, concatenates each group (up to
``max_forward_batch`` positions), runs the network and writes policy logits and
win/draw/loss probabilities back into the slots.

* CPU path: plain eager torch (float32), the same protocol.
* CUDA path: bf16/fp16 autocast where asked, channels_last, and CUDA graphs captured per
  (board size, batch bucket); a request batch is padded up to the next bucket (powers
  of two) and replayed.
* Hot reload: when ``model`` is a directory, the newest ``model_XXXXXXXX.pt`` in it is
  loaded every ``reload_interval`` seconds if it changed; workers see the new version
  in the global header (``G_MODEL_VERSION``) without restarting.
* A dead worker never blocks the server (requests are independent); a dead server is
  detected by workers through its pid (see :class:`nets.shm_queue.InferenceClient`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
import traceback

import numpy as np
import torch

from nets import _atomics
from nets import shm_queue as q

log = logging.getLogger("nets.server")


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings of one inference server process.

    model: checkpoint file, or a directory to follow for newer checkpoints, or None
    for a freshly initialised `preset` net (torch.manual_seed(seed) before building).
    precision: "fp32", "bf16", "fp16" or "auto" (bf16 on CUDA, fp32 on the CPU).
    """

    device: str = "cpu"
    model: str | None = None
    preset: str = "cpu_small"
    seed: int = 0
    precision: str = "auto"
    cuda_graphs: bool = True
    channels_last: bool = True
    max_forward_batch: int = 4096
    reload_interval: float = 5.0
    threads: int = 0
    noop: bool = False

    def __post_init__(self):
        if self.precision not in ("auto", "fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be auto/fp32/bf16/fp16, got {self.precision!r}")
        if self.max_forward_batch < 1:
            raise ValueError(f"max_forward_batch must be >= 1, got {self.max_forward_batch}")
        if self.reload_interval <= 0:
            raise ValueError(f"reload_interval must be > 0, got {self.reload_interval}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")


def load_model(cfg: ServerConfig, device: torch.device):
    """(model in eval mode, version, source path or None) for the server's settings."""
    from nets.checkpoint import latest_checkpoint, load_checkpoint
    from nets.config import get_preset
    from nets.model import build_model

    path = cfg.model
    if path is not None and os.path.isdir(path):
        path = latest_checkpoint(path)
    if path is None:
        torch.manual_seed(cfg.seed)
        model = build_model(get_preset(cfg.preset))
        version = 0
    else:
        model, _, meta = load_checkpoint(path, map_location="cpu")
        version = int(meta["step"])
    model = model.to(device).eval()
    return model, version, path


class _GraphRunner:
    """CUDA-graph replays of `model` per (height, width, bucket)."""

    def __init__(self, model, device, dtype, channels_last, num_planes):
        self.model = model
        self.device = device
        self.dtype = dtype
        self.channels_last = channels_last
        self.num_planes = num_planes
        self.graphs: dict = {}

    def _capture(self, h, w, bucket):
        x = torch.zeros((bucket, self.num_planes, h, w), device=self.device, dtype=torch.uint8)
        s = torch.cuda.Stream(self.device)
        s.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(s), torch.inference_mode():
            for _ in range(2):  # warm-up before capture
                self._run(x)
        torch.cuda.current_stream(self.device).wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.inference_mode():
            pol, wdl = self._run(x)
        self.graphs[(h, w, bucket)] = (g, x, pol, wdl)

    def _run(self, x_u8):
        x = x_u8.to(self.dtype)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=self.dtype, enabled=self.dtype != torch.float32):
            pol, val = self.model(x)
        return pol.float().flatten(1), torch.softmax(val.float(), dim=1)

    def __call__(self, x_cpu_u8: torch.Tensor):
        n, _, h, w = x_cpu_u8.shape
        bucket = 8
        while bucket < n:
            bucket *= 2
        key = (h, w, bucket)
        if key not in self.graphs:
            self._capture(h, w, bucket)
        g, x, pol, wdl = self.graphs[key]
        x[:n].copy_(x_cpu_u8, non_blocking=True)
        if n < bucket:
            x[n:].zero_()
        g.replay()
        return pol[:n].cpu().numpy(), wdl[:n].cpu().numpy()


class InferenceServer:
    def __init__(self, handles: q.QueueHandles, cfg: ServerConfig):
        self.handles = handles
        self.cfg = cfg
        self.shm = q.attach(handles)
        self.layout = handles.layout
        self.hdr = np.ndarray(q.GLOBAL_WORDS, np.int64, self.shm.buf, 0)
        self.slots = [q.SlotView(self.shm.buf, self.layout, s) for s in range(self.layout.num_slots)]
        self.device = torch.device(cfg.device)
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        self.model = None
        self.version = -1
        self.source = None
        self.source_mtime = None
        self.runner = None
        self.batches = 0
        self.positions = 0
        if not cfg.noop:
            self._load()

    # ------------------------------------------------------------------ model
    def _dtype(self):
        p = self.cfg.precision
        if p == "auto":
            p = "bf16" if self.device.type == "cuda" else "fp32"
        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[p]

    def _load(self):
        model, version, path = load_model(self.cfg, self.device)
        if self.device.type == "cuda" and self.cfg.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.version = version
        self.source = path
        self.source_mtime = os.path.getmtime(path) if path else None
        if self.device.type == "cuda" and self.cfg.cuda_graphs:
            self.runner = _GraphRunner(model, self.device, self._dtype(), self.cfg.channels_last,
                                       self.layout.num_planes)
        else:
            self.runner = None
        self.hdr[q.G_MODEL_VERSION] = version
        self.hdr[q.G_RELOADS] += 1

    def maybe_reload(self) -> bool:
        """Load a newer checkpoint if `model` is a directory (or a file that changed)."""
        if self.cfg.noop or self.cfg.model is None:
            return False
        from nets.checkpoint import latest_checkpoint

        path = latest_checkpoint(self.cfg.model) if os.path.isdir(self.cfg.model) else self.cfg.model
        if path is None:
            return False
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            return False
        if path == self.source and mtime == self.source_mtime:
            return False
        try:
            self._load()
        except Exception as e:  # noqa: BLE001 - a bad new checkpoint must not kill the server
            log.warning("could not load %s: %s; keeping version %s", path, e, self.version)
            self.source, self.source_mtime = path, mtime
            return False
        log.info("loaded %s (version %s)", path, self.version)
        return True

    def forward(self, x_u8: torch.Tensor):
        """(n, C, H, W) uint8 CPU tensor -> (policy (n, H*W) float32, wdl (n, 3) float32)."""
        n, _, h, w = x_u8.shape
        if self.cfg.noop:
            return np.zeros((n, h * w), np.float32), np.full((n, 3), 1 / 3, np.float32)
        step = self.cfg.max_forward_batch
        if n > step:  # CPU throughput peaks at moderate batches: split big requests
            parts = [self.forward(x_u8[i:i + step]) for i in range(0, n, step)]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        if self.runner is not None:
            return self.runner(x_u8)
        with torch.inference_mode():
            x = x_u8.to(self.device, non_blocking=True)
            dtype = self._dtype()
            x = x.to(torch.float32)
            if self.device.type == "cuda":
                if self.cfg.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                    pol, val = self.model(x)
            else:
                pol, val = self.model(x)
            pol = pol.float().flatten(1)
            wdl = torch.softmax(val.float(), dim=1)
            return pol.cpu().numpy(), wdl.cpu().numpy()

    # ------------------------------------------------------------------ serving
    def _reject(self, s: int, seq: int, text: str):
        v = self.slots[s]
        v.set_error(text)
        v.header[q.S_STATUS] = q.STATUS_BAD_REQUEST
        _atomics.store_release(v.header, q.S_RESP, seq)
        self.handles.slot_bells[s].release()

    def handle_pending(self) -> int:
        """Serve every pending request once; returns the number of positions evaluated."""
        groups: dict = {}
        for s, v in enumerate(self.slots):
            req = _atomics.load_acquire(v.header, q.S_REQ)
            if req == v.header[q.S_RESP]:
                continue
            n, h, w = int(v.header[q.S_COUNT]), int(v.header[q.S_HEIGHT]), int(v.header[q.S_WIDTH])
            if not (q.MIN_SIZE <= h <= q.MAX_SIZE and q.MIN_SIZE <= w <= q.MAX_SIZE):
                self._reject(s, req, f"board size {h}x{w} outside {q.MIN_SIZE}..{q.MAX_SIZE}")
                continue
            if not 1 <= n <= self.layout.max_batch:
                self._reject(s, req, f"count {n} outside 1..{self.layout.max_batch}")
                continue
            groups.setdefault((h, w), []).append((s, req, n))
        done = 0
        for (h, w), reqs in groups.items():
            chunk: list = []
            total = 0
            for item in reqs + [None]:
                if item is not None and (not chunk or total + item[2] <= self.cfg.max_forward_batch):
                    chunk.append(item)
                    total += item[2]
                    continue
                if chunk:
                    done += self._run_chunk(h, w, chunk, total)
                chunk, total = ([item], item[2]) if item is not None else ([], 0)
        return done

    def _run_chunk(self, h, w, chunk, total) -> int:
        try:
            if len(chunk) == 1:
                s, _, n = chunk[0]
                x = torch.from_numpy(self.slots[s].planes(n, h, w))
            else:
                x = torch.cat([torch.from_numpy(self.slots[s].planes(n, h, w)) for s, _, n in chunk])
            pol, wdl = self.forward(x)
            status, text = q.STATUS_OK, ""
        except Exception as e:  # noqa: BLE001 - report to the workers, keep serving
            traceback.print_exc(file=sys.stderr)
            status, text = q.STATUS_SERVER_ERROR, f"{type(e).__name__}: {e}"
        off = 0
        for s, seq, n in chunk:
            v = self.slots[s]
            if status == q.STATUS_OK:
                v.policy(n, h, w).reshape(n, h * w)[:] = pol[off:off + n]
                v.wdl(n)[:] = wdl[off:off + n]
            else:
                v.set_error(text)
            v.header[q.S_STATUS] = status
            _atomics.store_release(v.header, q.S_RESP, seq)
            self.handles.slot_bells[s].release()
            off += n
        self.batches += 1
        self.positions += total
        self.hdr[q.G_BATCHES] = self.batches
        self.hdr[q.G_POSITIONS] = self.positions
        return total

    def serve_forever(self, idle_slice: float = 0.05) -> None:
        """Main loop: until the shutdown flag is set in the global header."""
        self.hdr[q.G_SERVER_PID] = os.getpid()
        stop = threading.Event()

        def heartbeat():
            while not stop.wait(0.1):
                self.hdr[q.G_HEARTBEAT] += 1

        t = threading.Thread(target=heartbeat, daemon=True)
        t.start()
        next_reload = time.monotonic() + self.cfg.reload_interval
        try:
            while not self.hdr[q.G_SHUTDOWN]:
                self.handles.doorbell.acquire(timeout=idle_slice)
                self.handle_pending()
                if time.monotonic() >= next_reload:
                    self.maybe_reload()
                    next_reload = time.monotonic() + self.cfg.reload_interval
        finally:
            stop.set()


def server_main(handles: q.QueueHandles, cfg: ServerConfig, parent_pid: int = 0) -> None:
    """Process entry point (multiprocessing target).

    The parent decides when the server stops (``request_shutdown``, after its workers
    have written their games): SIGINT, SIGTERM and SIGHUP sent to the whole process group
    are ignored here. If the parent dies, the server is killed (it holds nothing to save).
    """
    import signal

    from c4fast.runtime import die_with_parent

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if parent_pid:
        die_with_parent(signal.SIGKILL, parent_pid)
    server = InferenceServer(handles, cfg)
    server.serve_forever()


def start_server(ctx, handles: q.QueueHandles, cfg: ServerConfig, name: str = "c4fast-server"):
    """Start a server process from multiprocessing context `ctx`; returns the Process."""
    p = ctx.Process(target=server_main, args=(handles, cfg, os.getpid()), name=name, daemon=True)
    p.start()
    # publish the pid at once: a server that dies while starting is then seen as dead
    shm = q.attach(handles)
    try:
        np.ndarray(q.GLOBAL_WORDS, np.int64, shm.buf, 0)[q.G_SERVER_PID] = p.pid
    finally:
        try:
            shm.close()
        except BufferError:
            pass
    return p


def request_shutdown(handles: q.QueueHandles) -> None:
    """Ask the server(s) of this block to stop (workers then get ServerError)."""
    shm = q.attach(handles)
    try:
        np.ndarray(q.GLOBAL_WORDS, np.int64, shm.buf, 0)[q.G_SHUTDOWN] = 1
        handles.doorbell.release()
    finally:
        try:
            shm.close()
        except BufferError:
            pass
