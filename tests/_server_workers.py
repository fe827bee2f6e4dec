"""Worker-process entry points for tests/test_server.py (must be importable by spawn)."""

import os
import time

import numpy as np


def eval_worker(handles, slot, h, w, rounds, seed, out_queue):
    from nets.shm_queue import InferenceClient

    c = InferenceClient(handles, slot)
    rng = np.random.default_rng(seed)
    results = []
    for r in range(rounds):
        n = int(rng.integers(1, 40))
        x = (rng.random((n, 9, h, w)) < 0.3).astype(np.uint8)
        pol, wdl = c.evaluate(x)
        results.append((x, pol.copy(), wdl.copy()))
    out_queue.put((slot, results))


def hang_worker(handles, slot, ready):
    """Sends one request and then sits; the test kills it with SIGKILL."""
    from nets.shm_queue import InferenceClient

    c = InferenceClient(handles, slot)
    ready.set()
    x = np.zeros((3, 9, 6, 7), np.uint8)
    while True:
        c.evaluate(x)
        time.sleep(0.001)


def pid():
    return os.getpid()


def server_error_worker(spec, handles, stop_event, reports):
    """Stands in for selfplay.generation.worker.worker_main when the server refuses every request."""
    from selfplay.generation.worker import SERVER_ERROR_EXIT

    reports.send(("error", spec.index, spec.restart, "inference server rejected the request: boom"))
    raise SystemExit(SERVER_ERROR_EXIT)


def chatty_worker(spec, handles, stop_event, reports):
    """Stands in for worker_main: sends `spec.messages` running totals of `spec.size` bytes
    each (large enough that a pipe delivers each in many reads), then exits. With
    ``spec.gate`` (a path) it waits after its first message until that file exists."""
    for i in range(spec.messages):
        reports.send(("stats", spec.index, spec.restart, {"games": i + 1, "blob": b"x" * spec.size}))
        while i == 0 and spec.gate and not os.path.exists(spec.gate):
            time.sleep(0.005)
