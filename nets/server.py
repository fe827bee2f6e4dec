"""Inference server: one process per GPU (or one on the CPU) answering shared-memory requests.

The server scans every slot of its :mod:`nets.shm_queue` block when its doorbell rings,
groups pending requests by board size, concatenates each group (up to
``max_forward_batch`` positions), runs the network and writes policy logits and
win/draw/loss probabilities back into the slots.

* CPU path: one of the :mod:`nets.backends` engines (``forward``: ``auto`` measures;
  eager, fused, compiled, numpy, ONNX Runtime fp32 or int8, torch bf16, OpenVINO fp32 or
  bf16), the same protocol; every
  engine but eager is self-checked against eager fp32 at start-up and on each reload.
* CUDA path (:mod:`nets.cuda_runner`): the process pins itself to its GPU before any
  CUDA call (:func:`server_main`), captures at start-up one CUDA graph per (board size,
  batch bucket) of the BN-folded net in bf16/channels_last on its own stream with a
  shared pool, self-checks every graph against the eager fp32 forward (a mismatch stops
  the server with the reason), and serves through registered shared memory with
  asynchronous copies, two batches in flight.
* Hot reload: when ``model`` is a directory, the newest ``model_XXXXXXXX.pt`` in it is
  loaded every ``reload_interval`` seconds if it changed; workers see the new version
  in the global header (``G_MODEL_VERSION``) without restarting. On CUDA the weights are
  copied into the captured graphs' tensors (no re-capture).
* A dead worker never blocks the server (requests are independent); a dead server is
  detected by workers through its pid (see :class:`nets.shm_queue.InferenceClient`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import sys
import threading
import time
import traceback

import numpy as np
import torch

from nets import _atomics
from nets.config import CPU_ONLY_FORWARDS, FORWARDS
from nets.model import torch_wdl_outputs
from nets import shm_queue as q

log = logging.getLogger(__name__)

#: CPU ``auto``: an approximate engine that failed a reload's self-check is tried again after
#: 1, 2, 4, ... reloads, at most this many apart (a failed try costs one engine build)
AUTO_RETRY_MAX_GAP = 16


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings of one inference server process.

    model: checkpoint file, or a directory to follow for newer checkpoints, or None
    for a freshly initialised `preset` net (torch.manual_seed(seed) before building).
    precision: "fp32", "bf16", "fp16" or "auto" (bf16 on CUDA, fp32 on the CPU).
    threads: torch CPU threads (0: torch's default on the CPU, 1 for a GPU server).
    forward: "eager" (the Net as trained), "fused" (BN folded, :mod:`nets.fused`),
    "compiled" (torch.compile of the fused net), CPU only: "numpy", "ort", "ort_int8",
    "bf16", "ov", "ov_bf16" (:mod:`nets.backends`); or "auto": on CUDA :func:`resolve_forward`'s
    choice (compiled canvas graphs, fused if the compile fails), on the CPU the fastest
    engine that passes its self-check on this machine, timed at start-up on `sizes` at the
    server's batch for at most ``auto_seconds`` (:func:`nets.precision.choose_forward`,
    cached per machine and net; the choice and its table are logged). Either server puts
    the forward it serves in the shared header's ``G_FORWARD``.
    sizes: board sizes (h, w) a CUDA server captures graphs for at start-up and a CPU server
    times ``auto`` on (empty: the 16 Saiblo sizes); other sizes run eagerly. self_check: compare every captured graph
    (and every hot reload) with the eager fp32 forward. pipeline: keep two batches in
    flight on CUDA. canvas: CUDA only: every board size in one masked 12x12 canvas forward
    (:mod:`nets.canvas`): one graph per batch bucket instead of one per (size, bucket), and
    pending requests of all sizes merged into one batch (False: per-size graphs and batches).
    A CPU server always runs per size.
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
    forward: str = "auto"
    sizes: tuple = ()
    self_check: bool = True
    pipeline: bool = True
    auto_seconds: float = 5.0
    canvas: bool = True

    def __post_init__(self):
        if self.forward not in FORWARDS:
            raise ValueError(f"forward must be one of {'/'.join(FORWARDS)}, got {self.forward!r}")
        if self.forward in CPU_ONLY_FORWARDS and self.device != "cpu":
            raise ValueError(f"forward {self.forward!r} runs on the CPU only, not on {self.device!r}")
        object.__setattr__(self, "sizes", tuple((int(h), int(w)) for h, w in self.sizes))
        for h, w in self.sizes:
            if not (q.MIN_SIZE <= h <= q.MAX_SIZE and q.MIN_SIZE <= w <= q.MAX_SIZE):
                raise ValueError(f"board size {h}x{w} outside {q.MIN_SIZE}..{q.MAX_SIZE}")
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
    from nets.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint
    from nets.config import get_preset
    from nets.model import build_model

    path = cfg.model
    for attempt in range(3):
        if cfg.model is not None and os.path.isdir(cfg.model):
            path = latest_checkpoint(cfg.model)
        if path is None:
            torch.manual_seed(cfg.seed)
            model = build_model(get_preset(cfg.preset))
            version = 0
            break
        try:
            model, _, meta = load_checkpoint(path, map_location="cpu")
        except CheckpointError:
            # a directory's newest checkpoint can be pruned between listing and opening it
            # (a cluster node keeps its newest three): list again
            if attempt == 2 or os.path.exists(path) or not os.path.isdir(cfg.model or ""):
                raise
            continue
        version = int(meta["step"])
        break
    model = model.to(device).eval()
    return model, version, path


def server_threads(cfg: ServerConfig) -> int:
    """torch CPU threads of a server: cfg.threads, else 1 for a GPU server (its CPU work is
    copies and bookkeeping; the cores belong to the workers), else 0 (torch's default)."""
    if cfg.threads > 0:
        return cfg.threads
    return 1 if cfg.device.startswith("cuda") else 0


def resolve_forward(cfg: ServerConfig) -> str:
    """The forward path a server with `cfg` runs without measuring: "auto" is "compiled" on a
    canvas CUDA server (torch.compile'd canvas graphs: 2.7x the fused net's replays, 2.2x its
    self-play evals/s on an H200; "fused" if the compile fails), else "fused" (a CPU server
    measures instead: :meth:`InferenceServer._choose`)."""
    if cfg.forward != "auto":
        return cfg.forward
    return "compiled" if cfg.device.startswith("cuda") and cfg.canvas else "fused"


def cpu_forward(backend, x_u8: torch.Tensor, step: int):
    """(n, C, H, W) uint8 planes -> (policy logits (n, H*W), wdl probabilities (n, 3)),
    float32 numpy, in forward calls of at most `step` positions; (n, 4) for a net with the
    moves-left head (the estimate in plies last: :func:`nets.model.torch_wdl_outputs`)."""
    n = x_u8.shape[0]
    if n > step:  # CPU throughput peaks at moderate batches: split big requests
        parts = [cpu_forward(backend, x_u8[i:i + step], step) for i in range(0, n, step)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    pol, val = backend(x_u8.numpy().astype(np.float32))
    # torch's softmax: bit-exact with training
    return pol, torch_wdl_outputs(torch.from_numpy(val), x_u8.shape[2] * x_u8.shape[3]).numpy()


class InferenceServer:
    def __init__(self, handles: q.QueueHandles, cfg: ServerConfig):
        self.handles = handles
        self.cfg = cfg
        self.shm = q.attach(handles)
        self.layout = handles.layout
        self.hdr = np.ndarray(q.GLOBAL_WORDS, np.int64, self.shm.buf, 0)
        self.slots = [q.SlotView(self.shm.buf, self.layout, s) for s in range(self.layout.num_slots)]
        self.device = torch.device(cfg.device)
        threads = server_threads(cfg)
        if threads > 0:
            torch.set_num_threads(threads)
        self.model = None
        self.backend = None  # nets.backends.CpuBackend on the CPU
        self._flops: dict = {}  # (h, w) -> FLOPs per evaluation
        self.version = -1
        self.source = None
        self.source_mtime = None
        self.runner = None  # nets.cuda_runner.GraphRunner on CUDA
        self._inflight: collections.deque = collections.deque()  # (ticket, chunk, total)
        self._busy: set = set()  # slots whose request is in flight
        self.batches = 0
        self.positions = 0
        self.flops = 0  # network FLOPs served (nets.fused.flops_per_eval per position)
        self.busy_ns = 0  # CPU path: nanoseconds inside the forward
        self.kind: str | None = None  # the forward served (CPU "auto": measured at the first load)
        # CPU "auto" after its approximate engine failed a reload's self-check: that engine,
        # the reloads until it is tried again, and the current gap (doubling, AUTO_RETRY_MAX_GAP)
        self._retry: dict | None = None
        if not cfg.noop:
            self._load()

    # ------------------------------------------------------------------ model
    def _dtype(self):
        p = self.cfg.precision
        if p == "auto":
            p = "bf16" if self.device.type == "cuda" else "fp32"
        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[p]

    @property
    def value_width(self) -> int:
        """Floats per position of the answers' wdl: 3, or 4 for a net with the moves-left head."""
        return self.model.config.value_outputs if self.model is not None else 3

    def _forward_kind(self) -> str:
        return self.kind or resolve_forward(self.cfg)

    def _choose(self, model) -> str:
        """CPU ``auto``: the fastest engine that passes its self-check here (logged)."""
        from c4fast.game import SAIBLO_SIZES
        from nets.backends import BACKENDS
        from nets.precision import choose_forward

        batch = min(self.cfg.max_forward_batch, self.layout.max_batch)
        choice = choose_forward(model, self.cfg.sizes or SAIBLO_SIZES, batch, server_threads(self.cfg),
                                budget_s=self.cfg.auto_seconds)
        log.info("CPU forward auto: %s (%s)%s; evals/s by engine at batch %d: %s", choice.kind, choice.precision,
                 (" from the cache" if choice.cached else f", timed in {choice.seconds:.1f} s")
                 + ("" if choice.complete else f" (cut short by the budget; start {choice.starts})"), batch,
                 json.dumps(choice.table))
        self.hdr[q.G_FORWARD] = BACKENDS.index(choice.kind) + 1
        return choice.kind

    def _load(self):
        model, version, path = load_model(self.cfg, torch.device("cpu"))
        try:  # now: a directory's checkpoint may be pruned while the engine is chosen and built
            mtime = os.path.getmtime(path) if path else None
        except OSError:
            mtime = None  # gone already: the next newer checkpoint reloads
        if self.kind is None and self.device.type == "cpu" and self.cfg.forward == "auto":
            self.kind = self._choose(model)
        kind = self._forward_kind()
        if self.device.type == "cuda":
            self._load_cuda(model, kind)
        else:
            from nets.backends import CpuBackend

            if not (self._retry is not None and self._retry_engine(model)):
                if self.backend is not None and self.backend.config == model.config:
                    self.backend.load(model)
                else:
                    self._serve_cpu_engine(CpuBackend(model, kind, threads=server_threads(self.cfg)))
                self.model = model
                if self.cfg.self_check and kind != "eager":
                    self._checked_cpu_load(model, kind)
        self.version = version
        self.source = path
        self.source_mtime = mtime
        self.hdr[q.G_MODEL_VERSION] = version
        self.hdr[q.G_RELOADS] += 1

    def _load_cuda(self, model, kind):
        from nets.backends import BACKENDS
        from nets.cuda_runner import DEFAULT_SIZES, GraphRunner

        if self.runner is not None and self.runner.config == model.config:
            self._drain()
            self.runner.load_weights(model)  # in place: the captured graphs stay valid
        else:
            if self.runner is not None:  # another architecture: start over
                self._drain()
                self.runner.unregister_host_memory()
                self.runner = None
                torch.cuda.empty_cache()
            def build(kind):
                runner = GraphRunner(model, self.device, self._dtype(), sizes=self.cfg.sizes or DEFAULT_SIZES,
                                     max_batch=max(self.cfg.max_forward_batch, self.layout.max_batch),
                                     num_planes=self.layout.num_planes, kind=kind, graphs=self.cfg.cuda_graphs,
                                     channels_last=self.cfg.channels_last, check=self.cfg.self_check,
                                     canvas=self.cfg.canvas and kind != "eager")
                buf = np.frombuffer(self.shm.buf, np.uint8)
                runner.register_host_memory(buf.ctypes.data, buf.nbytes)
                try:
                    runner.capture_all()
                except BaseException:
                    runner.unregister_host_memory()
                    raise
                return runner

            try:
                runner = build(kind)
            except Exception as e:  # noqa: BLE001 - auto's compile is an optimisation: fall back
                if not (kind == "compiled" and self.cfg.forward == "auto"):
                    raise
                log.warning("compiled canvas graphs failed (%s: %s): serving the fused net", type(e).__name__, e)
                torch.cuda.empty_cache()
                kind = self.kind = "fused"
                runner = build(kind)
            self.runner = runner
            self.hdr[q.G_CAPTURES] += runner.captures
            self.hdr[q.G_FORWARD] = BACKENDS.index(kind) + 1  # what it serves ("fused" after a failed compile)
        self.model = model

    def _serve_cpu_engine(self, backend) -> None:
        """Serve `backend` (a :class:`nets.backends.CpuBackend`) from now on, with torch's
        threads set for it (an engine on a pool of its own runs torch on one thread)."""
        from nets.backends import BACKENDS

        if self.backend is not None:
            self.backend.restore_torch_threads()
        self.backend = backend
        backend.settle_torch_threads()
        self.kind = backend.kind
        self.hdr[q.G_FORWARD] = BACKENDS.index(backend.kind) + 1
        self._flops = {}

    def _retry_engine(self, model) -> bool:
        """After a fallback (:meth:`_checked_cpu_load`): at a due reload, serve `model` on the
        approximate engine again if it passes the self-check now (True). Otherwise (False,
        also between due reloads) the fp32 engine stays, the next try twice as many reloads
        later (at most :data:`AUTO_RETRY_MAX_GAP`)."""
        from nets.backends import CpuBackend

        r = self._retry
        r["wait"] -= 1
        if r["wait"] > 0:
            return False
        before, before_model = self.backend, self.model
        try:
            self._serve_cpu_engine(CpuBackend(model, r["kind"], threads=server_threads(self.cfg)))
            self.model = model  # the self-check's reference
            self._cpu_self_check()
        except Exception as e:  # noqa: BLE001 - a failed check or build: the fp32 engine serves on
            r["gap"] = r["wait"] = min(2 * r["gap"], AUTO_RETRY_MAX_GAP)
            log.info("%s; the exact fp32 engine (%s) serves on, %s tried again in %d reloads",
                     e, before.kind, r["kind"], r["gap"])
            self._serve_cpu_engine(before)
            self.model = before_model
            return False
        log.info("CPU %s forward passes its self-check again: served from this reload on", r["kind"])
        self._retry = None
        return True

    def _checked_cpu_load(self, model, kind: str) -> None:
        """Self-check the CPU engine; under ``auto`` an approximate engine (bf16, int8) that
        fails it for these weights (a reload: int8 is calibrated per net, bf16's error grows
        with the weights) is replaced by the exact fp32 one, with a warning, instead of
        stopping the server, and tried again at later reloads: the next one, then after 2, 4,
        ... up to :data:`AUTO_RETRY_MAX_GAP` reloads; it is served again once it passes."""
        from nets.backends import CpuBackend
        from nets.precision import PRECISION_OF
        from nets.selfcheck import SelfCheckError

        try:
            self._cpu_self_check()
        except SelfCheckError as e:
            if self.cfg.forward != "auto" or PRECISION_OF[kind] == "fp32":
                raise
            log.warning("%s; forward auto falls back to the exact fp32 engine (fused) and tries %s "
                        "again at the next reload", e, kind)
            self._retry = {"kind": kind, "gap": 1, "wait": 1}
            self._serve_cpu_engine(CpuBackend(model, "fused", threads=server_threads(self.cfg)))
            self._cpu_self_check()

    def _cpu_self_check(self):
        from nets.backends import tolerance_of
        from nets.selfcheck import self_check

        def ref(x):
            with torch.inference_mode():
                pol, val = self.model(torch.from_numpy(x).float())
            return pol.flatten(1), torch_wdl_outputs(val, x.shape[2] * x.shape[3])

        h, w = (self.cfg.sizes or ((12, 12),))[-1]
        # 16 positions per thread and 16 more: an engine that splits a batch over its threads
        # (OpenVINO streams, from 2 x 16 positions) is checked on the split path too
        n = 16 * (1 + max(1, server_threads(self.cfg)))
        self_check(f"CPU {self._forward_kind()} forward", lambda x: self.forward(torch.from_numpy(x)), ref,
                   h, w, n, self.layout.num_planes, tolerance_of(self._forward_kind()))

    def maybe_reload(self) -> bool:
        """Load a newer checkpoint if `model` is a directory (or a file that changed)."""
        if self.cfg.noop or self.cfg.model is None:
            return False
        from nets.checkpoint import latest_checkpoint
        from nets.selfcheck import SelfCheckError

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
        except SelfCheckError:
            raise  # the served weights are wrong: stop with the reason, never serve them
        except Exception as e:  # noqa: BLE001 - a bad new checkpoint must not kill the server
            log.warning("could not load %s: %s; keeping version %s", path, e, self.version)
            self.source, self.source_mtime = path, mtime
            return False
        log.info("loaded %s (version %s)", path, self.version)
        return True

    def forward(self, x_u8: torch.Tensor):
        """(n, C, H, W) uint8 CPU tensor -> (policy (n, H*W) float32, wdl (n, 3) float32, or
        (n, 4) with the moves-left head)."""
        n, _, h, w = x_u8.shape
        if self.cfg.noop:
            return np.zeros((n, h * w), np.float32), np.full((n, 3), 1 / 3, np.float32)
        if self.runner is not None:
            self._drain()
            return self.runner.run_sync(x_u8.numpy())
        return cpu_forward(self.backend, x_u8, self.cfg.max_forward_batch)

    @staticmethod
    def direct_forward(cfg: ServerConfig):
        """The CPU forward a server with `cfg` runs, as a plain callable in this process
        (same threads, model, backend and batching; no queue): benchmarks compare the two."""
        from nets.backends import CpuBackend

        threads = server_threads(cfg)
        if threads > 0:
            torch.set_num_threads(threads)
        model, _, _ = load_model(cfg, torch.device("cpu"))
        backend = CpuBackend(model, resolve_forward(cfg), threads=threads)
        backend.settle_torch_threads()
        return lambda x_u8: cpu_forward(backend, x_u8, cfg.max_forward_batch)

    # ------------------------------------------------------------------ serving
    def _reject(self, s: int, seq: int, text: str):
        v = self.slots[s]
        v.set_error(text)
        v.header[q.S_STATUS] = q.STATUS_BAD_REQUEST
        _atomics.store_release(v.header, q.S_RESP, seq)
        self.handles.slot_bells[s].release()

    def handle_pending(self, drain: bool = True) -> int:
        """Serve every pending request once; returns the number of positions submitted.

        On CUDA with `drain` False the last batch may stay in flight (answered by a later
        call, or at once when a call finds nothing new)."""
        groups: dict = {}
        for s, v in enumerate(self.slots):
            if s in self._busy:
                continue
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
        if self.runner is not None and self.runner.canvas:  # every size in one canvas batch
            groups = {None: [r for reqs in groups.values() for r in reqs]} if groups else {}
        for size, reqs in groups.items():
            chunk: list = []
            total = 0
            for item in reqs + [None]:
                if item is not None and (not chunk or total + item[2] <= self.cfg.max_forward_batch):
                    chunk.append(item)
                    total += item[2]
                    continue
                if chunk:
                    done += self._run_chunk(size, chunk, total)
                chunk, total = ([item], item[2]) if item is not None else ([], 0)
        if drain or not groups:
            self._drain()
        return done

    def _run_chunk(self, size, chunk, total) -> int:
        """Serve one chunk of requests ((slot, seq, n)) of board `size` (None: a canvas chunk of
        any sizes)."""
        if self.runner is not None:
            return self._submit_chunk(chunk, total)
        h, w = size
        try:
            if len(chunk) == 1:
                s, _, n = chunk[0]
                x = torch.from_numpy(self.slots[s].planes(n, h, w))
            else:
                x = torch.cat([torch.from_numpy(self.slots[s].planes(n, h, w)) for s, _, n in chunk])
            t0 = time.perf_counter_ns()
            pol, wdl = self.forward(x)
            self.busy_ns += time.perf_counter_ns() - t0
            status, text = q.STATUS_OK, ""
        except Exception as e:  # noqa: BLE001 - report to the workers, keep serving
            traceback.print_exc(file=sys.stderr)
            status, text = q.STATUS_SERVER_ERROR, f"{type(e).__name__}: {e}"
        off = 0
        if status == q.STATUS_OK:
            for s, _, n in chunk:
                v = self.slots[s]
                v.policy(n, h, w).reshape(n, h * w)[:] = pol[off:off + n]
                v.wdl(n, wdl.shape[1])[:] = wdl[off:off + n]
                off += n
        self._publish(chunk, total, status, text)
        return total

    def _slot_size(self, s: int) -> tuple[int, int]:
        v = self.slots[s]
        return int(v.header[q.S_HEIGHT]), int(v.header[q.S_WIDTH])

    def _submit_chunk(self, chunk, total) -> int:
        """CUDA: enqueue the chunk (results land in the slots); answer the oldest in flight
        first when the pipeline is full. The chunk's requests go in one group per run of
        equal board sizes (one group on a per-size runner)."""
        from nets.cuda_runner import PIPELINE_DEPTH

        while len(self._inflight) >= PIPELINE_DEPTH:
            self._complete_oldest()
        k = self.value_width
        groups: list = []
        for s, _, n in sorted(chunk, key=lambda c: self._slot_size(c[0])):
            h, w = self._slot_size(s)
            if not groups or groups[-1][:2] != (h, w):
                groups.append((h, w, [], []))
            groups[-1][2].append(self.slots[s].planes(n, h, w))
            groups[-1][3].append((self.slots[s].policy(n, h, w).reshape(n, h * w), self.slots[s].wdl(n, k)))
        try:
            ticket = self.runner.submit_groups(groups)
        except Exception as e:  # noqa: BLE001 - report to the workers, keep serving
            traceback.print_exc(file=sys.stderr)
            self._publish(chunk, total, q.STATUS_SERVER_ERROR, f"{type(e).__name__}: {e}")
            return total
        self._busy.update(s for s, _, _ in chunk)
        self._inflight.append((ticket, chunk, total))
        if not self.cfg.pipeline:
            self._drain()
        return total

    def _complete_oldest(self) -> None:
        ticket, chunk, total = self._inflight.popleft()
        try:
            self.runner.complete(ticket)
            status, text = q.STATUS_OK, ""
        except Exception as e:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            status, text = q.STATUS_SERVER_ERROR, f"{type(e).__name__}: {e}"
        self._busy.difference_update(s for s, _, _ in chunk)
        self._publish(chunk, total, status, text)

    def _drain(self) -> None:
        """Answer every batch in flight."""
        while self._inflight:
            self._complete_oldest()

    def _publish(self, chunk, total, status, text) -> None:
        """Set status (results are already in the slots when OK), release, ring the bells."""
        for s, seq, _ in chunk:
            v = self.slots[s]
            if status != q.STATUS_OK:
                v.set_error(text)
            v.header[q.S_VALUE_WIDTH] = self.value_width
            v.header[q.S_STATUS] = status
            _atomics.store_release(v.header, q.S_RESP, seq)
            self.handles.slot_bells[s].release()
        self.batches += 1
        self.positions += total
        self.hdr[q.G_BATCH_HIST + q.batch_bin(total)] += 1
        if status == q.STATUS_OK and self.model is not None:
            for s, _, n in chunk:  # the FLOPs of each position's own board (canvas chunks mix sizes)
                size = self._slot_size(s)
                f = self._flops.get(size)
                if f is None:
                    from nets.fused import flops_per_eval

                    f = self._flops[size] = flops_per_eval(self.model.config, *size)
                self.flops += f * n
        self.hdr[q.G_BATCHES] = self.batches
        self.hdr[q.G_POSITIONS] = self.positions
        self.hdr[q.G_FLOPS] = self.flops
        self.hdr[q.G_BUSY_NS] = self.busy_ns

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
                if not self._inflight:  # with a batch in flight, look for the next one at once
                    self.handles.doorbell.acquire(timeout=idle_slice)
                self.handle_pending(drain=not self.cfg.pipeline)
                if time.monotonic() >= next_reload:
                    self._drain()
                    self.maybe_reload()
                    next_reload = time.monotonic() + self.cfg.reload_interval
            self._drain()
        finally:
            stop.set()


def server_main(handles: q.QueueHandles, cfg: ServerConfig, parent_pid: int = 0) -> None:
    """Process entry point (multiprocessing target).

    The parent decides when the server stops (``request_shutdown``, after its workers
    have written their games): SIGINT, SIGTERM and SIGHUP sent to the whole process group
    are ignored here. If the parent dies, the server is killed (it holds nothing to save).
    A CUDA server first narrows CUDA_VISIBLE_DEVICES to its own GPU (before any CUDA
    call), so the rest of the process only ever sees ``cuda:0``."""
    import signal

    from c4fast.runtime import die_with_parent, ignore_interrupts, keep_heap_mapped

    keep_heap_mapped()  # no page faults per forward (docs/PERFORMANCE.md)
    ignore_interrupts()
    if parent_pid:
        die_with_parent(signal.SIGKILL, parent_pid)
    if cfg.device.startswith("cuda"):
        from nets.cuda_runner import pin_process_to_device

        cfg = dataclasses.replace(cfg, device=pin_process_to_device(cfg.device))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"[server {os.getpid()}] %(levelname)s %(message)s")
    try:
        server = InferenceServer(handles, cfg)
    except Exception as e:
        log.error("server failed to start: %s: %s", type(e).__name__, e)
        raise
    server.serve_forever()


def start_server(ctx, handles: q.QueueHandles, cfg: ServerConfig, name: str = "c4fast-server"):
    """Start a server process from multiprocessing context `ctx`; returns the Process.

    A server for "cuda:N" starts with CUDA_VISIBLE_DEVICES narrowed to the parent's entry N
    (and serves "cuda:0"), so its interpreter never sees another GPU."""
    from nets.cuda_runner import child_device_env

    device, env = child_device_env(cfg.device, os.environ.get("CUDA_VISIBLE_DEVICES"))
    cfg = dataclasses.replace(cfg, device=device)
    p = ctx.Process(target=server_main, args=(handles, cfg, os.getpid()), name=name, daemon=True)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # inherited by the spawned interpreter
    try:
        p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
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
