"""`c4fast fill PATHS...`: the final board fill of games, from self-play shards or arena records.

The fill of a finished game is its stones at the end over the board's playable cells
(``height * width``, minus one with a forbidden cell): 1 for a drawn game, ~0.39 for the
self-play games of the shipped models, ~0.73 for the games of the net against
``alphabeta:0.2`` (issue 35). The distribution is summarised as its mean and a histogram of
:data:`FILL_BINS` equal bins over [0, 1] (bin ``k`` holds fills in [k/10, (k+1)/10), the
last one also 1). ``selfplay.generation.run``'s summary reports the same for the games it
played, and ``c4fast arena --json`` for the games of its match.

Inputs: self-play shards (``*.h5`` files or directories of them; the ``/games`` rows) and
arena records (``*.jsonl``, the lines ``c4fast arena --out`` appends)::

    c4fast fill data/selfplay                    # one JSON line per input, then the total
    c4fast fill runs/loop/data runs/ab.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

FILL_BINS = 10


def fill_bin(stones: int, cells: int) -> int:
    """The histogram bin of a game that ended with `stones` of `cells` playable cells
    (integer arithmetic: exact at the bin edges)."""
    if not 0 <= stones <= cells or cells < 1:
        raise ValueError(f"{stones} stones on {cells} cells")
    return min(stones * FILL_BINS // cells, FILL_BINS - 1)


def fill_summary(stones, cells) -> dict:
    """{"games", "mean_fill", "fill_hist"} of games with `stones` at the end of `cells`
    playable cells each (equal-length sequences)."""
    stones = np.asarray(stones, np.int64).reshape(-1)
    cells = np.asarray(cells, np.int64).reshape(-1)
    if stones.shape != cells.shape:
        raise ValueError("stones and cells differ in length")
    hist = np.zeros(FILL_BINS, np.int64)
    for n, c in zip(stones.tolist(), cells.tolist()):
        hist[fill_bin(n, c)] += 1
    mean = float((stones / cells).mean()) if len(stones) else 0.0
    return {"games": int(len(stones)), "mean_fill": round(mean, 4), "fill_hist": hist.tolist()}


def shard_games(paths) -> tuple[np.ndarray, np.ndarray]:
    """(stones at the end, playable cells) of every game row of the shards in `paths`
    (files, globs or directories; nets.shards.read_shard checks each)."""
    from nets.shards import list_shards, read_shard

    stones, cells = [], []
    for p in list_shards(paths):
        g = read_shard(p)["games"]
        stones.append(g["num_moves"].astype(np.int64))
        cells.append(g["height"].astype(np.int64) * g["width"] - (g["forbidden"][:, 0] >= 0))
    if not stones:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(stones), np.concatenate(cells)


def record_games(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(stones at the end, playable cells) of every game of an arena JSON-lines file."""
    stones, cells = [], []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                n, c = len(r["moves"]), int(r["height"]) * int(r["width"]) - (r.get("forbidden") is not None)
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{i}: not an arena game record ({e})") from None
            stones.append(n)
            cells.append(c)
    return np.asarray(stones, np.int64), np.asarray(cells, np.int64)


def records_summary(records: list[dict]) -> dict:
    """:func:`fill_summary` of arena game records (dicts)."""
    return fill_summary([len(r["moves"]) for r in records],
                        [r["height"] * r["width"] - (r.get("forbidden") is not None) for r in records])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="c4fast fill", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="shard files or directories (*.h5), arena records (*.jsonl)")
    args = ap.parse_args(argv)
    all_stones, all_cells = [], []
    try:
        for p in args.paths:
            if p.endswith(".jsonl"):
                stones, cells = record_games(p)
            elif os.path.isdir(p) or p.endswith(".h5") or any(ch in p for ch in "*?["):
                stones, cells = shard_games([p])
            else:
                raise ValueError(f"{p!r}: expected a shard (.h5), a directory of shards or arena records (.jsonl)")
            print(json.dumps({"path": p, **fill_summary(stones, cells)}))
            all_stones.append(stones)
            all_cells.append(cells)
    except (OSError, ValueError) as e:  # nets.shards.ShardError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        return 2
    if len(args.paths) > 1:
        print(json.dumps({"path": "total", **fill_summary(np.concatenate(all_stones), np.concatenate(all_cells))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
