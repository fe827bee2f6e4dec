"""`python -m selfplay.evaluation.compare`: did a change help? Two players, one opponent, the same boards.

Takes two arena game files (JSON lines, ``selfplay.evaluation.arena --out``), each one match of a
player against a common opponent, played with the same ``--seed``, ``--sizes`` and
``--forbidden``: pair k is then the same board (size, forbidden cell, opening) in both
files. Example: is the new net better than the shipped one against alpha-beta?

    python -m selfplay.evaluation.arena net:new.pt:0.2s alphabeta:0.2 --pairs 100 --seed 5000 --out new.jsonl
    python -m selfplay.evaluation.arena net:models/c4fast_cpu.pt:0.2s alphabeta:0.2 --pairs 100 --seed 5000 --out old.jsonl
    python -m selfplay.evaluation.compare new.jsonl old.jsonl

Conventions: a pair's score is the player's points over its two games (win 1, draw 1/2,
loss 0) divided by 2, so it is one of 0, 1/4, 1/2, 3/4, 1. The comparison is game by
game on the pairs both files hold: d_k = score_A(k) - score_B(k), the difference is the
mean of d_k and its 95 % interval the normal one, mean ± 1.96·sd/sqrt(n) (fine from about
30 pairs; with fewer the interval is too narrow). Pairing removes the board's luck, which
is most of the variance between two separate matches: the interval is usually much
narrower than the two matches' own intervals combined. The sign test counts the pairs
where A did better and where B did (ties dropped) and gives the exact two-sided binomial
p-value of "neither is better".

Refused with the reason (exit code 2): a file that is not a match of one player against
the opponent, a pair that is not two games with colours swapped on one board, a pair
played on different boards in the two files (different seed, sizes or opening), and no
pair in common. Pairs in only one file (an interrupted match) are left out and counted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from selfplay.evaluation.elo import load_records

#: z of the two-sided 95 % normal interval
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of players `a` and `b` against `opponent` (scores in [0, 1];
    `difference` = mean over common pairs of A's pair score minus B's, in [-1, 1])."""

    a: str
    b: str
    opponent: str
    pairs: int                 # pairs both files hold
    only_a: int                # pairs only in A's file (left out)
    only_b: int
    score_a: float             # A's mean score on the common pairs
    score_b: float
    difference: float
    ci95: tuple[float, float]
    a_better: int              # pairs where A scored more than B
    b_better: int
    ties: int
    sign_p: float              # exact two-sided sign-test p-value over a_better, b_better

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci95"] = list(self.ci95)
        return d


def _players(records: Sequence[Mapping]) -> set[str]:
    return {r["first"] for r in records} | {r["second"] for r in records}


def _board(rec: Mapping, where: str) -> tuple:
    try:
        forbidden = rec["forbidden"]
        opening = int(rec.get("opening", 0))
        board = (int(rec["height"]), int(rec["width"]),
                 None if forbidden is None else tuple(int(x) for x in forbidden),
                 tuple(int(m) for m in rec["moves"][:opening]))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: a game record lacks its board (height, width, forbidden, moves, "
                         f"opening): {e!r}; compare reads files written by selfplay.evaluation.arena --out") from None
    return board


def pair_scores(records: Sequence[Mapping], opponent: str, where: str = "records"
                ) -> tuple[str, dict[int, tuple[float, tuple]]]:
    """The one player facing `opponent` in `records` and its score per pair: ``(name,
    {pair: (score, board)})``. Raises ValueError if the records are not one paired match
    of a single player against `opponent` (see the module docstring)."""
    if not records:
        raise ValueError(f"{where}: no games")
    others = _players(records) - {opponent}
    if opponent not in _players(records):
        raise ValueError(f"{where}: no game of {opponent!r}; its players are {sorted(_players(records))}")
    if len(others) != 1:
        raise ValueError(f"{where}: {len(others)} players besides {opponent!r} ({sorted(others)}): "
                         "give one match per file")
    (player,) = others
    games: dict[int, list[Mapping]] = {}
    for r in records:
        if opponent not in (r["first"], r["second"]) or r["first"] == r["second"]:
            raise ValueError(f"{where}: a game of {r['first']!r} against {r['second']!r}: "
                             f"every game must be against {opponent!r}")
        pair = r.get("pair")
        if isinstance(pair, bool) or not isinstance(pair, int):
            raise ValueError(f"{where}: a game record has no integer 'pair' (got {pair!r}); "
                             "compare reads files written by selfplay.evaluation.arena --out")
        games.setdefault(pair, []).append(r)
    out: dict[int, tuple[float, tuple]] = {}
    for pair, gs in sorted(games.items()):
        if len(gs) != 2 or {g["first"] for g in gs} != {player, opponent}:
            raise ValueError(f"{where}: pair {pair} has {len(gs)} game(s) "
                             f"({[(g['first'], g['second']) for g in gs]}); a pair is two games with "
                             "colours swapped (was the file appended to twice?)")
        boards = {_board(g, where) for g in gs}
        if len(boards) != 1:
            raise ValueError(f"{where}: the two games of pair {pair} are on different boards: {sorted(boards, key=str)}")
        points = 0.0
        for g in gs:
            res = g["result"]
            points += 0.5 if res == 0 else float((res == 1) == (g["first"] == player))
        out[pair] = (points / 2.0, boards.pop())
    return player, out


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided binomial p-value of `wins` against `losses` when each is equally likely."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def compare(records_a: Sequence[Mapping], records_b: Sequence[Mapping], opponent: str | None = None,
            where: tuple[str, str] = ("A", "B")) -> Comparison:
    """Paired comparison of the two files' players against their common opponent (the one
    name both files share, unless `opponent` is given)."""
    if opponent is None:
        common = _players(records_a) & _players(records_b) if records_a and records_b else set()
        if len(common) == 2 and _players(records_a) == _players(records_b):
            raise ValueError(f"both files are games between {sorted(common)}: nothing to compare")
        if len(common) != 1:
            raise ValueError(f"cannot tell the common opponent: the files share {sorted(common) or 'no player'}; "
                             "give --opponent")
        (opponent,) = common
    a, sa = pair_scores(records_a, opponent, where[0])
    b, sb = pair_scores(records_b, opponent, where[1])
    if a == b:
        raise ValueError(f"both files are {a!r} against {opponent!r}: nothing to compare")
    keys = sorted(set(sa) & set(sb))
    for k in keys:
        if sa[k][1] != sb[k][1]:
            raise ValueError(f"pair {k} was played on different boards ({where[0]}: {_fmt(sa[k][1])}, "
                             f"{where[1]}: {_fmt(sb[k][1])}): play both matches with the same --seed, "
                             "--sizes, --forbidden and --opening-plies")
    if not keys:
        raise ValueError(f"no pair in common ({where[0]}: {len(sa)} pairs, {where[1]}: {len(sb)})")
    d = [sa[k][0] - sb[k][0] for k in keys]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else math.inf
    half = Z95 * sd / math.sqrt(n)
    up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
    return Comparison(a=a, b=b, opponent=opponent, pairs=n, only_a=len(set(sa) - set(sb)),
                      only_b=len(set(sb) - set(sa)), score_a=sum(sa[k][0] for k in keys) / n,
                      score_b=sum(sb[k][0] for k in keys) / n, difference=mean,
                      ci95=(max(-1.0, mean - half), min(1.0, mean + half)),
                      a_better=up, b_better=down, ties=n - up - down, sign_p=sign_test(up, down))


def _fmt(board: tuple) -> str:
    h, w, f, opening = board
    return f"{h}x{w}, forbidden {f}, opening {list(opening)}"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m selfplay.evaluation.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Exit codes: 0 ok, 2 bad arguments or input (one error line on stderr).")
    ap.add_argument("a", metavar="A.jsonl", help="player A's match against the opponent")
    ap.add_argument("b", metavar="B.jsonl", help="player B's match against the same opponent, same boards")
    ap.add_argument("--opponent", default=None, help="the common opponent's spec (default: the one name both files share)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        ra, rb = load_records(args.a), load_records(args.b)
        c = compare(ra, rb, args.opponent, where=(os.fsdecode(args.a), os.fsdecode(args.b)))
    except (ValueError, OSError) as e:
        print("error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(c.to_dict()))
    else:
        lo, hi = c.ci95
        print(f"against {c.opponent}, {c.pairs} common pairs ({c.only_a} only in A, {c.only_b} only in B):\n"
              f"  A {c.a}: {c.score_a:.4f}\n  B {c.b}: {c.score_b:.4f}\n"
              f"  A - B: {c.difference:+.4f} (95% CI {lo:+.4f}..{hi:+.4f}); pairs A better {c.a_better}, "
              f"B better {c.b_better}, equal {c.ties}; sign test p = {c.sign_p:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
