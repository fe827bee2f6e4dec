"""The 6x7 yardstick of a player: how often it plays a perfect move on Pons's positions.

For every position of Pascal Pons's benchmark files (standard 6x7 board, no forbidden
cell) the exact solver computes the set of optimal columns (:meth:`Solver.best_moves`,
Pons's score convention: fastest win, slowest loss, else draw); the player's move
counts as optimal when it lies in that set.  Each record also gives the weaker
criterion of AlphaZero.jl's Pons benchmark, ``outcome_fraction``: the share of moves that
keep the position's game-theoretic result (a slower win still counts; in a lost position
every move does; :meth:`Solver.outcome_moves`).  One JSON line per file, then one line
with the totals::

    python -m selfplay.evaluation.solverbench --player greedy [--files PATH ...] [--limit 200]

``Test_L1_R3`` (opening positions with 29..40 moves left) takes minutes per position
to solve without an opening book, so the default file list skips it (a note goes to
stderr); name it with ``--files`` to include it.  Solving the ``L1`` positions takes
about twenty minutes on two cores, so the move sets of every position of the five default
files ship with the repository (``data/pons-connect4/solved_moves.tsv``, written by
``--export-solved``); positions not in it are solved and kept in a JSON cache
(``--cache``, default under ``$XDG_CACHE_HOME/c4fast``).  ``--no-cache`` uses neither.

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
from c4fast.runtime import atomic_write_bytes, atomic_write_json
from nets.players import make_player, spec_forms

DATA_DIR = sv.PONS_DIR
DEFAULT_FILES = ("Test_L3_R1", "Test_L2_R1", "Test_L2_R2", "Test_L1_R1", "Test_L1_R2")
SLOW_FILES = ("Test_L1_R3",)
CACHE_VERSION = 2  # 1 held best_moves only; it is still read
SOLVED_TABLE = DATA_DIR / "solved_moves.tsv"


class SolvedTableError(ValueError):
    """A malformed solved-move table."""


def read_solved_table(path: Path) -> dict[str, dict[str, list[int]]]:
    """The solved-move table: ``{kind: {pons moves: sorted 0-based columns}}``.

    One position per line, tab-separated: the Pons move string, then its optimal columns
    and its result-keeping columns, each as 1-based column digits (``4455\t37\t1357``).
    Lines starting with ``#`` are comments.
    """
    out: dict[str, dict[str, list[int]]] = {k: {} for k in BestMovesCache.KINDS}
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SolvedTableError(f"{path}: cannot read the solved-move table: {e}") from None
    for i, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t")
        ok = len(parts) == 3 and all(p.isdigit() or (j > 0 and p == "") for j, p in enumerate(parts))
        cols = [[int(ch) - 1 for ch in p] for p in parts[1:]] if ok else []
        if not ok or any(c < 0 or c > 6 for cs in cols for c in cs) or not cols[1] \
                or not set(cols[0]) <= set(cols[1]):
            raise SolvedTableError(f"{path}: line {i}: expected 'MOVES<TAB>BEST<TAB>KEEPING' with "
                                   f"columns 1..7 and BEST within KEEPING, got {line[:60]!r}")
        out["best_moves"][parts[0]] = sorted(cols[0])
        out["outcome_moves"][parts[0]] = sorted(cols[1])
    return out


def write_solved_table(path: Path, entries: dict[str, dict[str, list[int]]], header: str) -> None:
    """Write the table (see :func:`read_solved_table`) atomically, in the given move order."""
    lines = [f"# {h}" for h in header.splitlines()]
    lines.append("# moves\toptimal columns (Pons score)\tcolumns keeping the result (1-based)")
    for moves, kinds in entries.items():
        best, kept = ("".join(str(c + 1) for c in kinds[k]) for k in BestMovesCache.KINDS)
        lines.append(f"{moves}\t{best}\t{kept}")
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "c4fast" / "solverbench_best_moves.json"


class BestMovesCache:
    """Pons move string -> sorted 0-based columns, kept in a JSON file: the optimal ones
    (``best_moves``) and those keeping the result (``outcome_moves``)."""

    KINDS = ("best_moves", "outcome_moves")

    def __init__(self, path: Path | None, shipped: dict[str, dict[str, list[int]]] | None = None):
        self.path = path
        self.shipped = shipped or {k: {} for k in self.KINDS}  # read-only, never saved
        self.data: dict[str, dict[str, list[int]]] = {k: {} for k in self.KINDS}
        self.dirty = False
        if path is not None and path.is_file():
            try:
                raw = json.loads(path.read_text())
                if raw.get("version") in (1, CACHE_VERSION):
                    for kind in self.KINDS:
                        self.data[kind] = {k: list(v) for k, v in raw.get(kind, {}).items()}
            except (OSError, ValueError, KeyError, AttributeError, TypeError):
                self.data = {k: {} for k in self.KINDS}  # a damaged cache is rebuilt

    def get(self, solver: sv.Solver, moves: str, kind: str = "best_moves") -> list[int]:
        table = self.data[kind]
        hit = table.get(moves, self.shipped[kind].get(moves))
        if hit is None:
            hit = sorted(getattr(solver, kind)(sv.pons_game(moves)))
            table[moves] = hit
            self.dirty = True
        return hit

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            atomic_write_json(self.path, {"version": CACHE_VERSION, **self.data}, indent=None)
            self.dirty = False
        except OSError as e:
            print(f"note: could not write the cache {self.path}: {e}", file=sys.stderr)


PROGRESS_SECONDS = 30.0  # solving L1 positions takes minutes


def _progress(last: float, line: str) -> float:
    """Print `line` to stderr if PROGRESS_SECONDS have passed since `last` (perf_counter
    seconds); returns the time of the latest line."""
    now = time.perf_counter()
    if now - last <= PROGRESS_SECONDS:
        return last
    print(line, file=sys.stderr, flush=True)
    return now


def bench_player(player, path, limit: int | None, solver: sv.Solver,
                 cache: BestMovesCache) -> dict:
    """Fraction of the positions of one Pons file where `player` plays an optimal move
    (``fraction``) and a move that keeps the result (``outcome_fraction``)."""
    entries = sv.read_pons_file(path, limit)
    optimal = kept = 0
    t_player = 0.0
    t0 = last = time.perf_counter()
    for i, (moves, _) in enumerate(entries):
        last = _progress(last, f"{Path(path).name}: {i}/{len(entries)} positions")
        best = cache.get(solver, moves)
        g = sv.pons_game(moves)
        player.reset(g)
        t = time.perf_counter()
        col = player.choose(g)
        t_player += time.perf_counter() - t
        optimal += int(col) in best
        kept += int(col) in cache.get(solver, moves, "outcome_moves")
    n = len(entries)
    return {
        "file": Path(path).name,
        "player": getattr(player, "name", type(player).__name__),
        "positions": n,
        "optimal": optimal,
        "fraction": round(optimal / n, 4) if n else None,
        "outcome_optimal": kept,
        "outcome_fraction": round(kept / n, 4) if n else None,
        "player_seconds": round(t_player, 3),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def export_solved(path: Path, files: list[Path], limit: int | None, solver: sv.Solver,
                  cache: BestMovesCache) -> None:
    """Solve every position of `files` (cache-aware) and write the solved-move table."""
    entries: dict[str, dict[str, list[int]]] = {}
    for f in files:
        todo = sv.read_pons_file(f, limit)
        t0 = last = time.perf_counter()
        for i, (moves, _) in enumerate(todo, 1):
            entries[moves] = {k: cache.get(solver, moves, k) for k in BestMovesCache.KINDS}
            last = _progress(last, f"{f.name}: {i}/{len(todo)} positions solved")
        cache.save()
        print(json.dumps({"file": f.name, "positions": len(todo),
                          "seconds": round(time.perf_counter() - t0, 3)}), flush=True)
    header = ("Optimal and result-keeping columns of Pons's 6x7 positions, solved by "
              "c4fast.players.solver.\nWritten by: python -m selfplay.evaluation.solverbench --export-solved "
              f"PATH --limit {limit or 0} --files " + " ".join(f.name for f in files))
    write_solved_table(path, entries, header)
    print(json.dumps({"file": "all", "positions": len(entries), "table": str(path)}), flush=True)


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
        prog="python -m selfplay.evaluation.solverbench",
        description="Fraction of optimal moves of a player on Pons's 6x7 positions (JSON lines).",
    )
    who = ap.add_mutually_exclusive_group(required=True)
    who.add_argument("--player", metavar="SPEC", help=f"a player spec: {spec_forms()}")
    who.add_argument("--model", metavar="PATH",
                     help="a network (.pt, directory of checkpoints, or .npz): measured with its raw "
                          "policy and with --playouts MCGS playouts")
    who.add_argument("--export-solved", metavar="PATH", type=Path,
                     help="measure no player: solve every position of --files (within --limit) and "
                          f"write the solved-move table to PATH (the shipped one: {SOLVED_TABLE})")
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
                    help=f"cache of the solved move sets (default {default_cache_path()})")
    ap.add_argument("--solved-table", type=Path, default=SOLVED_TABLE,
                    help=f"solved-move table read before solving (default {SOLVED_TABLE}; "
                         "skipped where missing)")
    ap.add_argument("--no-cache", action="store_true",
                    help="solve every position: read neither the table nor the cache, write no cache")
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
        elif args.player is not None:
            players = [make_player(args.player, seed=args.seed)]
        else:
            players = []
        solver = sv.Solver(args.tt_log2)
        shipped = None
        if not args.no_cache and args.solved_table.is_file():
            shipped = read_solved_table(args.solved_table)
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
    cache = BestMovesCache(None if args.no_cache else (args.cache or default_cache_path()), shipped)
    try:
        for f in files:  # validate everything before the long run
            sv.read_pons_file(f, limit)
        if args.export_solved is not None:
            export_solved(args.export_solved, files, limit, solver, cache)
        for player in players:
            total = optimal = kept = 0
            for f in files:
                rec = bench_player(player, f, limit, solver, cache)
                cache.save()
                total += rec["positions"]
                optimal += rec["optimal"]
                kept += rec["outcome_optimal"]
                print(json.dumps(rec), flush=True)
            print(json.dumps({
                "file": "all", "player": getattr(player, "name", "?"), "positions": total,
                "optimal": optimal, "fraction": round(optimal / total, 4) if total else None,
                "outcome_optimal": kept,
                "outcome_fraction": round(kept / total, 4) if total else None,
            }), flush=True)
    except (sv.PonsFileError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
