"""Shared-memory request/response slots between self-play workers and an inference server.

No torch here: workers import this module only.

Layout of one ``multiprocessing.shared_memory`` block::

    global header   int64[32]   MAGIC, PROTOCOL, num_slots, max_batch, num_planes,
                                server pid, heartbeat, model version, shutdown, reloads,
                                forward batches, positions evaluated, CUDA graphs captured,
                                FLOPs served, CPU forward nanoseconds, CPU engine, and the
                                forward batches by size (BATCH_HIST_BINS power-of-two bins)
    per slot s (num_slots of them, each 64-byte aligned):
      header        int64[8]    req_seq, resp_seq, count, height, width, status, client pid,
                                value width (3, or 4 for a net with the moves-left head)
      error text    uint8[256]  UTF-8 message when status != OK
      planes        uint8[max_batch * num_planes * 144]   (count, C, H, W) C-contiguous
      policy        float32[max_batch * 144]              (count, H, W) logits
      wdl           float32[max_batch * 4]                (count, K) win/draw/loss probabilities,
                                                          K = the slot's value width: with 4,
                                                          the moves-left estimate in plies last

Protocol (one outstanding request per slot): the worker writes planes, count and
size, then publishes with ``store_release(req_seq, req_seq + 1)`` and posts the
server's semaphore (the doorbell). The server reads ``req_seq`` with
``load_acquire``, evaluates, writes policy/wdl and the value width (or an error status), publishes with
``store_release(resp_seq, req_seq)`` and posts the slot's semaphore. The worker waits
on that semaphore in short slices and checks between slices that the server process
is still alive, so a dead server is an error within ~0.1 s instead of a hang. Planes
travel as uint8 (0/1): four times less memory traffic than float32.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from nets import _atomics

MAGIC = 0xC4FA57
PROTOCOL = 3  # 2: the wdl area holds MAX_VALUE_WIDTH floats per position, the header its width; 3: 32 header words
MAX_CELLS = 144  # 12 x 12
MIN_SIZE, MAX_SIZE = 4, 12
ERROR_BYTES = 256

# global header fields
G_MAGIC, G_PROTOCOL, G_SLOTS, G_MAX_BATCH, G_PLANES, G_SERVER_PID, G_HEARTBEAT = range(7)
G_MODEL_VERSION, G_SHUTDOWN, G_RELOADS, G_BATCHES, G_POSITIONS = 7, 8, 9, 10, 11
G_CAPTURES = 12  # CUDA graphs captured by the server so far (a hot reload adds none)
G_FLOPS = 13  # network FLOPs served so far (nets.fused.flops_per_eval per position)
G_BUSY_NS = 14  # CPU server: nanoseconds spent inside the forward so far
G_FORWARD = 15  # 1 + the index in nets.backends.BACKENDS of the forward the server serves (0: none yet)
G_BATCH_HIST = 16  # forward batches of 1, 2-3, 4-7, ..., 4096-8191, >= 8192 positions (BATCH_HIST_BINS words)
BATCH_HIST_BINS = 14
GLOBAL_WORDS = 32


def batch_bin(n: int) -> int:
    """The histogram bin of a forward batch of n >= 1 positions: floor(log2 n), at most the last."""
    return min(int(n).bit_length() - 1, BATCH_HIST_BINS - 1)
# slot header fields
S_REQ, S_RESP, S_COUNT, S_HEIGHT, S_WIDTH, S_STATUS, S_CLIENT_PID, S_VALUE_WIDTH = range(8)
SLOT_WORDS = 8
#: floats per position of a slot's wdl area: (win, draw, loss) and the moves-left estimate
#: of a net with that head (``NetConfig.moves_left``); a response fills the first
#: ``header[S_VALUE_WIDTH]`` (3 or 4) of them
MAX_VALUE_WIDTH = 4

STATUS_OK = 0
STATUS_BAD_REQUEST = 1
STATUS_SERVER_ERROR = 2


class ServerError(RuntimeError):
    """The inference server rejected a request, failed on it, or died."""


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class SlotLayout:
    """Byte offsets inside the block (derived from num_slots, max_batch, num_planes)."""

    num_slots: int
    max_batch: int
    num_planes: int

    @property
    def planes_bytes(self) -> int:
        return self.max_batch * self.num_planes * MAX_CELLS

    @property
    def slot_bytes(self) -> int:
        return _align(SLOT_WORDS * 8 + ERROR_BYTES + self.planes_bytes
                      + 4 * self.max_batch * MAX_CELLS + 4 * self.max_batch * MAX_VALUE_WIDTH)

    @property
    def total_bytes(self) -> int:
        return GLOBAL_WORDS * 8 + self.num_slots * self.slot_bytes

    def slot_offset(self, s: int) -> int:
        return GLOBAL_WORDS * 8 + s * self.slot_bytes


class SlotView:
    """numpy views of one slot (header, error text, planes, policy, wdl)."""

    def __init__(self, buf, layout: SlotLayout, s: int):
        off = layout.slot_offset(s)
        self.header = np.ndarray(SLOT_WORDS, np.int64, buf, off)
        off += SLOT_WORDS * 8
        self.error = np.ndarray(ERROR_BYTES, np.uint8, buf, off)
        off += ERROR_BYTES
        self.planes_flat = np.ndarray(layout.planes_bytes, np.uint8, buf, off)
        off += layout.planes_bytes
        self.policy_flat = np.ndarray(layout.max_batch * MAX_CELLS, np.float32, buf, off)
        off += 4 * layout.max_batch * MAX_CELLS
        self.wdl_flat = np.ndarray(layout.max_batch * MAX_VALUE_WIDTH, np.float32, buf, off)
        self.layout = layout

    def planes(self, n: int, h: int, w: int) -> np.ndarray:
        return self.planes_flat[: n * self.layout.num_planes * h * w].reshape(n, self.layout.num_planes, h, w)

    def policy(self, n: int, h: int, w: int) -> np.ndarray:
        return self.policy_flat[: n * h * w].reshape(n, h, w)

    def wdl(self, n: int, width: int = 3) -> np.ndarray:
        """(n, width) view: width 3 (win, draw, loss) or 4 (and the moves-left estimate)."""
        return self.wdl_flat[: n * width].reshape(n, width)

    def set_error(self, text: str) -> None:
        data = text.encode("utf-8", "replace")[: ERROR_BYTES - 1]
        self.error[:] = 0
        self.error[: len(data)] = np.frombuffer(data, np.uint8)

    def get_error(self) -> str:
        raw = bytes(self.error)
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


@dataclass
class QueueHandles:
    """Everything a process needs to attach: pass it to worker/server processes.

    Semaphores come from the multiprocessing context that starts those processes.
    """

    name: str
    layout: SlotLayout
    doorbell: object  # server's semaphore
    slot_bells: list  # one semaphore per slot


class SharedQueue:
    """Owner of the shared-memory block (the parent process creates it, then unlinks it)."""

    def __init__(self, ctx, num_slots: int, max_batch: int, num_planes: int):
        if num_slots < 1 or max_batch < 1 or num_planes < 1:
            raise ValueError(f"num_slots, max_batch and num_planes must be >= 1, got "
                             f"{num_slots}, {max_batch}, {num_planes}")
        self.layout = SlotLayout(int(num_slots), int(max_batch), int(num_planes))
        self.shm = shared_memory.SharedMemory(create=True, size=self.layout.total_bytes)
        hdr = np.ndarray(GLOBAL_WORDS, np.int64, self.shm.buf, 0)
        hdr[:] = 0
        hdr[G_MAGIC] = MAGIC
        hdr[G_PROTOCOL] = PROTOCOL
        hdr[G_SLOTS] = num_slots
        hdr[G_MAX_BATCH] = max_batch
        hdr[G_PLANES] = num_planes
        hdr[G_MODEL_VERSION] = -1
        for s in range(num_slots):
            np.ndarray(SLOT_WORDS, np.int64, self.shm.buf, self.layout.slot_offset(s))[:] = 0
        self.handles = QueueHandles(self.shm.name, self.layout, ctx.Semaphore(0),
                                    [ctx.Semaphore(0) for _ in range(num_slots)])

    def close(self) -> None:
        """Release and remove the block (the owner calls this once everyone is done)."""
        try:
            self.shm.close()
            self.shm.unlink()
        except FileNotFoundError:
            pass


def attach(handles: QueueHandles) -> shared_memory.SharedMemory:
    """Attach to an existing block (checks the magic number and protocol version)."""
    try:
        shm = shared_memory.SharedMemory(name=handles.name, create=False, track=False)
    except TypeError:
        # Python < 3.13 registers the block with the resource tracker, which our
        # processes share with the owner (all are multiprocessing children): the
        # registration is a set, and the owner's unlink removes it.
        shm = shared_memory.SharedMemory(name=handles.name, create=False)
    hdr = np.ndarray(GLOBAL_WORDS, np.int64, shm.buf, 0)
    if hdr[G_MAGIC] != MAGIC or hdr[G_PROTOCOL] != PROTOCOL:
        shm.close()
        raise ServerError(f"shared memory {handles.name!r} is not a c4fast queue of protocol {PROTOCOL}")
    return shm


def process_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie (Linux /proc; falls back to kill(0))."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True


class InferenceClient:
    """A worker's end of one slot. `evaluate` blocks until the server answers.

    Implements the c4fast evaluator contract (`evaluate(planes, positions)`), so a
    BatchedMCTS can search with it directly; `planes_buffer` returns a view into the
    slot so the search writes its leaves straight into shared memory (no copy).
    """

    def __init__(self, handles: QueueHandles, slot: int, wait_slice: float = 0.05,
                 start_timeout: float = 60.0):
        if not 0 <= slot < handles.layout.num_slots:
            raise ValueError(f"slot {slot} out of range 0..{handles.layout.num_slots - 1}")
        self.handles = handles
        self.slot = slot
        self.layout = handles.layout
        self.shm = attach(handles)
        self.global_hdr = np.ndarray(GLOBAL_WORDS, np.int64, self.shm.buf, 0)
        self.view = SlotView(self.shm.buf, self.layout, slot)
        self.view.header[S_CLIENT_PID] = os.getpid()
        self.wait_slice = wait_slice
        self.start_timeout = start_timeout
        self._seq = int(_atomics.load_acquire(self.view.header, S_REQ))
        self.requests = 0
        self.positions_sent = 0
        self._pending: tuple[int, int, int] | None = None  # (n, h, w) of the request in flight

    @property
    def max_batch(self) -> int:
        return self.layout.max_batch

    @property
    def model_version(self) -> int:
        return int(self.global_hdr[G_MODEL_VERSION])

    def planes_buffer(self, height: int, width: int) -> np.ndarray:
        """A (max_batch, C, height, width) uint8 view of this slot's input area."""
        self._check_size(height, width)
        return self.view.planes(self.layout.max_batch, height, width)

    def _check_size(self, height, width):
        if not (MIN_SIZE <= height <= MAX_SIZE and MIN_SIZE <= width <= MAX_SIZE):
            raise ValueError(f"board size {height}x{width} outside {MIN_SIZE}..{MAX_SIZE}")

    def evaluate(self, planes: np.ndarray, positions=None):
        """Send n = len(planes) positions; returns (policy logits (n, H, W), wdl (n, 3)),
        or wdl (n, 4) when the server's net has the moves-left head (its estimate in plies last).

        The returned arrays are views into shared memory, valid until the next call.
        """
        self.submit(planes)
        return self.collect()

    def submit(self, planes: np.ndarray) -> None:
        """The first half of :meth:`evaluate`: send the request and return at once (the
        caller may work meanwhile; one request in flight per slot, then :meth:`collect`)."""
        if self._pending is not None:
            raise RuntimeError("a request is already in flight on this slot: collect() it first")
        n, c, h, w = planes.shape
        self._check_size(h, w)
        if c != self.layout.num_planes:
            raise ValueError(f"planes have {c} channels, the server expects {self.layout.num_planes}")
        if not 1 <= n <= self.layout.max_batch:
            raise ValueError(f"request of {n} positions; this slot holds 1..{self.layout.max_batch}")
        dst = self.view.planes(n, h, w)
        if not (planes.__array_interface__["data"][0] == dst.__array_interface__["data"][0]
                and planes.dtype == np.uint8):
            dst[...] = planes
        hdr = self.view.header
        hdr[S_COUNT] = n
        hdr[S_HEIGHT] = h
        hdr[S_WIDTH] = w
        hdr[S_STATUS] = STATUS_OK
        self._seq += 1
        _atomics.store_release(hdr, S_REQ, self._seq)
        self.handles.doorbell.release()
        self._pending = (n, h, w)

    def collect(self):
        """The second half of :meth:`evaluate`: wait for the answer of the request in flight;
        returns (policy logits (n, H, W), wdl (n, K)), views valid until the next request."""
        if self._pending is None:
            raise RuntimeError("no request in flight on this slot")
        n, h, w = self._pending
        hdr = self.view.header
        self._wait()
        self._pending = None
        status = int(hdr[S_STATUS])
        if status != STATUS_OK:
            raise ServerError(f"inference server rejected the request: {self.view.get_error()}")
        self.requests += 1
        self.positions_sent += n
        width = int(hdr[S_VALUE_WIDTH])
        if width not in (3, MAX_VALUE_WIDTH):
            raise ServerError(f"inference server answered with value width {width}, not 3 or {MAX_VALUE_WIDTH}")
        return self.view.policy(n, h, w), self.view.wdl(n, width)

    def _wait(self) -> None:
        bell = self.handles.slot_bells[self.slot]
        hdr = self.view.header
        started = time.monotonic()
        while True:
            if _atomics.load_acquire(hdr, S_RESP) == self._seq:
                return
            bell.acquire(timeout=self.wait_slice)
            if _atomics.load_acquire(hdr, S_RESP) == self._seq:
                return
            pid = int(self.global_hdr[G_SERVER_PID])
            if self.global_hdr[G_SHUTDOWN]:
                raise ServerError("inference server is shutting down")
            if pid == 0:
                if time.monotonic() - started > self.start_timeout:
                    raise ServerError(f"inference server did not start within {self.start_timeout:.0f} s")
                continue
            if not process_alive(pid):
                raise ServerError(f"inference server (pid {pid}) died")

    def close(self) -> None:
        try:
            self.shm.close()
        except BufferError:
            pass  # views still alive; the mapping is released with the process
