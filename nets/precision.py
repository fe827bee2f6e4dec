"""The CPU's arithmetic: which precisions it has, their matmul peaks, and the CPU forward
engine chosen by measurement (``--forward auto``).

Precisions: ``fp32`` (every x86-64 CPU), ``bf16`` (AVX512-BF16 or AMX-BF16: oneDNN runs
bf16 convolutions and matmuls on them; elsewhere bf16 is emulated and slower than fp32,
so it is refused), ``int8`` (VNNI — AVX512-VNNI, AVX-VNNI — or AMX-INT8). Engines (kinds
of :mod:`nets.backends`) serve one precision each (:data:`PRECISION_OF`).

:func:`choose_forward` starts the candidate engines the CPU supports, drops any that
fails its self-check against the eager fp32 forward, probes each with one call, and times
those within 1.5x of the best probe on the run's largest and smallest board sizes at the
server's batch and at a quarter of it (a server's forwards range between them), alternating
engines; it picks the fastest. The budget (5 s by default) bounds all of it in wall time,
approximately: engines are started fastest precision first (bf16, int8, fp32) and none
after 60 % of it has passed (once one passed its self-check), finalists whose timing would
not fit are left out (slowest first) or a lone one timed on fewer inputs, and rounds stop
when the next would overrun. A complete choice is cached per machine, net architecture,
threads, sizes and batch (``~/.cache/c4fast/forward.json``, or ``$C4FAST_CACHE_DIR``) so
that short commands do not pay for the timing twice. A choice the budget cut short is
cached as unfinished with the engines it tried and those it settled (timed on every input,
refused, or probed too slow): the next start goes on from it, starting the engines no start
has tried first, then the unsettled ones, then the best so far, and keeps the earlier
starts' figures for the engines it does not time (figures of different processes and
possibly of fewer inputs, compared as they are); after
:data:`AUTO_MAX_STARTS` starts the best so far is the choice (a slow machine pays the
budget at most that many times); starts running at once are each counted, and keep one
another's verdicts (the cache is read, merged and replaced under a lock). The cache holds
only choices and their tables, never weights (and the loop's measured role costs,
:mod:`selfplay.generation.cores`, through :func:`read_cache_entry`/:func:`write_cache_entry`).

Units: GFLOP/s counts a multiply-add as two operations (int8: GOP/s, same convention).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["PRECISIONS", "PRECISION_OF", "CpuInfo", "ForwardChoice", "PrecisionUnavailable", "choose_forward",
           "cpu_info", "matmul_peak", "roofline"]

PRECISIONS = ("fp32", "bf16", "int8")

#: The precision each CPU engine computes in.
PRECISION_OF = {"eager": "fp32", "fused": "fp32", "compiled": "fp32", "numpy": "fp32", "ort": "fp32",
                "bf16": "bf16", "ort_int8": "int8", "ov": "fp32", "ov_bf16": "bf16"}

#: CPU flags (as /proc/cpuinfo spells them) that make a precision native.
_NATIVE = {"fp32": (), "bf16": ("avx512_bf16", "amx_bf16"), "int8": ("avx512_vnni", "avx_vnni", "amx_int8")}


class PrecisionUnavailable(RuntimeError):
    """The CPU lacks the instructions of a precision (the message names them)."""


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """The processor: its model name and instruction-set flags."""

    model: str
    flags: frozenset[str]

    def has(self, precision: str) -> bool:
        """True when `precision` runs on native instructions here."""
        need = _NATIVE[precision]
        return not need or any(f in self.flags for f in need)

    def require(self, precision: str) -> None:
        """PrecisionUnavailable unless :meth:`has` `precision`."""
        if not self.has(precision):
            raise PrecisionUnavailable(
                f"this CPU ({self.model}) lacks {precision} instructions (needs one of "
                f"{', '.join(_NATIVE[precision])}); use --forward ort or fused (fp32)")

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(p for p in PRECISIONS if self.has(p))

    def to_dict(self) -> dict:
        keep = sorted(f for f in self.flags if f.startswith(("avx", "amx", "fma", "sse4")))
        return {"cpu_model": self.model, "cpu_flags": keep, "precisions": list(self.precisions)}


def cpu_info(path: str = "/proc/cpuinfo") -> CpuInfo:
    """The CPU's model and flags (Linux /proc/cpuinfo; elsewhere the platform's name and no
    flags, i.e. fp32 only)."""
    model, flags = platform.processor() or platform.machine(), frozenset()
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.processor(), platform.machine()):
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if flags and key == "model name":
                    break
    except OSError:
        pass
    return CpuInfo(model=model, flags=flags)


def matmul_peak(precision: str, threads: int, n: int = 2048, seconds: float = 1.0) -> float:
    """Measured GFLOP/s (int8: GOP/s) of an n x n x n matmul in `precision` on `threads`
    threads: the best of repeated runs within about `seconds`."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        g = torch.Generator().manual_seed(0)
        if precision == "int8":
            a = torch.randint(-100, 100, (n, n), dtype=torch.int8, generator=g)
            b = torch.randint(-100, 100, (n, n), dtype=torch.int8, generator=g)
            op = torch._int_mm
        else:
            dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
            a = torch.randn(n, n, generator=g).to(dtype)
            b = torch.randn(n, n, generator=g).to(dtype)
            op = torch.mm
        op(a, b)  # warm-up (oneDNN primitive creation)
        best, t_end = float("inf"), time.perf_counter() + seconds
        while True:
            t0 = time.perf_counter()
            op(a, b)
            best = min(best, time.perf_counter() - t0)
            if time.perf_counter() > t_end:
                break
        return 2.0 * n ** 3 / best / 1e9
    finally:
        torch.set_num_threads(old)


def roofline(threads: int, seconds: float = 1.0, use_cache: bool = False) -> dict:
    """{precision: peak GFLOP/s} for every precision this CPU runs natively (``peak_gflops``),
    with the machine (``cpu_model``, ``cpu_flags``) and ``best_peak`` (the largest). With
    `use_cache`, a measurement of this machine, thread count and torch is reused
    (``roofline.json`` beside the forward cache)."""
    import torch

    info = cpu_info()
    key = hashlib.sha256(json.dumps([info.model, sorted(info.flags), threads, torch.__version__]).encode()
                         ).hexdigest()[:32]
    path = _cache_path().with_name("roofline.json")
    if use_cache:
        hit = _read_json_dict(path).get(key)
        if isinstance(hit, dict) and "peak_gflops" in hit:
            return hit
    peaks = {p: round(matmul_peak(p, threads, seconds=seconds), 1) for p in info.precisions}
    out = {**info.to_dict(), "threads": threads, "peak_gflops": peaks, "best_peak": max(peaks.values())}
    if use_cache:
        _write_cache_entry(path, key, out)
    return out


def _read_json_dict(path: Path) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache_entry(path: Path, key: str, value: dict, merge=None) -> None:
    """Add `key` to the JSON cache at `path` (at most 64 entries, oldest dropped), atomically
    and under a lock (``path.lock``) held from reading the file to replacing it, so that
    processes writing at once lose none of each other's keys; with `merge`, the entry written
    is ``merge(the entry now under key or None, value)``. A cache that cannot be written is
    logged, never fatal."""
    from c4fast.runtime import atomic_write_json, held_lock

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with held_lock(str(path) + ".lock"):
            data = _read_json_dict(path)
            if merge is not None:
                current = data.get(key)
                value = merge(current if isinstance(current, dict) else None, value)
            data.pop(key, None)  # the newest entry goes last: the oldest are dropped first
            data[key] = value
            while len(data) > 64:
                data.pop(next(iter(data)))
            atomic_write_json(str(path), data)
    except OSError as e:
        log.warning("could not write the cache %s: %s", path, e)


# ------------------------------------------------------------------ the measured choice
@dataclasses.dataclass(frozen=True)
class ForwardChoice:
    """What ``--forward auto`` picked: `kind` (a :mod:`nets.backends` kind), its
    `precision`, `table` ({kind: evals/s, or the reason it was not eligible}), the
    seconds the choice took (this start's), whether it came from the cache, whether it is
    `complete` (every candidate settled: refused, probed too slow, or timed on every input,
    over all its `starts`), and the number of `starts` (processes) it took."""

    kind: str
    precision: str
    table: dict
    seconds: float
    cached: bool
    complete: bool = True
    starts: int = 1

    @property
    def final(self) -> bool:
        """Complete, or cut short :data:`AUTO_MAX_STARTS` times: the choice later starts reuse."""
        return self.complete or self.starts >= AUTO_MAX_STARTS

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: The engines ``auto`` considers, in order of preference on a tie.
AUTO_CANDIDATES = ("ort", "fused", "bf16", "ov", "ov_bf16", "ort_int8")

#: Starts (processes) over which ``auto`` goes on with a choice its budget cut short; the
#: last one's best is reused from then on, complete or not.
AUTO_MAX_STARTS = 3


def _cache_path() -> Path:
    root = os.environ.get("C4FAST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "c4fast")
    return Path(root) / "forward.json"


def _cache_key(config, threads: int, sizes, batch: int, candidates) -> str:
    import torch

    info = cpu_info()
    text = json.dumps([info.model, sorted(info.flags), config.to_dict() if hasattr(config, "to_dict")
                       else dataclasses.asdict(config), threads, [list(s) for s in sizes], batch,
                       list(candidates), torch.__version__, _runtime_versions(),
                       "probed, then timed at batch and batch/4"],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _runtime_versions() -> dict:
    """The installed versions of the engines' runtimes (None: absent): a choice cached with
    other runtimes (an upgrade, a removed openvino) is timed again, never reused."""
    from importlib import metadata

    out = {}
    for dist in ("onnxruntime", "openvino", "onnx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _read_cache() -> dict:
    return _read_json_dict(_cache_path())


def machine_key(parts=()) -> str:
    """A short hash naming this machine's CPU (model, flags) and torch version, plus `parts`
    (JSON-able): the key of measurements that hold for this machine only."""
    import torch

    info = cpu_info()
    text = json.dumps([info.model, sorted(info.flags), torch.__version__, list(parts)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def read_cache_entry(key: str) -> dict | None:
    """A measurement cached under `key` in the forward cache, or None."""
    hit = _read_cache().get(key)
    return hit if isinstance(hit, dict) else None


def write_cache_entry(key: str, value: dict) -> None:
    """Cache `value` under `key` (atomically; never fatal)."""
    _write_cache_entry(_cache_path(), key, value)


def _write_cache(key: str, choice: ForwardChoice, tried=(), settled=()) -> None:
    """Cache `choice`; an unfinished one (not :attr:`ForwardChoice.final`) with the engines
    its starts `tried` and those they `settled` (the next start does not time them again).
    Merged with an entry another start wrote meanwhile (:func:`_merge_starts`)."""
    entry = {"kind": choice.kind, "precision": choice.precision, "table": choice.table,
             "seconds": choice.seconds, "complete": choice.complete, "starts": choice.starts}
    if not choice.final:
        entry["tried"], entry["settled"] = sorted(tried), sorted(settled)
    _write_cache_entry(_cache_path(), key, entry, merge=_merge_starts)


def _count(v) -> int:
    """A cached count of starts (a positive int, not a bool), else 0."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 0


def _has_figure(entry: dict) -> bool:
    """Whether a cached choice's table holds a figure (evals/s) for its `kind`."""
    table, kind = entry.get("table"), entry.get("kind")
    return isinstance(table, dict) and isinstance(kind, str) and _is_speed(table.get(kind))


def _merge_starts(current: dict | None, new: dict) -> dict:
    """The entry to cache for a start whose choice is `new` when the cache now holds
    `current` under the same key. `new` counts the starts read before this one; a `current`
    with as many or more was written by another start meanwhile (starts running at once):
    - no such `current` (none, fewer starts, or no figure for its `kind`), or `new`
      complete: `new`;
    - `current` complete: it stays; else `new` at the last start: `new`; else `current` at
      the last start: it stays;
    - both unfinished: this start is counted after that one (``starts`` = its count + 1,
      final at :data:`AUTO_MAX_STARTS`, and then without its lists); as a next start keeps
      its prior's, the engines that one settled and this one did not keep that one's verdict
      or figure, and those left without a figure here keep that one's figure; `tried` and
      `settled` are the unions; `kind` is the fastest figure of the merged table."""
    theirs = _count(current.get("starts", 1)) if current is not None else 0
    if theirs < new["starts"] or not _has_figure(current) or new["complete"]:
        return new
    if current.get("complete", True) is not False:
        return current
    if new["starts"] >= AUTO_MAX_STARTS:
        return new
    if theirs >= AUTO_MAX_STARTS:
        return current
    table_now = current["table"]
    lists = [v if isinstance(v := current.get(k), list) else [] for k in ("tried", "settled")]
    theirs_settled = {k for k in lists[1] if isinstance(k, str) and k in table_now and k in new["table"]}
    table = dict(new["table"])  # every candidate of the key, in their order
    for kind in table:
        if kind in theirs_settled - set(new["settled"]):
            table[kind] = table_now[kind]
        elif not _is_speed(table[kind]) and kind not in new["settled"] and _is_speed(table_now.get(kind)):
            table[kind] = table_now[kind]
    speeds = {k: v for k, v in table.items() if _is_speed(v)}
    if not speeds:
        return new
    starts = theirs + 1
    settled = set(new["settled"]) | theirs_settled
    kind = max(speeds, key=lambda k: (speeds[k], -list(table).index(k)))
    merged = {**new, "kind": kind, "precision": PRECISION_OF[kind], "table": table, "starts": starts,
              "complete": set(table) <= settled}
    if merged["complete"] or starts >= AUTO_MAX_STARTS:
        merged.pop("tried", None)
        merged.pop("settled", None)
    else:
        merged["tried"] = sorted(set(new["tried"]) | {k for k in lists[0] if isinstance(k, str) and k in table})
        merged["settled"] = sorted(settled)
    return merged


def time_engines(engines: dict, inputs, deadline: float, clock=time.perf_counter) -> dict:
    """Positions per second of each engine of `engines` (kind -> callable on a planes batch)
    over `inputs`, timed in rounds (each round one input, every engine in turn): a first pass
    over every input, then further rounds while the next one (as long as that input's last
    round took) ends before `clock` reaches `deadline` (a lone engine: the first pass only).
    Each timed call comes right after an untimed call of the same engine on the same input
    (also the warm-up of a new shape): it follows its own engine, as in a server, never
    another engine whose threads may still spin after it returned (OpenMP's spin-wait)."""
    counts = {k: [0, 0.0] for k in engines}  # positions, seconds
    took = [0.0] * len(inputs)  # each input's last round, seconds by `clock`
    done = 0
    while done < len(inputs) or (len(engines) > 1 and clock() + took[done % len(inputs)] <= deadline):
        x = inputs[done % len(inputs)]
        t0 = clock()
        for kind, engine in engines.items():
            engine(x)
            t1 = clock()
            engine(x)
            counts[kind][0] += len(x)
            counts[kind][1] += clock() - t1
        took[done % len(inputs)] = clock() - t0
        done += 1
    return {k: round(n / max(seconds, 1e-12), 1) for k, (n, seconds) in counts.items()}


#: The share of ``auto``'s budget that starting and self-checking engines may use before the
#: remaining candidates are skipped (the rest is left for timing the finalists).
START_SHARE = 0.6


def _start_order(candidates, info) -> list:
    """`candidates` in the order ``auto`` starts them: the engines of the CPU's fastest
    native precision first (bf16, then int8, then fp32; the order of `candidates` within
    one), so that a start-up cut short by the budget skips the likely slower engines."""
    rank = {"bf16": 0, "int8": 1, "fp32": 2}
    return sorted(candidates, key=lambda k: (rank[PRECISION_OF[k]] if info.has(PRECISION_OF[k]) else 3,
                                             candidates.index(k)))


def plan_timing(finalists, pass_costs: dict, left: float) -> tuple[list, int]:
    """The finalists to time and on how many inputs, so that their first pass fits in `left`
    seconds: `finalists` fastest first, `pass_costs` {kind: estimated seconds per input}.
    Keeps the longest prefix of `finalists` whose passes over every input add up to at most
    `left` (the first always); a lone one is timed on the longest prefix of the inputs that
    fits (at least one). Returns (kept finalists, number of inputs)."""
    kept, total = list(finalists[:1]), sum(pass_costs[finalists[0]])
    for kind in finalists[1:]:
        total += sum(pass_costs[kind])
        if total > left:
            break
        kept.append(kind)
    per_input = pass_costs[kept[0]]
    if len(kept) > 1:
        return kept, len(per_input)
    n, used = 1, per_input[0]
    while n < len(per_input) and used + per_input[n] <= left:
        used, n = used + per_input[n], n + 1
    return kept, n


def _pass_cost(probe_s: float, probe, inputs) -> list:
    """Estimated seconds of one engine's two calls (untimed + timed) on each of `inputs`,
    from one timed call on `probe`: proportional to positions x board cells, with half a call
    more for the untimed call's preparing a new shape (measured: the plain estimate ran up to
    0.16 s past a 5 s budget)."""
    unit = probe_s / (len(probe) * probe.shape[2] * probe.shape[3])
    return [2.5 * unit * len(x) * x.shape[2] * x.shape[3] for x in inputs]


def choose_forward(model, sizes, batch: int, threads: int, candidates=AUTO_CANDIDATES,
                   budget_s: float = 5.0, use_cache: bool = True) -> ForwardChoice:
    """The fastest CPU engine for `model` on `sizes` at up to `batch` positions per forward
    (timed at `batch` and at a quarter of it), among `candidates` this CPU supports that pass
    their self-check (see the module docstring), within about `budget_s` seconds of wall time
    in all: engines are started (fastest precision first) until :data:`START_SHARE` of the
    budget has passed, and at least until one passes; finalists whose first pass over the
    inputs (estimated from their probe) does not fit in what is left are dropped, slowest
    first (the best stays, timed on as many inputs as fit, at least one); then rounds go on
    while the next one fits. A choice so cut short (`complete` False) is cached unfinished and
    the next start goes on from it (see the module docstring). It can still overrun: by the
    start-up of the last engine begun before the 60 % mark, by engines refused before one
    passes, by the best finalist's pass over one input, or where a call runs slower than
    estimated."""
    import torch

    from nets.backends import BackendUnavailable, CpuBackend, tolerance_of
    from nets.model import torch_wdl_outputs
    from nets.selfcheck import SelfCheckError, random_planes, self_check

    model = getattr(model, "_orig_mod", model).eval()
    config = model.config
    sizes = [tuple(s) for s in sizes] or [(12, 12)]
    key = _cache_key(config, threads, sizes, batch, candidates)
    prior: dict = {}  # an earlier start's choice that its budget cut short: go on from it
    if use_cache:
        hit = _read_cache().get(key)
        if isinstance(hit, dict) and hit.get("kind") in candidates and _has_figure(hit):  # else (a hand edit) afresh
            starts = _count(hit.get("starts", 1)) or 1
            choice = ForwardChoice(hit["kind"], PRECISION_OF[hit["kind"]], hit["table"], hit.get("seconds", 0.0),
                                   True, hit.get("complete", True) is not False, starts)
            if choice.final:
                return choice
            if isinstance(hit.get("settled"), list) and isinstance(hit.get("tried"), list):
                prior = {**hit, "starts": starts}  # else an unfinished entry without its lists: start afresh
    settled_before = {k for k in prior.get("settled", ()) if k in candidates and k in prior["table"]}
    tried_before = {k for k in prior.get("tried", ()) if k in candidates} | settled_before

    info = cpu_info()
    t_start = time.perf_counter()
    table: dict = {}
    # the sizes timed: the largest and the smallest board (the run's mix lies between)
    timed = sorted(set(sizes), key=lambda s: s[0] * s[1])
    timed = [timed[-1]] if len(timed) == 1 else [timed[-1], timed[0]]
    n = max(1, int(batch))
    # a server's forwards range from a few positions to `batch` (measured mean: about half of
    # it in the cpu loop): time calls of `batch` and of a quarter of it, alternating
    inputs = [random_planes(b, config.in_planes, h, w, seed=1).astype(np.float32)
              for h, w in timed for b in sorted({n, max(1, n // 4)})]

    references: dict = {}

    def reference(x):  # every engine checks on the same batches: compute each once
        key = (x.shape, hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest())
        if key not in references:
            with torch.inference_mode():
                x = np.asarray(x, np.float32)
                pol, val = model(torch.from_numpy(x))
                references[key] = (pol, torch_wdl_outputs(val, x.shape[2] * x.shape[3]))
        return references[key]

    # 1. start and self-check the candidates (fastest precision first) until START_SHARE of
    #    the budget has passed, and probe each with one call of the quarter batch on the largest
    #    size (after one untimed call); 2. time the ones within 1.5x of the best probe whose
    #    first pass fits in the rest (plan_timing), alternating engines, each timed call right
    #    after an untimed one of the same engine on the same input, while the next round fits
    deadline = t_start + budget_s
    engines, probe_s, probe = {}, {}, inputs[0]  # the largest size at the smaller batch
    settled = set()  # refused, probed too slow, or timed on every input: no need to start it again
    order = _start_order(candidates, info)
    if prior:  # engines no start tried, the unsettled ones never timed, the others, then the best so far
        timed_before = {k for k in candidates if _is_speed(prior["table"].get(k))}
        order = ([k for k in order if k not in tried_before]
                 + sorted((k for k in order if k in tried_before - settled_before), key=lambda k: k in timed_before)
                 + [k for k in order if k == prior["kind"] and k in settled_before])
    for kind in order:
        precision = PRECISION_OF[kind]
        if not info.has(precision):
            table[kind] = f"no {precision} instructions"
            settled.add(kind)
            continue
        if engines and time.perf_counter() - t_start > START_SHARE * budget_s:
            table[kind] = f"skipped: starting engines used {START_SHARE:.0%} of the {budget_s:g} s budget"
            continue
        try:
            be = CpuBackend(model, kind, threads=threads)
            for h, w in timed:
                self_check(f"{kind} forward", lambda x: _wdl(be(np.asarray(x, np.float32)), x.shape[2] * x.shape[3]),
                           reference, h, w, min(n, 32), config.in_planes, tolerance_of(kind))
            be(probe)  # warm-up: engines with dynamic shapes prepare each new shape on its first call
            t1 = time.perf_counter()
            be(probe)
        except (BackendUnavailable, SelfCheckError, PrecisionUnavailable, RuntimeError) as e:
            table[kind] = f"refused: {str(e)[:160]}"
            settled.add(kind)
            continue
        engines[kind] = be
        probe_s[kind] = time.perf_counter() - t1
        table[kind] = round(len(probe) / probe_s[kind], 1)
    if not engines:
        raise RuntimeError(f"no CPU forward engine passed its self-check: {table}")
    probed = {k: table[k] for k in engines}
    finalists = sorted((k for k in engines if probed[k] * 1.5 >= max(probed.values())), key=lambda k: -probed[k])
    for kind in set(probed) - set(finalists):
        table[kind] = f"probe {probed[kind]} evals/s: below 1/1.5 of the best"
        settled.add(kind)
    # every finalist's first pass over the inputs must fit in what is left of the budget
    timed_kinds, n_inputs = plan_timing(finalists, {k: _pass_cost(probe_s[k], probe, inputs) for k in finalists},
                                        deadline - time.perf_counter())
    for kind in set(finalists) - set(timed_kinds):
        table[kind] = f"probe {probed[kind]} evals/s: no time left to time it"
    if n_inputs == len(inputs):
        settled.update(timed_kinds)
    finalists, inputs = timed_kinds, inputs[:n_inputs]
    # a lone finalist too: its figure (the loop's core split reads it) spans the inputs timed,
    # every input unless the budget cut it short
    table.update(time_engines({k: engines[k] for k in finalists}, inputs, deadline))
    speeds = {k: table[k] for k in finalists}
    tried = tried_before | settled | set(engines)
    verdict = settled | set(speeds)  # this start's own verdicts: no instructions, refused, too slow, timed
    for kind in candidates:  # else earlier starts' figures, and their verdicts where this start started nothing
        before = prior.get("table", {}).get(kind)
        if kind in verdict or before is None:
            continue
        if _is_speed(before):
            table[kind] = speeds[kind] = before
        elif kind not in engines:
            table[kind] = before
    settled |= settled_before
    table = {k: table[k] for k in candidates if k in table}
    best = max(speeds, key=lambda k: (speeds[k], -candidates.index(k)))
    complete = set(candidates) <= settled
    choice = ForwardChoice(best, PRECISION_OF[best], table, round(time.perf_counter() - t_start, 2), False,
                           complete, prior.get("starts", 0) + 1)
    if not complete:
        log.info("forward auto: the %g s budget cut the choice short (start %d of at most %d; %s): %s", budget_s,
                 choice.starts, AUTO_MAX_STARTS, "final" if choice.final else "the next start goes on from it",
                 table)
    if use_cache:
        _write_cache(key, choice, tried, settled)
    return choice


def _is_speed(v) -> bool:
    """Whether a cached table entry is a figure (evals/s), not a verdict."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _wdl(out, cells: int | None = None):
    """(policy logits, value logits) -> (policy logits, WDL probabilities), with the
    moves-left estimate in plies as a 4th column where the net has the head (`cells`: H * W,
    needed then)."""
    pol, val = out
    v = np.asarray(val, np.float64)
    e = np.exp(v[:, :3] - v[:, :3].max(1, keepdims=True))
    wdl = e / e.sum(1, keepdims=True)
    if v.shape[1] == 4:
        if cells is None:
            raise ValueError("the moves-left output needs the board's cells")
        wdl = np.concatenate([wdl, np.maximum(v[:, 3:], 0.0) * cells], axis=1)
    return pol, wdl
