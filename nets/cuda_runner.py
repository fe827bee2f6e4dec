"""CUDA inference for the server: device pinning, batch buckets, CUDA graphs, copy pipeline.

One :class:`GraphRunner` per server process serves one GPU:

* **Pinning.** A server process for ``cuda:N`` starts with ``CUDA_VISIBLE_DEVICES``
  narrowed to entry N of the parent's list (ordinals, ``GPU-``/``MIG-`` UUIDs kept
  verbatim; :func:`child_device_env`, used by ``nets.server.start_server``) and checks it
  again before any CUDA call (:func:`pin_process_to_device`), so it sees exactly one GPU
  as ``cuda:0`` and nothing can land on another device's stream. The runner also calls
  ``torch.cuda.set_device`` and passes ``stream=`` explicitly to every capture.
* **Graphs.** At start-up it captures, for every board size it will serve and every
  batch bucket (:func:`bucket_sizes`: 4 per octave, multiples of 8), one CUDA graph of
  the inference module (BN-folded :class:`nets.fused.FusedNet` by default) in bf16 and
  channels_last: warm-up on the runner's side stream, capture on the same stream, all
  graphs in one shared memory pool. Every capture is followed by a self-check
  (:mod:`nets.selfcheck`) against the eager fp32 net (TF32 off); a mismatch raises.
  A request of n positions replays the smallest bucket >= n (rows are independent, so
  the padding rows' stale contents never reach a result). A size that was not captured
  runs the same module eagerly (logged once), never a capture in the request path.
* **Hot reload** copies the new weights into the captured tensors in place
  (:meth:`GraphRunner.load_weights`): no re-capture, then one self-check.
* **Copies.** :meth:`GraphRunner.submit` enqueues host-to-device copies on an H2D stream,
  the replay on the compute stream and device-to-host copies on a D2H stream, ordered by
  events, and returns at once; :meth:`GraphRunner.complete` waits for one ticket. Two
  tickets may be in flight (double-buffered device staging), so the server prepares
  and publishes one batch while the GPU runs the other. When the shared-memory block is
  registered with ``cudaHostRegister`` (:meth:`GraphRunner.register_host_memory`) the
  copies go straight between the workers' slots and the GPU; otherwise through pinned
  staging buffers (one numpy copy each way).

Outputs per position: policy logits (H*W) and ``value_width`` floats of wdl (3, or 4 for a
net with the moves-left head: :func:`nets.model.torch_wdl_outputs`, inside the graph).
Graph outputs live in the shared pool and may alias another graph's scratch, so each
replay's outputs are copied out on the compute stream before the next replay is issued.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import mmap
import os
import time

import numpy as np
import torch

from c4fast.encode import NUM_PLANES
from c4fast.game import SAIBLO_SIZES
from nets.canvas import CANVAS
from nets.selfcheck import TOLERANCES, Tolerance, self_check

log = logging.getLogger(__name__)

__all__ = ["GraphRunner", "bucket_sizes", "child_device_env", "choose_bucket", "pin_process_to_device",
           "visible_device_entry", "inference_module", "DEFAULT_SIZES"]

#: Board sizes a GPU server captures when none are given: Saiblo's 16 (9..12 x 9..12).
DEFAULT_SIZES = SAIBLO_SIZES
PIPELINE_DEPTH = 2  # tickets in flight (device staging buffers)


# --------------------------------------------------------------------------- pure helpers


def bucket_sizes(max_batch: int, per_octave: int = 4, smallest: int = 8, align: int = 8) -> tuple[int, ...]:
    """Batch sizes to capture, ascending, up to the first one >= `max_batch`.

    Powers of two from `smallest`, each octave split into `per_octave` equal steps that are
    multiples of `align` (8, 16, 24, 32, 40, ..., 64, 80, 96, 112, 128, 160, ...): padding
    a batch to its bucket wastes at most 1/per_octave of an octave (< 20 % at 4 per
    octave, ~6 % on average vs ~25 % for powers of two)."""
    if max_batch < 1 or per_octave < 1 or smallest < 1 or align < 1:
        raise ValueError(f"bad bucket parameters {max_batch}, {per_octave}, {smallest}, {align}")
    out: list[int] = []
    b = smallest
    while True:
        step = max(align, b // per_octave)
        v = b
        while v < 2 * b:
            out.append(v)
            if v >= max_batch:
                return tuple(out)
            v += step
        b *= 2


def choose_bucket(buckets: tuple[int, ...], n: int) -> int:
    """Smallest bucket >= n (buckets ascending); ValueError if n is larger than all."""
    import bisect

    i = bisect.bisect_left(buckets, n)
    if n < 1 or i == len(buckets):
        raise ValueError(f"batch of {n} outside 1..{buckets[-1]}")
    return buckets[i]


def visible_device_entry(index: int, visible: str | None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value exposing only the parent's ``cuda:<index>``.

    visible: the parent's ``CUDA_VISIBLE_DEVICES`` (None: unset, every device by ordinal);
    its entries may be ordinals or ``GPU-``/``MIG-`` UUIDs and are kept verbatim."""
    if index < 0:
        raise ValueError(f"device index must be >= 0, got {index}")
    if visible is None:
        return str(index)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise ValueError(f"cuda:{index} is not visible: CUDA_VISIBLE_DEVICES={visible!r} "
                         f"lists {len(entries)} device(s)")
    return entries[index]


def child_device_env(device: str, visible: str | None) -> tuple[str, dict]:
    """(device, environment overrides) for a server process started for `device`.

    "cuda:N" -> ("cuda:0", {"CUDA_VISIBLE_DEVICES": the parent's entry N}): the child's
    interpreter then starts with only its GPU visible. "cpu" -> ("cpu", {})."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return device, {}
    return "cuda:0", {"CUDA_VISIBLE_DEVICES": visible_device_entry(dev.index or 0, visible)}


def pin_process_to_device(device: str, environ=None) -> str:
    """Make `device` ("cuda:N") the only GPU this process sees; returns the device to use.

    Must run before CUDA is initialised in this process (a fresh server process): it sets
    ``CUDA_VISIBLE_DEVICES`` to the parent's entry N and returns "cuda:0". If CUDA is
    already initialised it cannot narrow the set: it logs a warning, selects the device
    with ``torch.cuda.set_device`` and returns `device` unchanged."""
    environ = os.environ if environ is None else environ
    dev = torch.device(device)
    if dev.type != "cuda":
        return device
    idx = dev.index or 0
    if torch.cuda.is_initialized():
        log.warning("CUDA already initialised: cannot narrow CUDA_VISIBLE_DEVICES; using set_device(%d)", idx)
        torch.cuda.set_device(idx)
        return f"cuda:{idx}"
    environ["CUDA_VISIBLE_DEVICES"] = visible_device_entry(idx, environ.get("CUDA_VISIBLE_DEVICES"))
    return "cuda:0"


@contextlib.contextmanager
def exact_fp32():
    """Disable TF32 for convs and matmuls inside the block (the fp32 reference forward)."""
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    conv = getattr(cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        old = (conv.fp32_precision, matmul.fp32_precision)
        conv.fp32_precision, matmul.fp32_precision = "ieee", "ieee"
        try:
            yield
        finally:
            conv.fp32_precision, matmul.fp32_precision = old
    else:  # older torch
        old = (cudnn.allow_tf32, matmul.allow_tf32)
        cudnn.allow_tf32 = matmul.allow_tf32 = False
        try:
            yield
        finally:
            cudnn.allow_tf32, matmul.allow_tf32 = old


def _tf32_convs() -> bool:
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        return conv.fp32_precision == "tf32"
    return bool(torch.backends.cudnn.allow_tf32)


def tolerance_for(dtype: torch.dtype, device_type: str) -> Tolerance:
    """Self-check tolerance of a forward computed in `dtype` on `device_type`."""
    if dtype == torch.bfloat16:
        return TOLERANCES["bf16"]
    if dtype == torch.float16:
        return TOLERANCES["fp16"]
    return TOLERANCES["tf32" if device_type == "cuda" and _tf32_convs() else "fp32"]


def inference_module(model, kind: str, dtype: torch.dtype, device, channels_last: bool, dynamic_batch: bool = False):
    """(module, forward callable) computing `model` in eval mode for serving.

    kind: "eager" (a copy of the Net itself), "fused" (:class:`nets.fused.FusedNet`) or
    "compiled" (torch.compile of the FusedNet, static shapes; with `dynamic_batch` one
    compile for every batch size, the callers marking dim 0 dynamic: the canvas runner).
    Weights can be replaced in place with :func:`load_inference_weights`."""
    from nets.fused import FusedNet

    model = getattr(model, "_orig_mod", model)
    if kind == "eager":
        net = copy.deepcopy(model).eval()
        for p in net.parameters():
            p.requires_grad_(False)
    elif kind in ("fused", "compiled"):
        net = FusedNet.from_model(model)
    else:
        raise ValueError(f"inference module kind must be eager/fused/compiled, got {kind!r}")
    net = net.to(device=device, dtype=dtype)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    fwd = net
    if kind == "compiled":
        import torch._dynamo as dynamo

        # one specialisation per (size, bucket): up to 16 x 32 shapes, not dynamo's default 8
        dynamo.config.cache_size_limit = max(dynamo.config.cache_size_limit, 1024)
        dynamo.config.accumulated_cache_size_limit = max(dynamo.config.accumulated_cache_size_limit, 4096)
        fwd = torch.compile(net, dynamic=None if dynamic_batch else False, fullgraph=True)
    return net, fwd


@torch.no_grad()
def load_inference_weights(net, model) -> None:
    """Copy `model`'s weights into an :func:`inference_module` in place (addresses kept)."""
    from nets.fused import FusedNet

    model = getattr(model, "_orig_mod", model)
    if isinstance(net, FusedNet):
        net.load_from(model)
    else:
        own = net.state_dict(keep_vars=True)
        for k, v in model.state_dict().items():
            own[k].copy_(v)


# --------------------------------------------------------------------------- the runner


@dataclasses.dataclass
class _Graph:
    graph: object  # torch.cuda.CUDAGraph
    x: torch.Tensor  # static input (bucket, C, H, W) uint8
    pol: torch.Tensor  # static output (bucket, H*W) float32 logits
    wdl: torch.Tensor  # static output (bucket, K) float32 probabilities (K = 4: moves left last)
    mask: torch.Tensor | None = None  # canvas graphs: static board mask (bucket, 1, S, S)


class _Ring:
    """Per-ticket staging: device input/output buffers, pinned host buffers, events."""

    def __init__(self, device, max_batch: int, num_planes: int, cells: int, value_width: int = 3):
        dev_kw = dict(device=device)
        self.dev_in = torch.empty(max_batch * num_planes * cells, dtype=torch.uint8, **dev_kw)
        self.dev_pol = torch.empty(max_batch * cells, dtype=torch.float32, **dev_kw)
        self.dev_wdl = torch.empty(max_batch * value_width, dtype=torch.float32, **dev_kw)
        self.host_in = torch.empty(self.dev_in.numel(), dtype=torch.uint8, pin_memory=True)
        self.host_pol = torch.empty(self.dev_pol.numel(), dtype=torch.float32, pin_memory=True)
        self.host_wdl = torch.empty(self.dev_wdl.numel(), dtype=torch.float32, pin_memory=True)
        self.h2d_done = torch.cuda.Event()
        self.in_free = torch.cuda.Event()
        self.out_ready = torch.cuda.Event()
        self.d2h_done = torch.cuda.Event(blocking=True)  # the host sleeps while waiting
        self.busy = False


@dataclasses.dataclass
class Ticket:
    """One submitted batch; pass it to :meth:`GraphRunner.complete`."""

    ring: int
    n: int
    direct: bool
    segments: list  # (height, width, outputs) per board size, in the batch's order


class GraphRunner:
    """CUDA-graph inference of one net on one device (see the module docstring).

    model: the eval-mode ``Net`` (any device; copied). sizes: (h, w) pairs captured by
    :meth:`capture_all`. max_batch: largest batch (the last bucket is >= it).
    """

    def __init__(self, model, device, dtype=torch.bfloat16, sizes=DEFAULT_SIZES, max_batch: int = 4096,
                 num_planes: int = NUM_PLANES, kind: str = "fused", graphs: bool = True, channels_last: bool = True,
                 check: bool = True, canvas: bool = False):
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"GraphRunner needs a CUDA device, got {device!r}")
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(self.device)
        torch.backends.cudnn.benchmark = True  # shapes are static per graph
        self.config = getattr(model, "_orig_mod", model).config
        self.value_width = self.config.value_outputs  # wdl floats per position (4: moves left)
        self.dtype = dtype
        self.kind = kind
        self.use_graphs = graphs
        self.channels_last = channels_last
        self.check = check
        self.num_planes = num_planes
        self.sizes = tuple(sorted({(int(h), int(w)) for h, w in sizes}))
        self.canvas = canvas
        if canvas and kind == "eager":
            raise ValueError("the canvas runner serves the fused (or compiled) net, not 'eager'")
        # canvas: one graph per bucket for every size (merged batches are large: from 64)
        self.buckets = bucket_sizes(max_batch, smallest=64) if canvas else bucket_sizes(max_batch)
        self.max_batch = self.buckets[-1]
        self.tol = tolerance_for(dtype, "cuda")
        self.stream = torch.cuda.Stream(self.device)  # capture and replay
        self.h2d = torch.cuda.Stream(self.device)
        self.d2h = torch.cuda.Stream(self.device)
        with torch.cuda.stream(self.stream):
            self.net, self.fwd = inference_module(model, kind, dtype, self.device, channels_last, dynamic_batch=canvas)
            self.ref = copy.deepcopy(getattr(model, "_orig_mod", model)).float().eval().to(self.device)
        self.stream.synchronize()
        self.pool = torch.cuda.graph_pool_handle() if graphs else None
        self.graphs: dict[tuple[int, int, int], _Graph] = {}
        self.captures = 0
        self.capture_seconds = 0.0
        self.checks: list[dict] = []
        self.rings = [_Ring(self.device, self.max_batch, num_planes, 144, self.value_width)
                      for _ in range(PIPELINE_DEPTH)]
        self._next_ring = 0
        self._registered: list[tuple[int, int]] = []
        self._eager_sizes_logged: set = set()
        self._masks: dict = {}  # canvas: (h, w) -> (1, 1, S, S) board mask on the device
        self._check_set = None  # canvas self-check: (rows per size, positions, fp32 references)

    # ------------------------------------------------------------------ forward
    def _run(self, x_u8: torch.Tensor):
        """(n, C, H, W) uint8 on the device -> (policy (n, H*W) f32 logits, wdl (n, K) f32)."""
        from nets.model import torch_wdl_outputs

        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        x = x_u8.to(dtype=self.dtype, memory_format=fmt)
        pol, val = self.fwd(x)
        return pol.float().flatten(1), torch_wdl_outputs(val, x.shape[2] * x.shape[3])

    def _run_canvas(self, x_u8: torch.Tensor, mask: torch.Tensor):
        """Canvas batch (n, C, S, S) uint8 and board mask (n, 1, S, S) on the device ->
        (policy (n, S*S) f32 logits, meaningful on each board's cells; wdl (n, K) f32)."""
        from nets.model import torch_wdl_outputs

        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        x = x_u8.to(dtype=self.dtype, memory_format=fmt)
        if self.kind == "compiled":  # one compile serves every bucket
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(mask, 0)
        pol, val = self.fwd(x, mask)
        return pol.float().flatten(1), torch_wdl_outputs(val, mask.flatten(1).float().sum(1))

    def _mask(self, h: int, w: int) -> torch.Tensor:
        m = self._masks.get((h, w))
        if m is None:
            from nets.canvas import board_mask

            m = self._masks[(h, w)] = board_mask([(h, w)], CANVAS, self.device).to(self.dtype)
        return m

    def _reference(self, x: np.ndarray):
        """Eager fp32 forward (TF32 off) of numpy uint8 planes -> numpy (policy, wdl)."""
        from nets.model import torch_wdl_outputs

        with torch.no_grad(), exact_fp32(), torch.cuda.stream(self.stream):
            t = torch.from_numpy(x).to(self.device).float()
            pol, val = self.ref(t)
            out = pol.flatten(1).cpu().numpy(), torch_wdl_outputs(val, t.shape[2] * t.shape[3]).cpu().numpy()
        return out

    # ------------------------------------------------------------------ capture
    def capture_all(self) -> None:
        """Capture (and self-check) every (size, bucket); logs the time taken."""
        t0 = time.perf_counter()
        if not self.use_graphs:  # eager serving: check each size once
            if self.canvas and self.check:
                self.check_canvas(self.buckets[min(3, len(self.buckets) - 1)])
                return
            for h, w in self.sizes:
                if self.check:
                    self.self_check(h, w, self.buckets[min(3, len(self.buckets) - 1)])
            return
        if self.canvas:
            for b in self.buckets:
                self._capture_canvas(b)
            log.info("captured %d canvas CUDA graphs (every size, %d buckets) in %.1f s", len(self.graphs),
                     len(self.buckets), time.perf_counter() - t0)
            return
        for h, w in self.sizes:
            for b in self.buckets:
                self._capture(h, w, b)
        log.info("captured %d CUDA graphs (%d sizes x %d buckets) in %.1f s", len(self.graphs),
                 len(self.sizes), len(self.buckets), time.perf_counter() - t0)

    def _capture_canvas(self, b: int) -> None:
        t0 = time.perf_counter()
        x = torch.zeros((b, self.num_planes, CANVAS, CANVAS), dtype=torch.uint8, device=self.device)
        mask = torch.ones((b, 1, CANVAS, CANVAS), dtype=self.dtype, device=self.device)  # padding rows: area > 0
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.no_grad(), torch.cuda.stream(self.stream):
            for _ in range(2):
                self._run_canvas(x, mask)
        self.stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g, pool=self.pool, stream=self.stream):
            pol, wdl = self._run_canvas(x, mask)
        self.graphs[(0, 0, b)] = _Graph(g, x, pol, wdl, mask)
        self.captures += 1
        self.capture_seconds += time.perf_counter() - t0
        if self.check:
            self.check_canvas(b)

    def check_canvas(self, b: int, seed: int | None = None) -> dict:
        """Canvas: one batch of n = b - 3 random positions of every served size in turn (one
        group per size, as the server submits them) through the serving path, each group
        compared with the eager fp32 per-size forward; raises SelfCheckError on a mismatch.
        Returns the worst errors."""
        from nets.selfcheck import SelfCheckError, compare, random_planes

        sizes = self.sizes or DEFAULT_SIZES
        n = max(len(sizes), b - 3 if b > 8 else b)
        counts = [n // len(sizes) + (i < n % len(sizes)) for i in range(len(sizes))]
        if seed is not None or self._check_set is None or self._check_set[0] < max(counts):
            # positions and their fp32 references, once per weights (the reference forward on
            # new shapes is what a check costs; a rotating offset varies the rows per bucket)
            m = max(max(counts), self.max_batch // len(sizes) + 1)
            pos = [random_planes(m, self.num_planes, h, w, seed=(seed or 0) * 100 + i) for i, (h, w) in enumerate(sizes)]
            self._check_set = (m, pos, [self._reference(x) for x in pos])
        m, pos, refs_all = self._check_set
        groups, refs = [], []
        for i, k in enumerate(counts):
            if k == 0:
                continue
            h, w = sizes[i]
            start = (b * 7 + i) % (m - k + 1)
            pol = np.empty((k, h * w), np.float32)
            wdl = np.empty((k, self.value_width), np.float32)
            groups.append((h, w, [pos[i][start:start + k]], [(pol, wdl)]))
            refs.append((refs_all[i][0][start:start + k], refs_all[i][1][start:start + k]))
        self.complete(self.submit_groups(groups))
        worst = {"policy_rel": 0.0, "wdl_abs": 0.0}
        what = f"canvas {'CUDA graph' if (0, 0, b) in self.graphs else 'eager'} ({self.kind}, {self.dtype})"
        for (h, w, _, [(pol, wdl)]), (ref_pol, ref_wdl) in zip(groups, refs):
            err = compare(pol, wdl, ref_pol, ref_wdl)
            if not (np.isfinite(ref_pol).all() and np.isfinite(ref_wdl).all()):
                raise SelfCheckError(f"{what}: the eager fp32 reference itself is not finite on {h}x{w}")
            if not (err["finite"] and err["policy_rel"] <= self.tol.policy_rel and err["wdl_abs"] <= self.tol.wdl_abs):
                raise SelfCheckError(
                    f"{what} on {self.device} disagrees with the eager fp32 forward on {h}x{w} in a mixed "
                    f"batch of {n} (bucket {b}): policy_rel {err['policy_rel']:.3g} (tolerance "
                    f"{self.tol.policy_rel}), wdl_abs {err['wdl_abs']:.3g} (tolerance {self.tol.wdl_abs}), "
                    f"finite {err['finite']}")
            for k in worst:
                worst[k] = max(worst[k], err[k])
        out = {"size": "canvas", "bucket": b, **worst, "finite": True}
        self.checks.append(out)
        return out

    def _capture(self, h: int, w: int, b: int) -> None:
        t0 = time.perf_counter()
        x = torch.zeros((b, self.num_planes, h, w), dtype=torch.uint8, device=self.device)
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.no_grad(), torch.cuda.stream(self.stream):
            for _ in range(2):  # warm-up on the capture stream: cuDNN autotuning, lazy init
                self._run(x)
        self.stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g, pool=self.pool, stream=self.stream):
            pol, wdl = self._run(x)
        self.graphs[(h, w, b)] = _Graph(g, x, pol, wdl)
        self.captures += 1
        self.capture_seconds += time.perf_counter() - t0
        if self.check:
            self.self_check(h, w, b)

    def self_check(self, h: int, w: int, b: int, seed: int | None = None) -> dict:
        """Replay (h, w, bucket b) through the serving path on a random batch and compare
        with the eager fp32 forward; raises nets.selfcheck.SelfCheckError on a mismatch."""
        n = b if b <= 8 else b - 3  # not a full bucket: padding rows are exercised too
        what = "CUDA graph" if (h, w, b) in self.graphs else f"eager {self.kind} forward"
        err = self_check(f"{what} ({self.kind}, {self.dtype}) on {self.device}",
                         lambda x: self.run_sync(x), self._reference, h, w, n, self.num_planes,
                         self.tol, seed=seed if seed is not None else h * 1000 + w * 10 + b)
        self.checks.append({"size": f"{h}x{w}", "bucket": b, **err})
        return err

    # ------------------------------------------------------------------ reload
    def load_weights(self, model) -> None:
        """Hot reload: copy `model`'s weights into the captured tensors (no re-capture), then
        self-check one size. No ticket may be in flight."""
        if any(r.busy for r in self.rings):
            raise RuntimeError("load_weights with batches in flight")
        cfg = getattr(model, "_orig_mod", model).config
        if cfg != self.config:
            raise ValueError(f"new net {cfg.name!r} does not fit the captured graphs: {cfg.diff(self.config)}")
        with torch.cuda.stream(self.stream):
            load_inference_weights(self.net, model)
            load_inference_weights(self.ref, model)
        self.stream.synchronize()
        if self.check and self.canvas:
            self.check_canvas(self.buckets[min(3, len(self.buckets) - 1)], seed=int(time.time()) % 1000)
        elif self.check and self.sizes:
            h, w = self.sizes[-1]
            self.self_check(h, w, self.buckets[min(3, len(self.buckets) - 1)], seed=int(time.time()) % 1000)

    # ------------------------------------------------------------------ host memory
    def register_host_memory(self, ptr: int, nbytes: int) -> bool:
        """Page-lock [ptr, ptr + nbytes) (the shared-memory block) with cudaHostRegister so
        copies to and from it are asynchronous DMA. Returns False (logged) if refused."""
        page = mmap.PAGESIZE
        start = ptr - ptr % page
        size = (ptr + nbytes - start + page - 1) // page * page
        try:
            cudart = torch.cuda.cudart()
            err = cudart.cudaHostRegister(start, size, 1)  # cudaHostRegisterPortable
            if err != cudart.cudaError.success:
                raise RuntimeError(str(err))
        except Exception as e:  # noqa: BLE001 - an optimisation only
            log.warning("cudaHostRegister of %d bytes refused (%s): copies go through pinned "
                        "staging buffers", size, e)
            return False
        self._registered.append((start, start + size))
        return True

    def unregister_host_memory(self) -> None:
        cudart = torch.cuda.cudart()
        for start, _ in self._registered:
            try:
                cudart.cudaHostUnregister(start)
            except Exception:  # noqa: BLE001
                pass
        self._registered.clear()

    def _is_registered(self, a: np.ndarray) -> bool:
        if not a.flags.c_contiguous:
            return False
        p = a.__array_interface__["data"][0]
        return any(lo <= p and p + a.nbytes <= hi for lo, hi in self._registered)

    # ------------------------------------------------------------------ serving
    def submit(self, height: int, width: int, inputs: list, outputs: list) -> Ticket:
        """Enqueue one batch of one board size and return at once (:meth:`submit_groups`)."""
        return self.submit_groups([(height, width, inputs, outputs)])

    def submit_groups(self, groups: list) -> Ticket:
        """Enqueue one batch and return at once.

        groups: (H, W, inputs, outputs) per board size, in order: inputs numpy uint8 arrays
        (n_i, C, H, W); outputs matching (policy (n_i, H*W) float32, wdl (n_i, K) float32,
        K = ``value_width``) numpy arrays, written by :meth:`complete`. A per-size runner takes
        one group; a canvas runner any number (one forward for all). The inputs must stay
        unchanged until then. At most PIPELINE_DEPTH tickets in flight."""
        if not groups:
            raise ValueError("an empty batch")
        if not self.canvas and len(groups) != 1:
            raise ValueError(f"a per-size runner takes one board size per batch, got {len(groups)}")
        sizes = [(int(h), int(w), sum(len(a) for a in inputs)) for h, w, inputs, _ in groups]
        n = sum(k for _, _, k in sizes)
        b = choose_bucket(self.buckets, n)
        r = self._next_ring
        ring = self.rings[r]
        if ring.busy:
            raise RuntimeError(f"more than {PIPELINE_DEPTH} batches in flight")
        self._next_ring = (r + 1) % len(self.rings)
        ring.busy = True
        inputs = [a for g in groups for a in g[2]]
        outputs = [o for g in groups for o in g[3]]
        direct = bool(self._registered) and all(self._is_registered(a) for a in inputs) and all(
            self._is_registered(p) and self._is_registered(q) for p, q in outputs)
        vw = self.value_width
        cells_in = sum(k * self.num_planes * h * w for h, w, k in sizes)
        cells_out = sum(k * h * w for h, w, k in sizes)
        try:
            # 1. host -> device staging (H2D stream), once compute has read the previous use
            src = ring.dev_in[:cells_in]
            with torch.cuda.stream(self.h2d):
                self.h2d.wait_event(ring.in_free)
                off = 0
                if direct:
                    for a in inputs:
                        src[off:off + a.size].copy_(torch.from_numpy(a.reshape(-1)), non_blocking=True)
                        off += a.size
                else:
                    host = ring.host_in.numpy()
                    for a in inputs:
                        host[off:off + a.size] = a.reshape(-1)
                        off += a.size
                    src.copy_(ring.host_in[:cells_in], non_blocking=True)
                ring.h2d_done.record(self.h2d)
            # 2. replay (compute stream); outputs copied out before any other replay
            pol_out = ring.dev_pol[:cells_out]
            wdl_out = ring.dev_wdl[: n * vw].view(n, vw)
            with torch.no_grad(), torch.cuda.stream(self.stream):
                self.stream.wait_event(ring.h2d_done)
                self.stream.wait_event(ring.d2h_done)  # dev_pol/dev_wdl read by the previous D2H
                if self.canvas:
                    pol, wdl = self._forward_canvas(ring, src, sizes, b)
                else:
                    pol, wdl = self._forward_size(ring, src, sizes[0], b)
                    pol_out.view(n, -1).copy_(pol)
                if self.canvas:  # each size's board cells, in order
                    pol = pol.view(-1, CANVAS, CANVAS)
                    row = poff = 0
                    for h, w, k in sizes:
                        pol_out[poff:poff + k * h * w].view(k, h, w).copy_(pol[row:row + k, :h, :w])
                        row += k
                        poff += k * h * w
                wdl_out.copy_(wdl)
                ring.out_ready.record(self.stream)
            # 3. device -> host (D2H stream)
            with torch.cuda.stream(self.d2h):
                self.d2h.wait_event(ring.out_ready)
                if direct:
                    row = poff = 0
                    for p, q in outputs:
                        k = len(p)
                        torch.from_numpy(p.reshape(-1)).copy_(pol_out[poff:poff + p.size], non_blocking=True)
                        torch.from_numpy(q.reshape(-1)).copy_(wdl_out[row:row + k].reshape(-1), non_blocking=True)
                        row += k
                        poff += p.size
                else:
                    ring.host_pol[:cells_out].copy_(pol_out, non_blocking=True)
                    ring.host_wdl[: n * vw].copy_(wdl_out.reshape(-1), non_blocking=True)
                ring.d2h_done.record(self.d2h)
        except Exception:
            ring.busy = False
            raise
        return Ticket(r, n, direct, [(h, w, outs) for (h, w, _), (_, _, _, outs) in zip(sizes, groups)])

    def _forward_size(self, ring, src, size, b):
        """Per-size replay (or eager forward) of the staged batch -> (policy, wdl) rows [:n]."""
        h, w, n = size
        x = src.view(n, self.num_planes, h, w)
        g = self.graphs.get((h, w, b))
        if g is not None:
            g.x[:n].copy_(x)
            ring.in_free.record(self.stream)
            g.graph.replay()
            return g.pol[:n], g.wdl[:n]
        if (h, w) not in self._eager_sizes_logged:
            self._eager_sizes_logged.add((h, w))
            log.warning("no CUDA graphs for %dx%d: running it eagerly", h, w)
        xb = torch.zeros((b, self.num_planes, h, w), dtype=torch.uint8, device=self.device)
        xb[:n].copy_(x)  # bucket shapes only: cuDNN autotunes each shape once
        ring.in_free.record(self.stream)
        pol, wdl = self._run(xb)
        return pol[:n], wdl[:n]

    def _forward_canvas(self, ring, src, sizes, b):
        """Canvas: lay each size's staged positions into the bucket's canvas (their board's
        corner; whatever lies off the board is masked in the net), set their masks, replay
        (or run eagerly without graphs) -> (policy (n, S*S), wdl (n, K)) rows [:n]."""
        n = sum(k for _, _, k in sizes)
        g = self.graphs.get((0, 0, b))
        if g is not None:
            x, mask = g.x, g.mask
        else:
            x = torch.zeros((b, self.num_planes, CANVAS, CANVAS), dtype=torch.uint8, device=self.device)
            mask = torch.ones((b, 1, CANVAS, CANVAS), dtype=self.dtype, device=self.device)
        row = off = 0
        for h, w, k in sizes:
            c = k * self.num_planes * h * w
            x[row:row + k, :, :h, :w].copy_(src[off:off + c].view(k, self.num_planes, h, w))
            mask[row:row + k].copy_(self._mask(h, w).expand(k, -1, -1, -1))
            row += k
            off += c
        ring.in_free.record(self.stream)
        if g is not None:
            g.graph.replay()
            return g.pol[:n], g.wdl[:n]
        pol, wdl = self._run_canvas(x, mask)
        return pol[:n], wdl[:n]

    def complete(self, t: Ticket) -> None:
        """Wait for ticket `t` and leave its results in its output arrays."""
        ring = self.rings[t.ring]
        try:
            ring.d2h_done.synchronize()
            if not t.direct:
                pol = ring.host_pol.numpy()
                vw = self.value_width
                wdl = ring.host_wdl.numpy()[: t.n * vw].reshape(t.n, vw)
                row = poff = 0
                for _, _, outputs in t.segments:
                    for p, q in outputs:
                        k = len(p)
                        p[...] = pol[poff:poff + p.size].reshape(p.shape)
                        q[...] = wdl[row:row + k]
                        row += k
                        poff += p.size
        finally:
            ring.busy = False

    def run_sync(self, x: np.ndarray):
        """(n, C, H, W) uint8 numpy -> numpy (policy (n, H*W) logits, wdl (n, K)); n may
        exceed the largest bucket (split)."""
        n, _, h, w = x.shape
        pol = np.empty((n, h * w), np.float32)
        wdl = np.empty((n, self.value_width), np.float32)
        for i in range(0, n, self.max_batch):
            j = min(n, i + self.max_batch)
            self.complete(self.submit(h, w, [x[i:j]], [(pol[i:j], wdl[i:j])]))
        return pol, wdl

    # ------------------------------------------------------------------ figures
    def replay_rate(self, h: int, w: int, b: int, seconds: float = 0.5) -> float:
        """Raw graph replays of (h, w, b) per second (no host copies), timed with events."""
        g = self.graphs[(h, w, b)]
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                g.graph.replay()
            self.stream.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            reps = 10
            while True:
                start.record(self.stream)
                for _ in range(reps):
                    g.graph.replay()
                end.record(self.stream)
                end.synchronize()
                ms = start.elapsed_time(end)
                if ms >= seconds * 1e3 or reps >= 1 << 16:
                    return reps / (ms / 1e3)
                reps *= 2
