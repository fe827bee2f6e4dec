"""The periodic evaluation of a training run: the newest checkpoint against fixed anchors.

Shared by ``selfplay.generation.loop`` and ``selfplay.cluster``: paired arena games of the net (MCGS
at ``EvalConfig.playouts``) against each anchor, appended to ``DIR/arena/games.jsonl``; an
Elo fit over every game so far (Davidson–Bradley–Terry with first-move advantage,
anchored at ``random`` when it is an anchor, else at the first anchor) written to ``DIR/ratings.json``; one row per
checkpoint in ``DIR/elo_curve.csv`` (step, samples, run seconds, Elo and its 95 % interval).
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import field

from c4fast.cli import opt
from c4fast.runtime import atomic_write_json

log = logging.getLogger("selfplay.evaluation.periodic")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """The loop's periodic evaluation of the newest checkpoint."""

    every_min: float = field(default=10.0, metadata=opt("minutes between evaluations"))
    pairs: int = field(default=8, metadata=opt("game pairs (colours swapped) per anchor"))
    playouts: int = field(default=100, metadata=opt("MCGS playouts per move of the net"))
    anchors: tuple[str, ...] = field(default=("random", "greedy", "uct:500"),
                                     metadata=opt("anchor player specs, comma separated"))
    workers: int = field(default=1, metadata=opt("arena processes"))

    def __post_init__(self):
        if not (math.isfinite(self.every_min) and self.every_min > 0):
            raise ValueError(f"eval.every_min must be > 0, got {self.every_min}")
        if self.pairs < 1 or self.playouts < 1 or self.workers < 1 or not self.anchors:
            raise ValueError("eval.pairs, eval.playouts, eval.workers must be >= 1 and anchors non-empty")



def rate_checkpoint(path: str, ev: EvalConfig, sizes, forbidden: bool, seed: int, run_dir: str,
                    samples: int, run_seconds: float, on_pair: Callable[[], None] | None = None) -> dict | None:
    """Play `path` against the anchors and refit; returns ``{step, elo, lo, hi, width}`` or
    None when the ratings cannot be fitted yet (the games are kept either way). ``on_pair``
    is called after each finished pair (the loop keeps its status lines going with it; an
    exception it raises stops the evaluation there). An evaluation cut short resumes: the
    pairs already in ``run_dir/arena/games.jsonl`` for this checkpoint are not played again.
    A games file with damaged lines is salvaged (``arena.salvage_games_file``: the original
    copied aside, the readable games kept), so one bad line never stops the ratings."""
    from nets.checkpoint import checkpoint_step
    from selfplay.evaluation.arena import play_match, records_to_resume, salvage_games_file
    from selfplay.evaluation.elo import fit_ratings, games_between

    arena = os.path.join(run_dir, "arena", "games.jsonl")
    os.makedirs(os.path.dirname(arena), exist_ok=True)
    step = checkpoint_step(path)
    spec = f"net:{path}:{ev.playouts}"
    t0 = time.monotonic()
    try:
        played = records_to_resume(arena)
    except ValueError:  # lines damaged inside the file: rate on with the rest, the original kept aside
        played, aside, damaged = salvage_games_file(arena)
        log.warning("%s had %d damaged line(s) (the first: line %d, %s): the original is kept as %s, "
                    "and the %d readable games stay in the file and in the fit", arena, len(damaged),
                    damaged[0][0], damaged[0][1], aside, len(played))
    for anchor in ev.anchors:
        done = games_between(played, spec, anchor) // 2
        if done >= ev.pairs:
            continue
        if done:
            log.info("step %d vs %s: %d of %d pairs were played by an evaluation cut short; playing the rest",
                     step, anchor, done, ev.pairs)
        # the missing pairs on fresh boards (another seed), as selfplay.evaluation.rate resumes
        played += play_match(spec, anchor, ev.pairs - done, workers=ev.workers,
                             seed=seed * 1_000_003 + step + 7919 * done, out_path=arena, sizes=sizes,
                             forbidden=forbidden, on_pair=on_pair)
    try:  # the file's records: those read above and those just appended
        ratings = fit_ratings(played, anchor="random" if "random" in ev.anchors else ev.anchors[0],
                              prior_games=1.0)
    except ValueError as e:
        log.warning("rating fit failed: %s", e)
        return None
    atomic_write_json(os.path.join(run_dir, "ratings.json"), ratings.to_dict())
    lo, hi = ratings.interval(spec)
    elo = ratings.elo[spec]
    curve = os.path.join(run_dir, "elo_curve.csv")
    new = not os.path.exists(curve)
    with open(curve, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["step", "samples", "wall_s", "elo", "elo_lo", "elo_hi", "checkpoint"])
        w.writerow([step, samples, round(run_seconds, 1), round(elo, 1), round(lo, 1), round(hi, 1), path])
        f.flush()
        os.fsync(f.fileno())
    log.info("evaluated step %d in %.0fs: Elo %.0f [%.0f, %.0f] (interval width %.0f) vs %s",
             step, time.monotonic() - t0, elo, lo, hi, hi - lo, ", ".join(ev.anchors))
    return {"step": step, "elo": round(elo, 1), "lo": round(lo, 1), "hi": round(hi, 1),
            "width": round(hi - lo, 1)}
