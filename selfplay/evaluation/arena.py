"""`python -m selfplay.evaluation.arena`: matches between two players as paired games.

Each pair is played on one random Saiblo board (size and forbidden cell drawn from the
pair's seed) twice, with colours swapped, so board luck and the first-move advantage
cancel. Standard boards (``--forbidden none``) have no board luck to vary the games, so
each pair starts after a random opening of ``--opening-plies`` uniform legal moves
(default 4 there, 0 with a forbidden cell), the same for both games of the pair: without
it two deterministic players replay one game pair over and over. Pairs run in parallel
processes; every game is appended to a JSON-lines file (``first``, ``second``, ``result``
0 draw / 1 first won / 2 second won, board, moves, ``opening``), the format selfplay.evaluation.elo
reads. Prints a results table with the score of player A and
its 95 % confidence interval, and the games' final board fill (mean and histogram with
``--json``: selfplay.evaluation.fill, which also reads the ``--out`` file).

Player specs are listed below (``c4fast players``; c4fast.players.registry). PATH of a
``net:`` player is a .pt checkpoint, a directory of checkpoints (the newest is used) or a
.npz numpy export. ``--forward`` picks what computes the nets (default: OpenVINO bf16
for .pt on CPUs with bf16 units, else ONNX Runtime; numpy for .npz; ``eager``: torch).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable

import numpy as np

import c4fast
from c4fast.board import RULES
from c4fast.runtime import check_interrupt
from nets.config import PLAY_FORWARDS
from c4fast.players.registry import spec_help
from nets.players import make_player
from selfplay.evaluation.fill import records_summary
from selfplay.generation.config import parse_sizes

log = logging.getLogger("selfplay.evaluation.arena")


#: random opening plies per pair when none are given: standard boards only (see above)
STANDARD_OPENING_PLIES = 4


def default_opening_plies(forbidden: bool) -> int:
    """Opening plies of a pair when none are given: 0 with a forbidden cell, else 4."""
    return 0 if forbidden else STANDARD_OPENING_PLIES


def setup_for_pair(seed: int, pair: int, sizes, forbidden: bool = True, opening_plies: int = 0
                   ) -> tuple[int, int, tuple[int, int] | None, tuple[int, ...]]:
    """The board of pair `pair`: a size from `sizes`, a uniform forbidden cell (None with
    ``forbidden=False``: standard boards) and `opening_plies` uniform random legal moves
    (columns, 0 = left) that leave the game running; all drawn from ``(seed, pair)``."""
    rng = np.random.default_rng([seed, pair])
    h, w, f = RULES.draw(rng, tuple(sizes), forbidden)
    for _ in range(1000):
        game = c4fast.Game(h, w, f)
        moves = []
        while len(moves) < opening_plies and game.result is None:
            col = int(rng.choice(game.legal_moves()))
            game.play(col)
            moves.append(col)
        if game.result is None:
            return h, w, f, tuple(moves)
    raise ValueError(f"no {opening_plies}-ply opening leaves a {h}x{w} game running")


def play_game(first, second, height, width, forbidden, opening: tuple[int, ...] = ()) -> dict:
    """One game from the position after `opening`; returns its record (result 0 draw,
    1 first won, 2 second won; "first" is the player to move after the opening, "moves"
    include the opening's, "opening" counts them)."""
    game = c4fast.Game.from_moves(height, width, forbidden, opening)
    players = {game.to_move: first, 3 - game.to_move: second}
    for p in players.values():
        p.reset(game)
    t0 = time.perf_counter()
    while game.result is None:
        check_interrupt()  # a signal swallowed inside a JIT compile still stops the match
        col = players[game.to_move].choose(game.copy())
        if col not in game.legal_moves():
            raise RuntimeError(f"player {players[game.to_move].name} chose illegal column {col}")
        game.play(col)
    result = game.result
    if result and len(opening) % 2:  # game.result names stones: 1 = the game's first mover
        result = 3 - result
    return {"first": first.name, "second": second.name, "result": result, "height": height,
            "width": width, "forbidden": list(forbidden) if forbidden else None, "moves": game.moves,
            "opening": len(opening), "seconds": round(time.perf_counter() - t0, 3)}


_PLAYERS: dict = {}


def _init_worker(spec_a, spec_b, seed, threads, pool_process=True, forward="auto"):
    if pool_process:  # Ctrl-C is handled by the parent, never inside pool workers
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _PLAYERS["a"] = make_player(spec_a, seed=seed, threads=threads, forward=forward)
    _PLAYERS["b"] = make_player(spec_b, seed=seed + 1, threads=threads, forward=forward)


def _play_pair(args):
    pair, seed, sizes, forbidden, plies = args
    a, b = _PLAYERS["a"], _PLAYERS["b"]
    h, w, f, opening = setup_for_pair(seed, pair, sizes, forbidden, plies)
    out = []
    for first, second in ((a, b), (b, a)):
        rec = play_game(first, second, h, w, f, opening)
        rec["pair"] = pair
        out.append(rec)
    return out


def _pair_mates(g1, g2) -> bool:
    """Whether record `g2` is the second game of record `g1`'s pair as :func:`play_match`
    writes them: the same ``pair`` index, board and opening, colours swapped."""
    try:
        op = g1["opening"]
        return (type(g1["pair"]) is int and g1["pair"] == g2["pair"] and g1["first"] == g2["second"]
                and g1["second"] == g2["first"] and op == g2["opening"]
                and all(g1[k] == g2[k] for k in ("height", "width", "forbidden"))
                and g1["moves"][:op] == g2["moves"][:op])
    except (KeyError, TypeError, IndexError):
        return False


def _split_lines(data: bytes) -> list[bytes]:
    """The lines of `data` with their newlines, split at b"\\n" only (as a file is iterated)."""
    parts = data.split(b"\n")
    return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _unpaired_last_line(data: bytes) -> int | None:
    """The byte offset of the last line of the JSON-lines `data` when it is a game whose pair
    is incomplete (a record with an integer ``pair`` that is left over when the lines are
    matched into pairs from the top, :func:`_pair_mates`), else None."""
    lines: list[tuple[int, object]] = []
    pos = 0
    for raw in _split_lines(data):
        if raw.strip():
            try:
                rec = json.loads(raw)
            except ValueError:
                rec = None
            lines.append((pos, rec))
        pos += len(raw)
    i, lone = 0, None
    while i < len(lines):
        if i + 1 < len(lines) and _pair_mates(lines[i][1], lines[i + 1][1]):
            i, lone = i + 2, None
        else:
            rec = lines[i][1]
            lone = lines[i][0] if isinstance(rec, dict) and type(rec.get("pair")) is int else None
            i += 1
    return lone


def open_for_append(path: str):
    """Open the games file `path` (JSON lines) for appending (created if missing), text mode,
    after repairing what a process killed mid-write leaves at its end:

    - a last line cut off mid-write is dropped, with a warning, so the next record starts on
      a line of its own and the file stays readable (a last line that is whole JSON without
      its newline, a file edited by hand, gets the newline);
    - a last game whose pair lacks its second game (the process died between the two) is
      moved to ``PATH.unpaired`` (appended there, fsynced first), with a warning: a resumed
      match then plays that pair afresh, and every pair in the file stays two games."""
    with open(path, "ab+") as f:
        f.seek(0)
        data = f.read()  # whole: the pair check below matches the lines from the top
        keep = data.rfind(b"\n") + 1  # a cut-off last line: keep what ends at the last newline
        if keep < len(data):
            try:  # a whole record without its newline (a file edited by hand) is kept
                json.loads(data[keep:])
                f.write(b"\n")
                data += b"\n"
            except ValueError:
                log.warning("%s: dropped a last line cut off mid-write (%d bytes)", path, len(data) - keep)
                f.truncate(keep)
                data = data[:keep]
            f.flush()
            os.fsync(f.fileno())
        lone = _unpaired_last_line(data)
        if lone is not None:
            with open(path + ".unpaired", "ab") as side:
                side.write(data[lone:])
                side.flush()
                os.fsync(side.fileno())
            f.truncate(lone)
            f.flush()
            os.fsync(f.fileno())
            log.warning("%s: moved its last game to %s.unpaired: its pair lacks the second game "
                        "(a match killed between the two)", path, path)
    return open(path, "a")


def salvage_games_file(path: str) -> tuple[list[dict], str | None, list[tuple[int, str]]]:
    """Keep what can be read of the games file `path` when lines inside it are damaged (not
    UTF-8, not JSON, not a game record): the file is first copied whole to
    ``PATH.damaged-<UTC time>`` (atomically), then replaced atomically by its valid lines,
    byte for byte. Returns the valid records, the copy's path (None when nothing was
    damaged: the file is left as it is) and the damaged lines as ``(1-based line, reason)``."""
    from c4fast.runtime import atomic_write_bytes
    from selfplay.evaluation.elo import parse_record_line

    open_for_append(path).close()
    with open(path, "rb") as f:
        data = f.read()
    records: list[dict] = []
    damaged: list[tuple[int, str]] = []
    kept: list[bytes] = []
    for n, raw in enumerate(_split_lines(data), 1):
        try:
            rec = parse_record_line(raw)
        except ValueError as e:
            damaged.append((n, str(e)))
            continue
        kept.append(raw)
        if rec is not None:
            records.append(rec)
    if not damaged:
        return records, None, []
    aside = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    k = 1
    while os.path.exists(aside):
        aside = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{k}"
        k += 1
    atomic_write_bytes(aside, data)
    atomic_write_bytes(path, b"".join(kept))
    return records, aside, damaged


def records_to_resume(path: str) -> list[dict]:
    """The records of the games file `path` that a resumed match counts before appending
    to it (created empty if missing), after :func:`open_for_append`'s repair of its end.
    ValueError (file and line) for a line damaged elsewhere (:func:`salvage_games_file`
    keeps the rest)."""
    from selfplay.evaluation.elo import load_records

    open_for_append(path).close()
    return load_records([path])


def play_match(spec_a: str, spec_b: str, pairs: int, workers: int = 1, seed: int = 0,
               sizes=None, out_path: str | None = None, progress: bool = False,
               threads: int = 1, forbidden: bool = True, opening_plies: int | None = None,
               forward: str = "auto", on_pair: Callable[[], None] | None = None) -> list[dict]:
    """Play `pairs` paired games (2 * pairs games); returns the records (also appended to
    out_path, each pair's two lines in one write, fsynced; see :func:`open_for_append`). ``forbidden=False`` plays standard boards. `threads` and
    `forward` (:data:`nets.config.PLAY_FORWARDS`) apply to every ``net:`` player.
    ``opening_plies``: random plies before each pair (None: :func:`default_opening_plies`).
    ``on_pair``: called with no argument after each finished pair (a caller's status lines)."""
    sizes = sizes or parse_sizes("saiblo")
    plies = default_opening_plies(forbidden) if opening_plies is None else int(opening_plies)
    if plies < 0:
        raise ValueError(f"opening plies must be >= 0, got {plies}")
    make_player(spec_a, forward=forward), make_player(spec_b, forward=forward)  # validate before starting processes
    tasks = [(i, seed, sizes, forbidden, plies) for i in range(pairs)]
    records: list[dict] = []
    fh = open_for_append(out_path) if out_path else None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=2 * pairs, unit="game", dynamic_ncols=True)
    try:
        if workers <= 1:
            _init_worker(spec_a, spec_b, seed, threads, pool_process=False, forward=forward)
            it = map(_play_pair, tasks)
            pool = None
        else:
            pool = mp.get_context("spawn").Pool(workers, _init_worker, (spec_a, spec_b, seed, threads, True, forward))
            it = pool.imap_unordered(_play_pair, tasks)
        for recs in it:
            records.extend(recs)
            if fh:  # a pair in one write, on disk before the next: see open_for_append
                fh.write("".join(json.dumps(r) + "\n" for r in recs))
                fh.flush()
                os.fsync(fh.fileno())
            if bar:
                bar.update(2)
            if on_pair is not None:
                on_pair()
        if pool is not None:
            pool.close()
            pool.join()
            pool = None
    finally:
        if pool is not None:  # interrupted or failed: don't wait for the games in flight
            pool.terminate()
            pool.join()
        if fh:
            fh.close()
        if bar:
            bar.close()
    return records


def summarize(records: list[dict], name_a: str) -> dict:
    """Score of `name_a` (wins + draws / 2) with its 95 % interval, split by colour."""
    from selfplay.evaluation.elo import score_interval

    w = d = lose = 0
    first = [0, 0, 0]
    for r in records:
        a_first = r["first"] == name_a
        res = r["result"]
        if res == 0:
            d += 1
            k = 1
        elif (res == 1) == a_first:
            w += 1
            k = 0
        else:
            lose += 1
            k = 2
        if a_first:
            first[k] += 1
    score, lo, hi = score_interval(w, d, lose)
    return {"player": name_a, "games": len(records), "wins": w, "draws": d, "losses": lose,
            "score": round(score, 4), "ci95": [round(lo, 4), round(hi, 4)],
            "as_first": {"wins": first[0], "draws": first[1], "losses": first[2]}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.evaluation.arena", description=__doc__,
                                 epilog="player specs:\n" + spec_help(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="player A spec")
    ap.add_argument("b", help="player B spec")
    ap.add_argument("--pairs", type=int, default=50, help="board pairs (2 games each; default 50)")
    ap.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", default="saiblo", help="board sizes: 'saiblo' or e.g. 6x7,9x9")
    ap.add_argument("--forbidden", choices=("random", "none"), default="random",
                    help="a random forbidden cell per board (default), or none: standard boards")
    ap.add_argument("--opening-plies", type=int, default=None,
                    help=f"random legal moves before each pair (default: {STANDARD_OPENING_PLIES} on standard "
                         "boards, 0 with a forbidden cell)")
    ap.add_argument("--forward", choices=PLAY_FORWARDS, default="auto",
                    help="what computes the nets of net: players (default auto: for .pt OpenVINO bf16 on "
                         "CPUs with bf16 units, else ONNX Runtime; numpy for .npz; eager: plain torch)")
    ap.add_argument("--out", default=None, help="append game records to this JSON-lines file")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    try:
        if args.pairs < 1 or args.workers < 1:
            raise ValueError("--pairs and --workers must be >= 1")
        sizes = parse_sizes(args.sizes)
        if args.out:
            parent = os.path.dirname(os.path.abspath(args.out))
            if os.path.isdir(args.out) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
                raise ValueError(f"--out {args.out!r} is not a writable file path")
        t0 = time.perf_counter()
        records = play_match(args.a, args.b, args.pairs, args.workers, args.seed, sizes, args.out,
                             progress=not args.json, forbidden=args.forbidden == "random",
                             opening_plies=args.opening_plies, forward=args.forward)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    dt = time.perf_counter() - t0
    s = summarize(records, records[0]["first"] if records[0]["first"] == args.a else args.a)
    s["games_per_s"] = round(len(records) / dt, 2)
    fills = records_summary(records)  # final board fill (selfplay.evaluation.fill)
    s["mean_fill"], s["fill_hist"] = fills["mean_fill"], fills["fill_hist"]
    if args.json:
        print(json.dumps(s))
    else:
        lo, hi = s["ci95"]
        print(f"{args.a} vs {args.b}: {s['games']} games, +{s['wins']} ={s['draws']} -{s['losses']}, "
              f"score {s['score']:.3f} (95% CI {lo:.3f}..{hi:.3f}), {s['games_per_s']} games/s, "
              f"mean final fill {s['mean_fill']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
