"""The one player factory: every player spec the commands accept.

Spec forms (:data:`SPEC_FORMS`):

- ``random``, ``greedy``, ``uct[:ROLLOUTS[:C[:sensible]]]``, ``alphabeta[:SECONDS[:MAX_DEPTH]]``,
  ``solver`` — the torch-free baselines of :mod:`c4fast.players`;
- ``net:PATH`` (MCGS, 200 playouts), ``net:PATH:N`` (N playouts), ``net:PATH:policy``
  (raw policy only), ``net:PATH:1.5s`` (a time budget per move). PATH is a ``.pt``
  checkpoint, a directory of checkpoints (the newest is used) or a ``.npz`` numpy export
  (no torch import). A last part ``:KEY=VALUE[,KEY=VALUE...]`` sets play-time search
  options (:data:`PLAY_OPTIONS`: fields of :class:`c4fast.config.SearchConfig` and
  :class:`c4fast.config.EndgameConfig`), e.g.
  ``net:m.pt:0.2s:c_puct=1.5,max_empty=0``,
  so two players of one net with different settings have different names.

Used by the arena, human play, the Saiblo player, solverbench, the loop and the web
board. A bad spec raises ``ValueError`` naming the valid forms.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

from c4fast.config import EndgameConfig, SearchConfig
from c4fast.players import bots
from c4fast.protocols import Player

__all__ = ["PLAY_OPTIONS", "SPEC_FORMS", "apply_play_options", "make_player", "parse_net_spec",
           "split_net_spec"]

SPEC_FORMS = ("random | greedy | uct[:ROLLOUTS[:C[:sensible]]] | alphabeta[:SECONDS[:MAX_DEPTH]] | "
              "solver | net:PATH[:N|:policy|:SECONDSs][:KEY=VALUE,...]")

#: Search options a ``net:`` spec may set (``:KEY=VALUE,...``): KEY -> (the config that
#: owns it, its field): the play-time fields of SearchConfig (noise, forced playouts and
#: the self-play playout cap do not apply to a player), EndgameConfig's but its table size
#: (a spec from the web board must not allocate gigabytes).
PLAY_OPTIONS = {
    **{k: (SearchConfig, k) for k in ("c_puct", "fpu_reduction", "leaves_per_step", "sensible", "tree_reuse",
                                      "proofs")},
    **{k: (EndgameConfig, k) for k in ("max_empty", "share", "nodes")},
}


def make_player(spec: str, seed: int | None = 0, threads: int = 1,
                search: SearchConfig | None = None, evaluator=None,
                endgame: EndgameConfig | None = None, forward: str = "auto") -> Player:
    """A player from a spec string; ``player.name`` is a spec that rebuilds it (the given
    one for ``net:``, the canonical form for the baselines, e.g. ``uct`` -> ``uct:2000:1.4``).

    `seed` seeds the player's RNG; `threads` is the thread count of a ``net:`` player's
    forward (torch or ONNX Runtime); `search` its search settings (default ``SearchConfig()``)
    and `endgame` its exact endgame solving (default ``EndgameConfig()``), each overridden
    by the spec's ``:KEY=VALUE`` options; `forward` what
    computes its net (:data:`nets.config.PLAY_FORWARDS`; "auto": ONNX Runtime for a ``.pt``,
    numpy for a ``.npz``); `evaluator` replaces loading the weights (share one net between
    players).
    """
    if not isinstance(spec, str):
        raise ValueError(f"player spec must be a string, got {spec!r}; valid forms: {SPEC_FORMS}")
    if spec.startswith("net:"):
        from nets.netplayer import NetPlayer

        path, playouts, seconds, options = parse_net_spec(spec)
        try:
            search, endgame = apply_play_options(options, search or SearchConfig(), endgame or EndgameConfig())
        except ValueError as e:
            raise ValueError(f"player {spec!r}: {e}") from None
        player = NetPlayer(path, playouts=playouts, seconds=seconds, name=spec, threads=threads,
                           search=search, evaluator=evaluator, endgame=endgame, forward=forward)
        player.name = spec
        return player
    return _make_bot(spec, seed)


def split_net_spec(spec: str) -> tuple[str, str]:
    """``net:PATH[:BUDGET][:OPTIONS]`` -> (PATH, BUDGET or ""), BUDGET being ``N``,
    ``policy`` or ``Ts`` (a PATH may itself hold colons). No checks beyond the split."""
    return _split(spec)[:2]


def _split(spec: str) -> tuple[str, str, str]:
    """(PATH, BUDGET or "", OPTIONS or "") of a ``net:`` spec."""
    rest, options = spec[4:], ""
    head, _, tail = rest.rpartition(":")
    if head and tail and all(_OPTION.fullmatch(part) for part in tail.split(",")):
        rest, options = head, tail
    head, _, tail = rest.rpartition(":")
    if head and (tail.isdigit() or tail == "policy" or (tail.endswith("s") and _is_float(tail[:-1]))):
        return head, tail, options
    return rest, "", options


_OPTION = re.compile(r"[a-z_][a-z0-9_]*=[^,=:]*")


def parse_net_spec(spec: str) -> tuple[str, int, float, dict[str, str]]:
    """``net:PATH[:N|:policy|:Ts][:KEY=VALUE,...]`` -> (path, playouts, seconds, options:
    {KEY: VALUE text}); ValueError if malformed, if PATH does not exist, or for options
    that are not in :data:`PLAY_OPTIONS`, repeated, or given to a raw-policy player."""
    rest, tail, opts = _split(spec)
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
    options: dict[str, str] = {}
    for part in opts.split(",") if opts else ():
        key, _, value = part.partition("=")
        if key not in PLAY_OPTIONS:
            raise ValueError(f"player {spec!r}: unknown search option {key!r}; options: {sorted(PLAY_OPTIONS)}")
        if key in options:
            raise ValueError(f"player {spec!r}: search option {key!r} given twice")
        options[key] = value
    if options and tail == "policy":
        raise ValueError(f"player {spec!r}: a raw-policy player does not search; drop the options")
    if not os.path.exists(rest):
        raise ValueError(f"player {spec!r}: no checkpoint at {rest!r}")
    return rest, playouts, seconds, options


def apply_play_options(options: dict[str, str], search: SearchConfig,
                       endgame: EndgameConfig) -> tuple[SearchConfig, EndgameConfig]:
    """`search` and `endgame` with `options` ({KEY: VALUE text}, keys of
    :data:`PLAY_OPTIONS`) applied, each value parsed as its field's type (booleans:
    true/false, 1/0, yes/no, on/off). ValueError for a value that does not parse or that
    the config refuses."""
    configs = {SearchConfig: search, EndgameConfig: endgame}
    changes: dict[type, dict] = {cls: {} for cls in configs}
    for key, text in options.items():
        cls, name = PLAY_OPTIONS[key]
        kind = type(getattr(cls(), name))
        try:
            if kind is bool:
                low = text.strip().lower()
                if low not in _BOOLS:
                    raise ValueError
                value = _BOOLS[low]
            else:
                value = kind(text)
        except ValueError:
            raise ValueError(f"search option {key}={text!r}: expected {'true or false' if kind is bool else kind.__name__}") \
                from None
        changes[cls][name] = value
    return tuple(dataclasses.replace(cfg, **changes[cls]) for cls, cfg in configs.items())


_BOOLS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


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
