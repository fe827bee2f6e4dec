"""The 6x7 yardstick of a player: how often it plays a perfect move on Pons's positions.

For every position of Pascal Pons's benchmark files (standard 6x7 board, no forbidden
cell) the exact solver computes the set of optimal columns (:meth:`Solver.best_moves`,
Pons's score convention: fastest win, slowest loss, else draw); the player's move
counts as optimal when it lies in that set.  One JSON line per file, then one line
with the totals::

    python -m selfplay.solverbench --player greedy [--files PATH ...] [--limit 200]

``Test_L1_R3`` (opening positions with 29..40 moves left) takes minutes per position
to solve without an opening book, so the default file list skips it (a note goes to
stderr); name it with ``--files`` to include it.  Optimal move sets are cached in a
JSON file (``--cache``, default under ``$XDG_CACHE_HOME/c4fast``) because solving the
``L1`` positions dominates the run time.

``--player SPEC`` measures any :func:`nets.players.make_player` spec; ``--model PATH``
measures a network twice, as its raw policy and with MCGS at ``--playouts``. The files
are the repository's copy in ``data/pons-connect4/``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from c4fast.players import solver as sv
from c4fast.runtime import atomic_write_json
from nets.players import SPEC_FORMS, make_player

DATA_DIR = sv.PONS_DIR
DEFAULT_FILES = ("Test_L3_R1", "Test_L2_R1", "Test_L2_R2", "Test_L1_R1", "Test_L1_R2")
SLOW_FILES = ("Test_L1_R3",)
CACHE_VERSION = 1


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "c4fast" / "solverbench_best_moves.json"


class BestMovesCache:
    """Pons move string -> sorted optimal 0-based columns, kept in a JSON file."""

    def __init__(self, path: Path | None):
        self.path = path
        self.data: dict[str, list[int]] = {}
        self.dirty = False
        if path is not None and path.is_file():
            try:
                raw = json.loads(path.read_text())
                if raw.get("version") == CACHE_VERSION:
                    self.data = {k: list(v) for k, v in raw["best_moves"].items()}
            except (OSError, ValueError, KeyError, AttributeError):
                self.data = {}  # a damaged cache is rebuilt

    def get(self, solver: sv.Solver, moves: str) -> list[int]:
        hit = self.data.get(moves)
        if hit is None:
            hit = sorted(solver.best_moves(sv.pons_game(moves)))
            self.data[moves] = hit
            self.dirty = True
        return hit

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            atomic_write_json(self.path, {"version": CACHE_VERSION, "best_moves": self.data}, indent=None)
            self.dirty = False
        except OSError as e:
            print(f"note: could not write the cache {self.path}: {e}", file=sys.stderr)


def bench_player(player, path, limit: int | None, solver: sv.Solver,
                 cache: BestMovesCache) -> dict:
    """Fraction of the positions of one Pons file where `player` plays an optimal move."""
    entries = sv.read_pons_file(path, limit)
    optimal = 0
    t_player = 0.0
    t0 = time.perf_counter()
    for moves, _ in entries:
        best = cache.get(solver, moves)
        g = sv.pons_game(moves)
        player.reset(g)
        t = time.perf_counter()
        col = player.choose(g)
        t_player += time.perf_counter() - t
        optimal += int(col) in best
    n = len(entries)
    return {
        "file": Path(path).name,
        "player": getattr(player, "name", type(player).__name__),
        "positions": n,
        "optimal": optimal,
        "fraction": round(optimal / n, 4) if n else None,
        "player_seconds": round(t_player, 3),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def make_model_players(path: str, playouts: int) -> list:
    """The network at `path` as two players: raw policy only, and MCGS with `playouts`."""
    import os

    from nets.netplayer import load_evaluator

    if not os.path.exists(path):
        raise ValueError(f"--model {path!r} does not exist")
    if playouts < 1:
        raise ValueError(f"--playouts must be >= 1, got {playouts}")
    ev = load_evaluator(path)  # shared by both players
    name = os.path.basename(path.rstrip("/"))
    players = [make_player(f"net:{path}:policy", evaluator=ev), make_player(f"net:{path}:{playouts}", evaluator=ev)]
    players[0].name, players[1].name = f"net:{name}:policy", f"net:{name}:{playouts}"
    return players


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m selfplay.solverbench",
        description="Fraction of optimal moves of a player on Pons's 6x7 positions (JSON lines).",
    )
    who = ap.add_mutually_exclusive_group(required=True)
    who.add_argument("--player", metavar="SPEC", help=f"a player spec: {SPEC_FORMS}")
    who.add_argument("--model", metavar="PATH",
                     help="a network (.pt, directory of checkpoints, or .npz): measured with its raw "
                          "policy and with --playouts MCGS playouts")
    ap.add_argument("--playouts", type=int, default=200, help="MCGS playouts for --model (default 200)")
    ap.add_argument("--files", nargs="+", metavar="PATH",
                    help="Pons files (default: every file in the data directory but "
                         + ", ".join(SLOW_FILES) + ")")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR,
                    help=f"directory of the default files (default {DATA_DIR})")
    ap.add_argument("--limit", type=int, default=200, metavar="N",
                    help="positions per file (default 200; 0 = all)")
    ap.add_argument("--seed", type=int, default=0, help="the player's seed (default 0)")
    ap.add_argument("--cache", type=Path, default=None,
                    help=f"best-move cache file (default {default_cache_path()})")
    ap.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    ap.add_argument("--tt-log2", type=int, default=sv.DEFAULT_TT_LOG2,
                    help="solver transposition table of about 2**N entries")
    args = ap.parse_args(argv)
    if args.limit < 0:
        print("error: --limit must be >= 0", file=sys.stderr)
        return 2
    limit = args.limit or None
    try:
        if args.model is not None:
            players = make_model_players(args.model, args.playouts)
        else:
            players = [make_player(args.player, seed=args.seed)]
        solver = sv.Solver(args.tt_log2)
    except (ValueError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.files:
        files = [Path(f) for f in args.files]
    else:
        files = [args.data_dir / name for name in DEFAULT_FILES]
        print(
            f"note: skipping {', '.join(SLOW_FILES)} (too slow to solve without an opening "
            "book); pass it with --files to include it",
            file=sys.stderr,
        )
    cache = BestMovesCache(None if args.no_cache else (args.cache or default_cache_path()))
    try:
        for f in files:  # validate everything before the long run
            sv.read_pons_file(f, limit)
        for player in players:
            total = optimal = 0
            for f in files:
                rec = bench_player(player, f, limit, solver, cache)
                cache.save()
                total += rec["positions"]
                optimal += rec["optimal"]
                print(json.dumps(rec), flush=True)
            print(json.dumps({
                "file": "all", "player": getattr(player, "name", "?"), "positions": total,
                "optimal": optimal, "fraction": round(optimal / total, 4) if total else None,
            }), flush=True)
    except sv.PonsFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
