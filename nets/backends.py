"""CPU inference backends: the same eval-mode net computed by different engines.

Every backend is a callable ``fwd(planes) -> (policy logits (n, H*W), value logits (n, 3))``
(``(n, 4)`` with the moves-left head: the net's raw outputs, ``nets.config.wdl_outputs``)
taking (n, C, H, W) float32 0/1 planes (numpy, C-contiguous) for the side to move and
returning float32 numpy arrays; :meth:`CpuBackend.load` swaps in another checkpoint of the
same architecture (hot reload). Kinds:

===============  ================================================================
``eager``        the :class:`nets.model.Net` as trained (bit-exact with training)
``fused``        BatchNorm folded into the convs (:mod:`nets.fused`), channels_last
``compiled``     ``torch.compile`` of the fused net (one specialisation per shape)
``numpy``        :mod:`nets.numpy_net` (torch-free, the Saiblo player's path)
``ort``          ONNX Runtime, fp32, the fused net exported once with a symbolic
                 batch and board size (``onnxruntime`` and ``onnx``, installed with c4fast)
``ort_int8``     ONNX Runtime with int8 weights (per output channel) and uint8
                 activations (static QDQ), calibrated on positions of random games;
                 CPUs with VNNI or AMX-INT8 only
``bf16``         the fused net in bfloat16 weights and activations, channels_last
                 (oneDNN); CPUs with AVX512-BF16 or AMX-BF16 only
``ov``           OpenVINO, fp32, the same ONNX export (symbolic batch and board size:
                 one compiled model serves every size; ``openvino``)
``ov_bf16``      OpenVINO with bf16 inference precision: its CPU plugin fuses the BN
                 affine, ReLU, residual adds and bias into the convolutions (AMX or
                 AVX512-BF16 kernels); CPUs with bf16 units only
===============  ================================================================

The fp32 kinds agree with ``eager`` to float32 rounding (:data:`nets.selfcheck.TOLERANCES`
"fp32"); ``bf16`` and ``ov_bf16`` are held to the GPU's bf16 tolerance, ``ort_int8`` to
:data:`INT8_TOLERANCE`, measured on the shipped net (see ``python -m selfplay.bench.nets
backends``). A kind the CPU lacks the instructions for is refused
(:class:`nets.precision.PrecisionUnavailable`): emulated it would be slower than fp32.
Threads: torch kinds use the process's ``torch.set_num_threads``; ONNX Runtime sessions
get ``threads`` intra-op threads; an OpenVINO model with ``threads`` = n > 1 runs n
one-thread streams, each a share of a batch of at least 2 x 16 positions (smaller batches
run on one thread). OpenVINO forwards run padded parts of at most 256 positions
(:func:`ov_batch_plan`: its kernels are built per input shape). All unpinned: the
self-play workers and the trainer share the cores.
An engine serves one caller at a time.
"""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import torch

from c4fast.board import RULES
from c4fast.game import SAIBLO_SIZES
from nets.selfcheck import TOLERANCES, Tolerance

log = logging.getLogger(__name__)

__all__ = ["BACKENDS", "INT8_TOLERANCE", "OV_MAX_PART", "OV_PAD", "BackendUnavailable", "CpuBackend",
           "calibration_planes", "ov_batch_plan", "tolerance_of"]

BACKENDS = ("eager", "fused", "compiled", "numpy", "ort", "ort_int8", "bf16", "ov", "ov_bf16")

#: Accepted error of the int8 path against eager fp32 (definitions in :mod:`nets.selfcheck`).
#: Measured for the shipped ``c4fast_cpu`` net on 128 positions of random games on each of
#: the 16 Saiblo sizes: policy_rel <= 0.032, wdl_abs <= 0.13 (the worst single position);
#: about 2x margin, and still far below the ~1.0 of a broken (constant) output.
INT8_TOLERANCE = Tolerance(policy_rel=0.08, wdl_abs=0.25)


class BackendUnavailable(RuntimeError):
    """The backend's runtime is not installed (the message says what to install)."""


class BackendError(RuntimeError):
    """An engine answered with outputs of the wrong shape (a runtime broken on this machine,
    e.g. OpenVINO under an emulated instruction-set cap returns empty tensors)."""


def tolerance_of(kind: str) -> Tolerance:
    """Self-check tolerance of backend `kind` against the eager fp32 forward."""
    return {"ort_int8": INT8_TOLERANCE, "bf16": TOLERANCES["bf16"],
            "ov_bf16": TOLERANCES["bf16"]}.get(kind, TOLERANCES["fp32"])


def default_calibration() -> list[np.ndarray]:
    """The int8 engines' calibration batches: :func:`calibration_planes` over the 16 Saiblo
    sizes, 32 positions each, computed once per process (read-only arrays)."""
    global _DEFAULT_CALIBRATION
    if _DEFAULT_CALIBRATION is None:
        batches = calibration_planes(SAIBLO_SIZES, 32)
        for b in batches:
            b.setflags(write=False)
        _DEFAULT_CALIBRATION = batches
    return _DEFAULT_CALIBRATION


_DEFAULT_CALIBRATION: list[np.ndarray] | None = None

#: An OpenVINO engine with several streams splits a batch only into parts of at least this
#: many positions (smaller ones run on one stream).
_OV_MIN_SPLIT = 16

#: OpenVINO's CPU plugin builds its kernels anew for every input shape it has not run
#: (measured on the AVX2 Zen 3, ``cpu_small``, one thread: 10-20 ms a new shape, a fifth of
#: a 100-position forward) and keeps the last few hundred shapes (its runtime cache). The
#: self-play server's batches take every count from 1 to ~600 on 16 board sizes, so an
#: exact-shape forward rebuilt kernels on most calls for the whole run. OpenVINO forwards
#: therefore run parts of at most :data:`OV_MAX_PART` positions, each padded with zero
#: planes to a multiple of :data:`OV_PAD` (counts below it run as they are): at most
#: ``OV_PAD - 1 + OV_MAX_PART // OV_PAD`` shapes per board size (39).
OV_PAD = 8
OV_MAX_PART = 256
#: Entries of OpenVINO's runtime cache, per stream (its default 5,000 held ~400 shapes of
#: ``cpu_small``): room for the 16 Saiblo sizes' 624 padded shapes and 6x7's with a margin
#: (about 1,600 shapes of ``cpu_small``). An internal plugin property: an OpenVINO that
#: refuses it compiles without it (logged).
_OV_CACHE_CAPACITY = 20_000


def ov_batch_plan(n: int, streams: int = 1) -> list[tuple[int, int, int]]:
    """How an OpenVINO engine runs a batch of `n` positions: ``(start, stop, rows)`` parts
    covering ``0..n`` in order, each of ``stop - start <= OV_MAX_PART`` positions forwarded
    as ``rows`` (padded: the next multiple of :data:`OV_PAD`, or the count itself below
    it; no parts for ``n = 0``). Near-equal parts, at least ``min(streams, n // 16)`` of
    them so that every stream gets a share of a big batch (parts of at least 16), and a
    multiple of `streams` where there are more parts than streams (the parts run in waves
    of one per stream)."""
    if n < 0 or streams < 1:
        raise ValueError(f"batch of {n} positions on {streams} streams")
    if n == 0:
        return []
    k = max(-(-n // OV_MAX_PART), min(streams, n // _OV_MIN_SPLIT), 1)
    if k > streams:
        k = -(-k // streams) * streams
    base, extra = divmod(n, k)
    plan, start = [], 0
    for i in range(k):
        m = base + (i < extra)
        rows = m if m < OV_PAD else -(-m // OV_PAD) * OV_PAD
        plan.append((start, start + m, rows))
        start += m
    return plan


def calibration_planes(sizes, per_size: int = 64, seed: int = 0) -> list[np.ndarray]:
    """One (per_size, NUM_PLANES, H, W) float32 batch per board size: positions of uniformly random
    games (a uniform forbidden cell on boards of at least 9x9, none below), cut after a
    uniform number of plies, as self-play meets them early in training."""
    from c4fast.encode import NUM_PLANES
    from c4fast.game import Game

    rng = np.random.default_rng(seed)
    out = []
    for h, w in sizes:
        x = np.zeros((per_size, NUM_PLANES, h, w), np.float32)
        for i in range(per_size):
            fb = RULES.draw_cell(rng, h, w) if min(h, w) >= 9 else None
            g = Game(h, w, fb)
            for _ in range(int(rng.integers(0, h * w - 1))):
                moves = g.legal_moves()
                if g.result is not None or not moves:
                    break
                g.play(int(rng.choice(moves)))
            if g.result is not None:  # the game just ended: take the position before
                g = Game.from_moves(h, w, fb, g.moves[:-1])
            x[i] = g.planes()
        out.append(x)
    return out


class CpuBackend:
    """One inference engine for one architecture (see the module docstring).

    kind: one of :data:`BACKENDS`; threads: intra-op threads of ONNX Runtime sessions
    and OpenVINO models (0: the runtime's default); calibration: for ``ort_int8``, the
    batches to calibrate
    on (default: :func:`calibration_planes` over the 16 Saiblo sizes).
    """

    #: Kinds that compute on a thread pool of their own runtime, not torch's: a process
    #: serving one should run torch (its softmax and copies) on one thread, or torch's idle
    #: OpenMP threads spin against the engine's (measured: 0.66x the engine's speed on 2 cores).
    OWN_THREADS = ("ort", "ort_int8", "ov", "ov_bf16")

    def __init__(self, model, kind: str, threads: int = 0, calibration=None):
        if kind not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {kind!r}")
        from nets import precision

        precision.cpu_info().require(precision.PRECISION_OF[kind])
        self.kind = kind
        self.threads = threads
        self.calibration = calibration
        self.config = getattr(model, "_orig_mod", model).config
        self._fn = None
        self._ov_requests: list = []  # an OpenVINO engine's infer requests, one per stream
        self._torch_threads: int | None = None  # torch's count before settle_torch_threads
        self.load(model)

    # ------------------------------------------------------------------ loading
    def load(self, model) -> None:
        """Serve `model` (a Net of the same config) from now on."""
        model = getattr(model, "_orig_mod", model)
        if model.config != self.config:
            raise ValueError(f"backend built for {self.config.name!r}, got a {model.config.name!r} net: "
                             f"{model.config.diff(self.config)}")
        model = model.eval()
        k = self.kind
        if k in ("eager", "fused", "compiled"):  # the same modules the CUDA path serves
            from nets.cuda_runner import inference_module

            _, fwd = inference_module(model, k, torch.float32, "cpu", channels_last=(k != "eager"))
            self._fn = self._torch_fn(fwd, channels_last=(k != "eager"))
        elif k == "bf16":
            from nets.cuda_runner import inference_module

            _, fwd = inference_module(model, "fused", torch.bfloat16, "cpu", channels_last=True)
            self._fn = self._torch_fn(fwd, channels_last=True, dtype=torch.bfloat16)
        elif k == "numpy":
            from nets.numpy_net import NumpyNet, _export_arrays

            net = NumpyNet(self.config, _export_arrays(model), {})
            def fn(x: np.ndarray):
                pol, val = net.forward(x)
                return pol.astype(np.float32, copy=False), val.astype(np.float32, copy=False)

            self._fn = fn
        elif k in ("ov", "ov_bf16"):
            self._fn = self._ov_fn(model)
        else:
            self._fn = self._ort_fn(model, int8=(k == "ort_int8"))

    @staticmethod
    def _torch_fn(net, channels_last: bool, dtype=torch.float32):
        fmt = torch.channels_last if channels_last else torch.contiguous_format

        def fn(x: np.ndarray):
            with torch.inference_mode():
                t = torch.from_numpy(x)
                if dtype != torch.float32:
                    t = t.to(dtype)
                if channels_last:
                    t = t.contiguous(memory_format=fmt)
                pol, val = net(t)
                return pol.float().numpy(), val.float().numpy()

        return fn

    def _ort_fn(self, model, int8: bool):
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable(f"backend {self.kind!r} needs ONNX Runtime: "
                                     "pip install onnxruntime onnx") from None
        onnx_bytes = export_onnx(model)
        if int8:
            onnx_bytes = quantize_int8(onnx_bytes, self.calibration or default_calibration())
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads > 0:
            so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx_bytes, so, providers=["CPUExecutionProvider"])

        def fn(x: np.ndarray):
            pol, val = sess.run(None, {"planes": np.ascontiguousarray(x, np.float32)})
            return pol, val

        return fn

    def _ov_fn(self, model):
        try:
            import openvino as ov
        except ImportError as e:  # absent, or installed but broken (the reason says which)
            raise BackendUnavailable(f"backend {self.kind!r} needs OpenVINO: pip install openvino "
                                     f"({type(e).__name__}: {e})") from None
        onnx_bytes = export_onnx(model)
        core = ov.Core()
        # the CPU plugin's default precision is bf16 on CPUs with bf16 units: say it always.
        # With threads > 1: one single-threaded stream per thread, each running its share of a
        # batch (measured on the AMX machine, b3c128nbt, 2 threads: 1.2x one 2-thread stream)
        streams = max(1, self.threads)
        props = {"INFERENCE_PRECISION_HINT": "bf16" if self.kind == "ov_bf16" else "f32",
                 "PERFORMANCE_HINT": "LATENCY" if streams == 1 else "THROUGHPUT",
                 "NUM_STREAMS": streams, "ENABLE_CPU_PINNING": False}
        if self.threads > 0:
            props["INFERENCE_NUM_THREADS"] = self.threads
        ov_model = core.read_model(onnx_bytes)
        try:
            compiled = core.compile_model(ov_model, "CPU", {**props, "CPU_RUNTIME_CACHE_CAPACITY": _OV_CACHE_CAPACITY})
        except RuntimeError as e:  # an internal property: a release may drop it
            log.warning("OpenVINO %s refused CPU_RUNTIME_CACHE_CAPACITY (%s): compiling with its default cache",
                        ov.__version__, " ".join(str(e).split())[:300] or type(e).__name__)
            compiled = core.compile_model(ov_model, "CPU", props)
        requests = [compiled.create_infer_request() for _ in range(streams)]
        self._ov_requests = requests  # forward_rows reads the streams, the tests the shapes run
        policy, value = compiled.output("policy"), compiled.output("value")
        nv = self.config.value_outputs

        def fn(x: np.ndarray):  # one caller at a time: the requests are shared
            x = np.ascontiguousarray(x, np.float32)
            plan = ov_batch_plan(len(x), streams)
            h, w = x.shape[2:]
            pol = np.empty((len(x), h * w), np.float32)
            val = np.empty((len(x), nv), np.float32)
            for wave in range(0, len(plan), streams):  # one part per stream at a time
                parts = plan[wave:wave + streams]
                started, held = [], []  # held: the padded arrays the requests read until the wait
                try:
                    for r, (lo, hi, rows) in zip(requests, parts):
                        part = x[lo:hi]  # a view; a padded part is copied once, into its own array
                        if rows > hi - lo:  # zero planes up to a shape already built
                            part = np.concatenate([part, np.zeros((rows - (hi - lo),) + x.shape[1:], np.float32)])
                        held.append(part)
                        r.start_async({0: part}, share_inputs=True)  # read in place, not copied again
                        started.append(r)
                except BaseException:  # never leave a request running into the next call
                    _wait_all(started, quiet=True)
                    raise
                _wait_all(started)
                for r, (lo, hi, rows) in zip(requests, parts):  # copied out: the output tensors are reused
                    p, v = r.get_tensor(policy).data, r.get_tensor(value).data
                    if p.shape not in ((rows, h, w), (rows, h * w)) or v.shape != (rows, nv):
                        raise BackendError(  # never broadcast a wrong answer into the result
                            f"engine {self.kind!r} answered policy {p.shape} and value {v.shape} for a part of "
                            f"{rows} positions of {h}x{w}; expected ({rows}, {h}, {w}) and ({rows}, {nv}): its "
                            f"runtime is broken on this machine (serve another engine, e.g. --forward fused)")
                    pol[lo:hi] = p.reshape(rows, h * w)[:hi - lo]
                    val[lo:hi] = v[:hi - lo]
            return pol, val

        return fn

    def forward_rows(self, n: int) -> list[int]:
        """The batch sizes one call on `n` positions runs in the engine: OpenVINO's padded
        parts (:func:`ov_batch_plan`), `n` itself for every other kind."""
        if self._ov_requests:  # an OpenVINO engine: one request per stream
            return [rows for _, _, rows in ov_batch_plan(n, len(self._ov_requests))]
        return [n]

    def settle_torch_threads(self) -> None:
        """Call in a process that serves this engine: torch goes to one thread where the
        engine computes on a pool of its own (:data:`OWN_THREADS`); not in the constructor,
        since ``--forward auto`` builds such engines beside torch ones it still times.
        :meth:`restore_torch_threads` undoes it (a server replacing this engine by a torch one)."""
        if self.kind in self.OWN_THREADS and self._torch_threads is None:
            self._torch_threads = torch.get_num_threads()
            torch.set_num_threads(1)

    def restore_torch_threads(self) -> None:
        """torch's thread count as it was before :meth:`settle_torch_threads` (no-op otherwise)."""
        if self._torch_threads is not None:
            torch.set_num_threads(self._torch_threads)
            self._torch_threads = None

    # ------------------------------------------------------------------ running
    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, C, H, W) float32 planes -> (policy logits (n, H*W), value logits (n, 3) or (n, 4)).
        :class:`BackendError` if the engine's answer has another shape."""
        pol, val = self._fn(planes)
        n, _, h, w = planes.shape
        nv = self.config.value_outputs
        if np.shape(pol) not in ((n, h * w), (n, h, w)) or np.shape(val) != (n, nv):
            raise BackendError(
                f"engine {self.kind!r} answered policy {np.shape(pol)} and value {np.shape(val)} for {n} "
                f"positions of {h}x{w}; expected ({n}, {h * w}) and ({n}, {nv}): its runtime is broken on "
                f"this machine (serve another engine, e.g. --forward fused)")
        return pol.reshape(n, h * w), val


def _wait_all(requests, quiet: bool = False) -> None:
    """Wait on every OpenVINO request, even after one raised; then raise the first error
    (none with `quiet`: another error is already on its way)."""
    err = None
    for r in requests:
        try:
            r.wait()
        except Exception as e:  # noqa: BLE001 - the others still run: wait on them first
            err = err or e
    if err is not None and not quiet:
        raise err


def export_onnx(model) -> bytes:
    """ONNX (opset 17) of `model`'s BN-folded eval forward with symbolic batch, height and
    width: input "planes" (b, C, h, w) float32; outputs "policy" (b, h, w), "value" (b, 3)
    ((b, 4) with the moves-left head). The last export is kept, keyed by the net's config
    and a digest of its state (the ONNX engines of one ``--forward auto`` share it)."""
    from nets.fused import FusedNet

    model = getattr(model, "_orig_mod", model)
    global _LAST_EXPORT
    key = _state_digest(model)
    last_key, last_data = _LAST_EXPORT  # one immutable pair: a concurrent export cannot mix two nets
    if last_key == key:
        return last_data
    data = _export_onnx(FusedNet.from_model(model))
    _LAST_EXPORT = (key, data)
    return data


_LAST_EXPORT: tuple = (None, b"")


def _state_digest(model) -> str:
    import hashlib

    h = hashlib.sha256(repr(model.config).encode())
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _export_onnx(net) -> bytes:
    x = torch.zeros(2, net.config.in_planes, 9, 10)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notes
        torch.onnx.export(net, (x,), buf, input_names=["planes"], output_names=["policy", "value"],
                          dynamic_axes={"planes": {0: "b", 2: "h", 3: "w"},
                                        "policy": {0: "b", 1: "h", 2: "w"}, "value": {0: "b"}},
                          dynamo=False, opset_version=17)
    return buf.getvalue()


def quantize_int8(onnx_bytes: bytes, batches) -> bytes:
    """Static int8 quantization (QDQ; int8 weights per output channel, uint8 activations,
    min/max calibration over `batches` of (n, C, H, W) float32 planes)."""
    import os
    import tempfile

    try:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError:
        raise BackendUnavailable("int8 quantization needs onnx and onnxruntime: "
                                 "pip install onnxruntime onnx") from None

    class _Reader(CalibrationDataReader):
        def __init__(self):
            self._it = iter([{"planes": np.ascontiguousarray(b, np.float32)} for b in batches])

        def get_next(self):
            return next(self._it, None)

    with tempfile.TemporaryDirectory(prefix="c4fast-int8-") as d:
        src, pre, dst = (os.path.join(d, n) for n in ("fp32.onnx", "pre.onnx", "int8.onnx"))
        with open(src, "wb") as f:
            f.write(onnx_bytes)
        root = logging.getLogger()
        level = root.level
        root.setLevel(max(level, logging.WARNING))  # the quantizer logs its steps at INFO on root
        try:
            quant_pre_process(src, pre, skip_symbolic_shape=True)
            import onnx

            # the input conv and the heads' 1x1 convs stay fp32: per-channel int8 weights of the
            # 0/1 input planes cost ~10x the error of all the trunk's convs together, the heads
            # another ~25 % (measured on the shipped net), for ~10 % of cpu_small's FLOPs
            keep = [n.name for n in onnx.load(pre).graph.node if n.op_type == "Conv"
                    and ("planes" in n.input or n.name.startswith(("/heads/", "/p_out/")))]
            quantize_static(pre, dst, _Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                            op_types_to_quantize=["Conv"], nodes_to_exclude=keep,
                            extra_options={"CalibTensorRangeSymmetric": False})
        finally:
            root.setLevel(level)
        with open(dst, "rb") as f:
            return f.read()

