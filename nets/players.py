"""The one player factory: every player spec the commands accept.

Spec forms (:data:`SPEC_FORMS`):

- ``random``, ``greedy``, ``uct[:ROLLOUTS[:C[:sensible]]]``, ``alphabeta[:SECONDS[:MAX_DEPTH]]``,
  ``solver`` — the torch-free baselines of :mod:`c4fast.players`;
- ``net:PATH`` (MCGS, 200 playouts), ``net:PATH:N`` (N playouts), ``net:PATH:policy``
  (raw policy only), ``net:PATH:1.5s`` (a time budget per move). PATH is a ``.pt``
  checkpoint, a directory of checkpoints (the newest is used) or a ``.npz`` numpy export
  (no torch import).

Used by the arena, human play, the Saiblo player, solverbench, the loop and the web
board. A bad spec raises ``ValueError`` naming the valid forms.
"""

from __future__ import annotations

import math
import os

from c4fast.config import EndgameConfig, SearchConfig
from c4fast.players import bots
from c4fast.protocols import Player

__all__ = ["SPEC_FORMS", "make_player", "parse_net_spec", "split_net_spec"]

SPEC_FORMS = ("random | greedy | uct[:ROLLOUTS[:C[:sensible]]] | alphabeta[:SECONDS[:MAX_DEPTH]] | "
              "solver | net:PATH[:N|:policy|:SECONDSs]")


def make_player(spec: str, seed: int | None = 0, threads: int = 1,
                search: SearchConfig | None = None, evaluator=None,
                endgame: EndgameConfig | None = None, forward: str = "auto") -> Player:
    """A player from a spec string; ``player.name`` is a spec that rebuilds it (the given
    one for ``net:``, the canonical form for the baselines, e.g. ``uct`` -> ``uct:2000:1.4``).

    `seed` seeds the player's RNG; `threads` is the thread count of a ``net:`` player's
    forward (torch or ONNX Runtime); `search` its search settings (default ``SearchConfig()``)
    and `endgame` its exact endgame solving (default ``EndgameConfig()``); `forward` what
    computes its net (:data:`nets.config.PLAY_FORWARDS`; "auto": ONNX Runtime for a ``.pt``,
    numpy for a ``.npz``); `evaluator` replaces loading the weights (share one net between
    players).
    """
    if not isinstance(spec, str):
        raise ValueError(f"player spec must be a string, got {spec!r}; valid forms: {SPEC_FORMS}")
    if spec.startswith("net:"):
        from nets.netplayer import NetPlayer

        path, playouts, seconds = parse_net_spec(spec)
        player = NetPlayer(path, playouts=playouts, seconds=seconds, name=spec, threads=threads,
                           search=search, evaluator=evaluator, endgame=endgame, forward=forward)
        player.name = spec
        return player
    return _make_bot(spec, seed)


def split_net_spec(spec: str) -> tuple[str, str]:
    """``net:PATH[:BUDGET]`` -> (PATH, BUDGET or ""), BUDGET being ``N``, ``policy`` or ``Ts``
    (a PATH may itself hold colons). No checks beyond the split."""
    rest = spec[4:]
    head, _, tail = rest.rpartition(":")
    if head and (tail.isdigit() or tail == "policy" or (tail.endswith("s") and _is_float(tail[:-1]))):
        return head, tail
    return rest, ""


def parse_net_spec(spec: str) -> tuple[str, int, float]:
    """``net:PATH[:N|:policy|:Ts]`` -> (path, playouts, seconds); ValueError if malformed
    or if PATH does not exist."""
    rest, tail = split_net_spec(spec)
    playouts, seconds = 200, 0.0
    if tail:
        if tail == "policy":
            playouts = 0
        elif tail.endswith("s"):
            seconds, playouts = float(tail[:-1]), 0
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"player {spec!r}: the time budget must be > 0 seconds")
        else:
            playouts = int(tail)
            if playouts < 1:
                raise ValueError(f"player {spec!r}: playouts must be >= 1 (or :policy)")
    if not rest:
        raise ValueError(f"player {spec!r}: no checkpoint path; valid forms: {SPEC_FORMS}")
    if not os.path.exists(rest):
        raise ValueError(f"player {spec!r}: no checkpoint at {rest!r}")
    return rest, playouts, seconds


def _is_float(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _make_bot(spec: str, seed) -> Player:
    """A torch-free baseline player (c4fast.players) from its spec."""
    parts = spec.strip().lower().split(":")
    kind, args = parts[0], parts[1:]

    def bad(why: str) -> ValueError:
        return ValueError(f"bad player spec {spec!r}: {why}; valid forms: {SPEC_FORMS}")

    def number(text: str, typ, what: str):
        try:
            v = typ(text)
        except ValueError:
            what_kind = "an integer" if typ is int else "a number"
            raise bad(f"{what} must be {what_kind}, got {text!r}") from None
        if typ is float and not math.isfinite(v):
            raise bad(f"{what} must be finite, got {text!r}")
        return v

    if kind in ("random", "greedy", "solver"):
        if args:
            raise bad(f"{kind!r} takes no parameters")
        cls = {"random": bots.RandomPlayer, "greedy": bots.GreedyPlayer, "solver": bots.SolverPlayer}[kind]
        return cls(seed=seed)
    if kind == "uct":
        sensible = len(args) == 3 and args[2] == "sensible"
        if len(args) > 3:
            raise bad("too many parameters")
        if len(args) == 3 and not sensible:
            raise bad(f"expected 'sensible', got {args[2]!r}")
        rollouts = number(args[0], int, "ROLLOUTS") if args else 2000
        c = number(args[1], float, "C") if len(args) > 1 else 1.4
        if rollouts < 1:
            raise bad(f"ROLLOUTS must be >= 1, got {rollouts}")
        if c < 0:
            raise bad(f"C must be >= 0, got {c}")
        return bots.UCTPlayer(rollouts, seed=seed, c=c, sensible=sensible)
    if kind == "alphabeta":
        if len(args) > 2:
            raise bad("too many parameters")
        secs = number(args[0], float, "SECONDS") if args else 0.5
        depth = number(args[1], int, "MAX_DEPTH") if len(args) > 1 else 64
        if secs <= 0:
            raise bad(f"SECONDS must be > 0, got {secs}")
        if depth < 1:
            raise bad(f"MAX_DEPTH must be >= 1, got {depth}")
        return bots.AlphaBetaPlayer(secs, depth, seed=seed)
    raise bad(f"unknown player kind {kind!r}")


# ================================================================================ games
