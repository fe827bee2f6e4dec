"""`python -m selfplay.evaluation.rate`: rate a set of checkpoints against fixed anchors (Elo, 95 % intervals).

    python -m selfplay.evaluation.rate runs/loop/train/models --every 4 --anchors random,greedy,uct:500 \\
        --pairs 20 --playouts 200 --out runs/loop/rating

Each checkpoint (files, or directories of ``model_XXXXXXXX.pt``) plays ``--pairs`` paired
games (same board, colours swapped) against every anchor at ``--playouts`` MCGS playouts
per move, and, with ``--chain``, against the next checkpoint too (which tightens the
differences between checkpoints). Games are appended to ``OUT/games.jsonl`` (one JSON
object per game, each pair fsynced as it ends); a rerun with the same settings plays only
the pairs still missing, so an interrupted rating resumes. A games file with damaged lines
is refused unless ``--salvage`` (the original copied to ``OUT/games.jsonl.damaged-<time>``,
the readable games kept). Then one Davidson–Bradley–Terry fit over
every game (first-move advantage and draws modelled; ``selfplay.evaluation.elo``), anchored at
``--anchor`` (default: the first anchor): ``OUT/ratings.json``, ``OUT/ratings.csv`` (one row
per checkpoint: step, Elo, 95 % interval, games) and a table on stderr; the JSON summary
goes to stdout.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import sys

from c4fast.game import parse_sizes
from c4fast.runtime import atomic_write_bytes, atomic_write_json, raise_on_interrupt, setup_logging

log = logging.getLogger("selfplay.evaluation.rate")


class RateError(ValueError):
    """Bad arguments or inputs (the message says which)."""


def checkpoints(paths, every: int = 1) -> list[str]:
    """The checkpoint files named by `paths` (directories expand to their
    ``model_XXXXXXXX.pt`` files by step), every `every`-th one of each directory plus its newest."""
    from nets.checkpoint import list_checkpoints

    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = list_checkpoints(p)
            if not found:
                raise RateError(f"{p!r} holds no model_XXXXXXXX.pt checkpoint")
            picked = found[::every]
            if found[-1] not in picked:
                picked.append(found[-1])
            out.extend(picked)
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise RateError(f"{p!r} is neither a checkpoint file nor a directory")
    seen: set = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m selfplay.evaluation.rate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="checkpoint files or directories of model_XXXXXXXX.pt")
    ap.add_argument("--out", required=True, help="directory for games.jsonl, ratings.json, ratings.csv")
    ap.add_argument("--anchors", default="random,greedy,uct:500",
                    help="anchor player specs, comma separated (default: random,greedy,uct:500)")
    ap.add_argument("--anchor", default=None, help="the player rated 0 (default: the first anchor)")
    ap.add_argument("--pairs", type=int, default=20, help="game pairs per checkpoint and anchor (default 20)")
    ap.add_argument("--playouts", type=int, default=200, help="MCGS playouts per move of the nets (default 200)")
    ap.add_argument("--every", type=int, default=1, help="rate every N-th checkpoint of a directory "
                                                          "(its newest always; default 1)")
    ap.add_argument("--chain", action="store_true", help="also play each checkpoint against the next one")
    ap.add_argument("--sizes", default="saiblo", help="board sizes: 'saiblo' or a list like 6x7 (default saiblo)")
    ap.add_argument("--forbidden", choices=("random", "none"), default="random",
                    help="a random forbidden cell per pair, or none (standard boards)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1)),
                    help="arena processes (default: the CPU count)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the boards and players (default 0)")
    ap.add_argument("--salvage", action="store_true",
                    help="if OUT/games.jsonl has damaged lines, copy it aside and go on with its readable games")
    return ap


def main(argv=None) -> int:
    setup_logging()
    raise_on_interrupt()
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.playouts < 1 or args.every < 1 or args.workers < 1:
        ap.error("--pairs, --playouts, --every and --workers must be >= 1")
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as e:
        ap.error(str(e))
    anchors = [a for a in args.anchors.split(",") if a]
    if not anchors:
        ap.error("--anchors names no player")
    anchor = args.anchor or anchors[0]
    if anchor not in anchors:
        ap.error(f"--anchor {anchor!r} is not one of --anchors {anchors}")
    from nets.players import make_player

    for a in anchors:
        try:
            make_player(a)
        except (ValueError, OSError) as e:
            ap.error(f"anchor {a!r}: {e}")
    try:
        ckpts = checkpoints(args.paths, args.every)
    except RateError as e:
        ap.error(str(e))
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        ap.error(f"--out {args.out!r} exists and is not a directory")
    os.makedirs(args.out, exist_ok=True)

    from nets.checkpoint import checkpoint_step
    from selfplay.evaluation.arena import play_match, records_to_resume, salvage_games_file
    from selfplay.evaluation.elo import fit_ratings, games_between

    games = os.path.join(args.out, "games.jsonl")
    try:
        records = records_to_resume(games)
    except ValueError as e:  # a line damaged other than by a write cut off
        if not args.salvage:  # nothing is played
            print(f"error: {e}; repair {games}, move it aside, or pass --salvage to keep its readable games",
                  file=sys.stderr)
            return 2
        records, aside, damaged = salvage_games_file(games)
        log.warning("%s: dropped %d damaged line(s) (%s); the original is kept as %s", games, len(damaged),
                    ", ".join(f"line {n}: {why}" for n, why in damaged[:3]) + (" ..." if len(damaged) > 3 else ""),
                    aside)
    specs = [f"net:{p}:{args.playouts}" for p in ckpts]
    matches = [(s, a) for s in specs for a in anchors]
    if args.chain:
        matches += list(zip(specs, specs[1:]))
    forbidden = args.forbidden == "random"
    try:
        for i, (a, b) in enumerate(matches):
            done = games_between(records, a, b) // 2
            if done >= args.pairs:
                continue
            log.info("match %d/%d: %s vs %s (%d pairs)", i + 1, len(matches), a, b, args.pairs - done)
            # a resumed match plays its missing pairs on fresh boards (another seed)
            recs = play_match(a, b, args.pairs - done, workers=args.workers, seed=args.seed * 7919 + done,
                              sizes=sizes, out_path=games, forbidden=forbidden)
            records.extend(recs)
    except KeyboardInterrupt:
        log.info("interrupted: the games played so far are in %s; the same command resumes", games)
        return 130
    except ValueError as e:  # a checkpoint that cannot be used (nets.checkpoint.CheckpointError...)
        print(f"error: {e}", file=sys.stderr)
        return 2
    ratings = fit_ratings(records, anchor=anchor, prior_games=1.0)
    atomic_write_json(os.path.join(args.out, "ratings.json"), ratings.to_dict())
    rows = []
    for p, s in zip(ckpts, specs):
        lo, hi = ratings.interval(s)
        rows.append({"checkpoint": p, "step": checkpoint_step(p), "elo": round(ratings.elo[s], 1), "lo": round(lo, 1),
                     "hi": round(hi, 1), "games": ratings.games.get(s, 0)})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    atomic_write_bytes(os.path.join(args.out, "ratings.csv"), buf.getvalue().encode())
    print(ratings.table(), file=sys.stderr)
    print(json.dumps({"anchor": anchor, "anchors": {a: round(ratings.elo[a], 1) for a in anchors},
                      "checkpoints": rows, "games": len(records),
                      "first_move_advantage": round(ratings.first_move_advantage, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
