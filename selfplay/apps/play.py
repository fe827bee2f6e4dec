"""`python -m selfplay.apps.play`: play Connect Four against an engine in the terminal.

Shows the board (top row first, '#' the forbidden cell), and after every engine move
its win/draw/loss estimate and the moves it considered. Type a column number to move,
``h`` for a hint (the engine's analysis of your position), ``q`` to quit.
Default opponent: the shipped network with 400 playouts; any arena player spec works
(``--engine greedy``, ``--engine uct:2000``, ``--engine net:runs/loop/train/models``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import c4fast
from c4fast.board import RULES
from selfplay.generation.config import parse_sizes


def _describe(a: dict) -> str:
    parts = []
    if a.get("wdl"):
        w, d, lo = a["wdl"]
        parts.append(f"engine estimate (for the side it moved for): win {w:.0%} draw {d:.0%} loss {lo:.0%}")
    if a.get("visits"):
        top = sorted(a["visits"].items(), key=lambda kv: -kv[1])[:4]
        q = a.get("q") or {}
        parts.append("preferred: " + ", ".join(f"col {c} ({n}" + (f", Q {q[c]:+.2f})" if c in q else ")")
                                             for c, n in top))
    elif a.get("policy"):
        top = sorted(a["policy"].items(), key=lambda kv: -kv[1])[:4]
        parts.append("preferred: " + ", ".join(f"col {c} ({p:.0%})" for c, p in top))
    return "\n".join(parts)


def main(argv=None, inp=None, out=None) -> int:
    inp = inp or sys.stdin
    out = out or sys.stdout
    from c4fast.players.registry import spec_help
    from nets.players import make_player

    ap = argparse.ArgumentParser(prog="python -m selfplay.apps.play", description=__doc__,
                                 epilog="player specs:\n" + spec_help(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default=None, help="opponent spec (default: shipped net, 400 playouts)")
    ap.add_argument("--size", default=None, help="board HxW (default: random Saiblo size)")
    ap.add_argument("--forbidden", default=None, help="forbidden cell ROW,COL (row 0 = bottom) or 'none'")
    ap.add_argument("--second", action="store_true", help="let the engine move first")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    from selfplay.apps.saiblo import DEFAULT_MODEL

    try:
        spec = args.engine or f"net:{DEFAULT_MODEL}:400"
        engine = make_player(spec)
        rng = np.random.default_rng(args.seed)
        h, w, forb = RULES.draw(rng, parse_sizes(args.size) if args.size else None)
        if args.forbidden is None:
            pass  # the drawn cell
        elif args.forbidden.lower() == "none":
            forb = None
        else:
            forb = tuple(int(x) for x in args.forbidden.split(","))
        game = c4fast.Game(h, w, forb)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    engine.reset(game)
    human = 2 if args.second else 1
    print(f"You are {'X' if human == 1 else 'O'} on a {h}x{w} board against {spec}.", file=out)
    while game.result is None:
        print("\n" + str(game), file=out)
        if game.to_move == human:
            print(f"your move (0..{w - 1}, h = hint, q = quit): ", end="", file=out, flush=True)
            line = inp.readline()
            if not line or line.strip().lower() == "q":
                print("bye", file=out)
                return 0
            text = line.strip().lower()
            if text == "h":
                engine.choose(game.copy())
                print(_describe(engine.analysis()), file=out)
                continue
            try:
                game.play(int(text))
            except ValueError as e:
                print(f"not a legal move: {e}", file=out)
            continue
        col = engine.choose(game.copy())
        game.play(col)
        print(f"engine plays column {col}", file=out)
        desc = _describe(engine.analysis())
        if desc:
            print(desc, file=out)
    print("\n" + str(game), file=out)
    msg = {0: "draw", human: "you win!"}.get(game.result, "the engine wins")
    print(f"game over: {msg}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
