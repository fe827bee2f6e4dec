"""How the loop splits this machine's cores between its roles, from measured speeds.

A loop on one machine runs three kinds of work, all on the CPU when there is no GPU: the
inference server's forward passes, the workers' search (selection, encoding, backup) and
the trainer. Per generated sample they cost, in core-seconds::

    server  = E * s_forward       E: network evaluations per recorded sample
    search  = E * s_search        s_forward, s_search: core-seconds per evaluation
    trainer = R * s_train         R: trained samples per generated one (the preset's ratio)
                                  s_train: core-seconds per trained sample

so with C cores a balanced loop gives each role its share of C in proportion to its cost
(:func:`split_cores`). The costs are measured on the machine that runs (:func:`measure_costs`,
a few seconds, cached per machine and net in the forward cache of :mod:`nets.precision`):
the forward with the engine the server will use (``forward auto`` chooses it by measurement;
one thread, the server's batch), the search by a second of self-play with a uniform
evaluator (which also gives E), the trainer by a few steps on synthetic data in the
trainer's precision on one thread.

Threads are whole numbers and small nets do not scale linearly with threads, so the split
is a plan, not a guarantee; the loop's status line shows the cores each role really uses.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time

log = logging.getLogger("selfplay.generation.cores")


@dataclasses.dataclass(frozen=True)
class RoleCosts:
    """Measured costs on this machine (core-seconds) and evaluations per recorded sample."""

    forward_s_per_eval: float
    search_s_per_eval: float
    train_s_per_sample: float
    evals_per_sample: float
    forward: str = ""  # the engine timed (nets.backends kind)

    def __post_init__(self):
        for f in ("forward_s_per_eval", "search_s_per_eval", "train_s_per_sample", "evals_per_sample"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"RoleCosts.{f} must be a finite number > 0, got {v!r}")

    def per_sample(self, ratio: float) -> dict:
        """Core-seconds per generated sample by role ({'server', 'search', 'trainer'})."""
        e = self.evals_per_sample
        return {"server": e * self.forward_s_per_eval, "search": e * self.search_s_per_eval,
                "trainer": ratio * self.train_s_per_sample}


@dataclasses.dataclass(frozen=True)
class CoreSplit:
    """Whole-number role sizes for a run and the fractional shares they came from."""

    workers: int
    server_threads: int
    train_threads: int
    shares: dict  # {role: cores} summing to the cores split
    samples_per_s: float  # the balanced loop's expected generated samples/s (all cores busy)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def split_cores(cores: int, costs: RoleCosts, ratio: float) -> CoreSplit:
    """The split of `cores` that lets every role keep up with the others at `ratio`
    trained per generated samples: each role's share is proportional to its cost per
    generated sample. Server and trainer threads are the shares rounded to whole cores
    (at least 1 each; together at most `cores` when there are 2 or more); workers are the
    search share rounded up (a worker is a process that mostly waits for the server, so
    it never gets less than 1 and the search rarely needs more than a fraction of a core)."""
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be an integer >= 1, got {cores!r}")
    if not (math.isfinite(ratio) and ratio >= 0):
        raise ValueError(f"ratio must be a finite number >= 0, got {ratio!r}")
    cost = costs.per_sample(ratio)
    total = sum(cost.values())
    shares = {k: cores * v / total for k, v in cost.items()}
    server = max(1, round(shares["server"]))
    train = max(1, round(shares["trainer"])) if ratio > 0 else 1
    if cores >= 2:
        while server + train > cores:  # give back from the role with the most rounding gain
            if server - shares["server"] >= train - shares["trainer"] and server > 1:
                server -= 1
            elif train > 1:
                train -= 1
            else:
                server -= 1
    workers = max(1, math.ceil(shares["search"] - 1e-9))
    return CoreSplit(workers=workers, server_threads=server, train_threads=train,
                     shares={k: round(v, 3) for k, v in shares.items()}, samples_per_s=round(cores / total, 2))


def _search_cost(search, policy, sizes, seconds: float, seed: int) -> tuple[float, float]:
    """(core-seconds of search per evaluation, evaluations per recorded sample) from
    about `seconds` of self-play with a uniform evaluator on the largest board of `sizes`
    (its games run to the end, so openings and tree reuse count as in a run)."""
    from c4fast.evaluators import UniformEvaluator
    from selfplay.generation.worker import SelfPlayEngine

    h, w = max(sizes, key=lambda s: s[0] * s[1])
    eng = SelfPlayEngine(UniformEvaluator(), search, policy, h, w, num_games=32, seed=seed)
    samples = [0]

    def on_game(game, smp):
        samples[0] += len(smp)

    eng.play(1, on_game)  # compile / warm up (Numba caches make this quick after the first run)
    eng.stats = type(eng.stats)()
    samples[0] = 0
    t0, c0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds
    eng.play(10**9, on_game, should_stop=lambda: time.perf_counter() > deadline and samples[0] > 0)
    cpu = time.process_time() - c0
    evals = max(1, eng.stats.evals)
    return cpu / evals, evals / max(1, samples[0])


def measure_costs(net_preset: str, sizes, search, policy, forward: str, batch: int, train_precision: str,
                  per_size: int, seconds: float = 1.5, use_cache: bool = True) -> RoleCosts:
    """:class:`RoleCosts` of this machine for a loop of `net_preset` on `sizes` (see the
    module docstring); cached like the forward choice (``nets.precision``)."""
    import torch

    from nets.config import get_preset
    from nets.model import build_model
    from nets.precision import AUTO_CANDIDATES, choose_forward, machine_key, read_cache_entry, write_cache_entry
    from nets.train import bench as train_bench

    sizes = [tuple(s) for s in sizes]
    key = "cores:" + machine_key([net_preset, sizes, dataclasses.asdict(search), dataclasses.asdict(policy),
                                  forward, batch, train_precision, per_size])
    if use_cache:
        hit = read_cache_entry(key)
        if hit:
            try:
                return RoleCosts(**hit)
            except (TypeError, ValueError):
                pass
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t0 = time.perf_counter()
        model = build_model(get_preset(net_preset))
        candidates = AUTO_CANDIDATES if forward == "auto" else (forward,)
        choice = choose_forward(model, sizes, batch, 1, candidates=candidates, use_cache=use_cache)
        fwd = choice.table[choice.kind]
        search_s, evals_per_sample = _search_cost(search, policy, sizes, seconds, seed=1)
        tr = train_bench(net_preset, steps=3, per_size=per_size, sizes=sizes[:4], precision=train_precision)
        costs = RoleCosts(forward_s_per_eval=1.0 / fwd, search_s_per_eval=search_s,
                          train_s_per_sample=1.0 / tr["samples_per_s"], evals_per_sample=evals_per_sample,
                          forward=choice.kind)
        log.info("measured role costs in %.1f s: %s", time.perf_counter() - t0, costs)
    finally:
        torch.set_num_threads(threads)
    if use_cache and choice.final:  # a forward choice the budget cut short: measure again next time
        write_cache_entry(key, dataclasses.asdict(costs))
    return costs


def main(argv=None) -> int:
    """`python -m selfplay.generation.cores [--preset cpu]`: the role costs of a loop preset on
    this machine and its split for several core counts, as one JSON line (a benchmark)."""
    import argparse
    import json

    from c4fast.board import RULES
    from c4fast.runtime import setup_logging
    from nets.precision import cpu_info
    from selfplay.generation.loop import PRESETS

    ap = argparse.ArgumentParser(prog="python -m selfplay.generation.cores", description=main.__doc__)
    ap.add_argument("--preset", default="cpu", choices=sorted(k for k, v in PRESETS.items() if v.selfplay.gpus == 0))
    ap.add_argument("--cores", default="1,2,4,8,16", help="core counts to split (comma-separated)")
    ap.add_argument("--no-cache", action="store_true", help="measure again instead of reading the cache")
    args = ap.parse_args(argv)
    setup_logging()
    try:
        counts = [int(c) for c in args.cores.split(",")]
    except ValueError:
        ap.error(f"--cores {args.cores!r}: give integers like 1,2,4")
    cfg = PRESETS[args.preset]
    sp, tr = cfg.selfplay, cfg.train
    sizes = RULES.parse_sizes(cfg.sizes)  # the loop's sizes (the children get them from it)
    costs = measure_costs(cfg.net, sizes, sp.search, sp.selfplay, sp.forward,
                          min(256, (sp.games_per_worker or 32) * sp.search.leaves_per_step),
                          tr.train.resolved_precision(), tr.train.per_size, use_cache=not args.no_cache)
    info = cpu_info()
    out = {"bench": "cores", "preset": args.preset, "net": cfg.net, "cpu_model": info.model,
           "cpu_flags": sorted(f for f in info.flags if f.startswith(("avx", "amx"))), "usable_cores": usable_cores(),
           "costs": dataclasses.asdict(costs), "ratio": tr.train.ratio,
           "per_sample_ms": {k: round(v * 1e3, 3) for k, v in costs.per_sample(tr.train.ratio).items()},
           "splits": {str(c): split_cores(c, costs, tr.train.ratio).to_dict() for c in counts}}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
