"""The ``net:`` player kind, and the player factory with every kind registered.

``net:PATH`` (MCGS, 200 playouts), ``net:PATH:N`` (N playouts), ``net:PATH:policy`` (raw
policy only), ``net:PATH:1.5s`` (a time budget per move). PATH is a ``.pt`` checkpoint, a
directory of checkpoints (the newest is used) or a ``.npz`` numpy export (no torch
import). A last part ``:KEY=VALUE[,KEY=VALUE...]`` sets play-time search options
(:data:`PLAY_OPTIONS`: fields of :class:`c4fast.config.SearchConfig`,
and :class:`c4fast.config.EndgameConfig`), e.g.
``net:m.pt:0.2s:c_puct=1.5,max_empty=0``, so two players of one net with different
settings have different names. Playouts, seconds and ``leaves_per_step`` are bounded by
the caller's :class:`c4fast.players.registry.SpecLimits`.

Importing this module registers the kind with :mod:`c4fast.players.registry` (the
``c4fast.players`` entry point names it too); :func:`make_player` is the registry's
factory with that guaranteed, used by the arena, human play, the Saiblo player,
solverbench, the loop and the web board. A bad spec raises ``ValueError`` naming the valid
forms.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

from c4fast.config import EndgameConfig, SearchConfig
from c4fast.players import registry
from c4fast.players.registry import (CLI_LIMITS, PlayerKind, SpecContext, SpecError, SpecLimitError, SpecLimits,
                                     spec_forms)
from c4fast.protocols import Player

__all__ = ["NET_GRAMMAR", "PLAY_OPTIONS", "apply_play_options", "check_net_spec", "make_player", "parse_net_spec", "spec_forms",
           "split_net_spec"]

NET_GRAMMAR = "net:PATH[:N|:policy|:SECONDSs][:KEY=VALUE,...]"

#: Search options a ``net:`` spec may set (``:KEY=VALUE,...``): KEY -> (the config that
#: owns it, its field): the play-time fields of SearchConfig (noise, forced playouts and
#: the self-play playout cap do not apply to a player), EndgameConfig's but its table size
#: (a spec from the web board must not allocate gigabytes).
PLAY_OPTIONS = {
    **{k: (SearchConfig, k) for k in ("c_puct", "fpu_reduction", "leaves_per_step", "sensible", "tree_reuse",
                                      "proofs", "moves_left_slope", "moves_left_cap", "moves_left_threshold",
                                      "select_q")},
    **{k: (EndgameConfig, k) for k in ("max_empty", "share", "nodes")},
}


def make_player(spec: str, seed: int | None = 0, threads: int = 1,
                search: SearchConfig | None = None, evaluator=None,
                endgame: EndgameConfig | None = None, forward: str = "auto",
                limits: SpecLimits = CLI_LIMITS) -> Player:
    """A player from a spec string of any registered kind; ``player.name`` is a spec that
    rebuilds it (the given one for ``net:``, the canonical form for the bots, e.g. ``uct``
    -> ``uct:2000``).

    `seed` seeds the player's RNG; `threads` is the thread count of a ``net:`` player's
    forward (torch or ONNX Runtime); `search` its search settings (default ``SearchConfig()``),
    `endgame` its exact endgame solving (default ``EndgameConfig()``), each overridden by the spec's
    ``:KEY=VALUE`` options; `forward` what computes its net (:data:`nets.config.PLAY_FORWARDS`;
    "auto": :func:`nets.netplayer.auto_play_forward` for a ``.pt``, numpy for a ``.npz``); `evaluator` replaces loading
    the weights (share one net between players); `limits` bounds the spec's budgets.
    """
    ctx = SpecContext(seed=seed, threads=threads, search=search, endgame=endgame, forward=forward,
                      evaluator=evaluator, limits=limits)
    return registry.make_player(spec, ctx)


def check_net_spec(spec: str, ctx: SpecContext = SpecContext()):
    """(path, playouts, seconds, search, endgame) of a ``net:`` spec with its
    options applied to `ctx`'s configs, checked against ``ctx.limits``; nothing is loaded.
    SpecError (over a limit: SpecLimitError) on a bad spec."""
    path, playouts, seconds, options = parse_net_spec(spec, ctx.limits)
    try:
        search, endgame = apply_play_options(options, ctx.search or SearchConfig(), ctx.endgame or EndgameConfig())
    except ValueError as e:
        raise SpecError(f"player {spec!r}: {e}") from None
    if search.leaves_per_step > ctx.limits.leaves_per_step:
        raise SpecLimitError(f"player {spec!r}: leaves_per_step {search.leaves_per_step} is over the limit of "
                             f"{ctx.limits.leaves_per_step}")
    return path, playouts, seconds, search, endgame


def _build_net(spec: str, args: str, ctx: SpecContext) -> Player:
    """The ``net:`` kind's builder (see the module docstring)."""
    from nets.netplayer import NetPlayer

    path, playouts, seconds, search, endgame = check_net_spec(spec, ctx)
    player = NetPlayer(path, playouts=playouts, seconds=seconds, name=spec, threads=ctx.threads,
                       search=search, evaluator=ctx.evaluator, endgame=endgame, forward=ctx.forward)
    player.name = spec
    return player


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


def parse_net_spec(spec: str, limits: SpecLimits = CLI_LIMITS) -> tuple[str, int, float, dict[str, str]]:
    """``net:PATH[:N|:policy|:Ts][:KEY=VALUE,...]`` -> (path, playouts, seconds, options:
    {KEY: VALUE text}); SpecError (a ValueError) if malformed, over `limits`, if PATH does
    not exist, or for options that are not in :data:`PLAY_OPTIONS`, repeated, or given to a
    raw-policy player."""
    rest, tail, opts = _split(spec)
    playouts, seconds = 200, 0.0
    if tail:
        if tail == "policy":
            playouts = 0
        elif tail.endswith("s"):
            seconds, playouts = float(tail[:-1]), 0
            if not (math.isfinite(seconds) and seconds > 0):
                raise SpecError(f"player {spec!r}: the time budget must be > 0 seconds")
            if seconds > limits.seconds:
                raise SpecLimitError(f"player {spec!r}: the time budget {seconds:g} s is over the limit of "
                                f"{limits.seconds:g} s")
        else:
            playouts = int(tail)
            if playouts < 1:
                raise SpecError(f"player {spec!r}: playouts must be >= 1 (or :policy)")
            if playouts > limits.playouts:
                raise SpecLimitError(f"player {spec!r}: {playouts} playouts is over the limit of {limits.playouts}")
    if not rest:
        raise ValueError(f"player {spec!r}: no checkpoint path; valid forms: {spec_forms()}")
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


registry.kinds()  # the bots first, so that listings read from the simplest kind up
registry.register(PlayerKind("net", NET_GRAMMAR,
                             "a network with graph search (200 playouts, N, a time budget) or its raw policy",
                             _build_net))
