"""Player specs as registered kinds: one table from a spec's first word to its builder.

A spec is ``KIND[:ARGS]`` (``uct:2000``, ``alphabeta:0.2``, ``net:models/c4fast_cpu.pt:200``).
Each kind is a :class:`PlayerKind` — its grammar, a one-line summary and a builder — that
its own module registers with :func:`register` when imported. The registry finds the
kinds itself on first use: every module of :mod:`c4fast.players` is imported (the bots,
the solver), then every module named by the ``c4fast.players`` entry-point group (``nets``
registers ``net:`` that way, so this torch-free layer never imports it). A new player is
therefore one new file in ``c4fast/players/`` (see docs/EXTENDING.md).

Budgets: every numeric part of a spec that sets work or memory (playouts, rollouts,
seconds, search depth, leaves per step) is bounded by a :class:`SpecLimits`; the commands
use :data:`CLI_LIMITS`, the web board smaller ones. A spec over a bound, malformed or of
an unknown kind raises :class:`SpecError` (a ``ValueError``) naming the valid forms, before
anything is allocated.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
from collections.abc import Callable
from importlib import metadata

from c4fast.protocols import Player

__all__ = ["CLI_LIMITS", "PlayerKind", "SpecContext", "SpecError", "SpecLimitError", "SpecLimits", "kinds", "make_player",
           "register", "spec_forms", "spec_help"]

ENTRY_POINT_GROUP = "c4fast.players"


class SpecError(ValueError):
    """A player spec that is malformed, of an unknown kind, or over its budget."""


class SpecLimitError(SpecError):
    """A player spec over one of its :class:`SpecLimits` (the message names the limit)."""


@dataclasses.dataclass(frozen=True)
class SpecLimits:
    """Upper bounds on what a spec may ask for (checked before anything is built).

    ================== ============ ==================================================
    field              CLI default  meaning
    ================== ============ ==================================================
    playouts           5,000,000    graph-search playouts per move (~68 B each)
    rollouts           5,000,000    UCT rollouts per move (a node per rollout and column)
    seconds            3600         a time budget per move, in seconds
    depth              64           alpha-beta depth
    leaves_per_step    256          leaves a graph search selects per step
    ================== ============ ==================================================
    """

    playouts: int = 5_000_000
    rollouts: int = 5_000_000
    seconds: float = 3600.0
    depth: int = 64
    leaves_per_step: int = 256


#: The bounds of the command-line tools (arena, play, Saiblo, the loop).
CLI_LIMITS = SpecLimits()


@dataclasses.dataclass(frozen=True)
class SpecContext:
    """What the caller decides about a player beyond its spec.

    `seed` seeds its RNG; `threads` is the thread count of a network forward; `search` and
    `endgame` replace the default :class:`c4fast.config.SearchConfig` and
    :class:`c4fast.config.EndgameConfig` of a searching network player (a spec's
    ``:KEY=VALUE`` options override them); `forward` picks what computes a net; `evaluator`
    replaces loading the weights (players sharing one net); `limits` bounds the spec.
    """

    seed: int | None = 0
    threads: int = 1
    search: object = None
    endgame: object = None
    forward: str = "auto"
    evaluator: object = None
    limits: SpecLimits = CLI_LIMITS


@dataclasses.dataclass(frozen=True)
class PlayerKind:
    """A registered kind of player.

    `name` is the spec's first word; `grammar` its full form for help texts (e.g.
    ``uct[:ROLLOUTS[:C[:sensible]]]``); `summary` one line on what it is; `build(spec,
    args, ctx)` makes the player, `args` being the text after ``NAME:`` ("" if none), and
    raises :class:`SpecError` (or ``ValueError``) on a bad spec. The player's ``name``
    must be a spec that rebuilds it.
    """

    name: str
    grammar: str
    summary: str
    build: Callable[[str, str, SpecContext], Player]


_KINDS: dict[str, PlayerKind] = {}
_discovered = False


def register(kind: PlayerKind) -> PlayerKind:
    """Add `kind` (ValueError if its name is taken by a different kind or is not a word)."""
    if not kind.name.isidentifier() or kind.name != kind.name.lower():
        raise ValueError(f"player kind name {kind.name!r} must be a lower-case word")
    old = _KINDS.get(kind.name)
    if old is not None and (old.build is not kind.build and old.build.__qualname__ != kind.build.__qualname__):
        raise ValueError(f"player kind {kind.name!r} is already registered by {old.build.__module__}")
    _KINDS[kind.name] = kind
    return kind


def _discover() -> None:
    """Import c4fast.players' modules and the entry-point group's (once)."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    import c4fast.players as pkg

    for mod in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(mod.name)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        importlib.import_module(ep.value.split(":")[0])


def kinds() -> dict[str, PlayerKind]:
    """Every registered kind, by name, in registration order."""
    _discover()
    return dict(_KINDS)


def spec_forms() -> str:
    """The grammar of every kind, ``|``-separated (for error messages)."""
    return " | ".join(k.grammar for k in kinds().values())


def spec_help() -> str:
    """One line per kind: grammar and summary (for ``--help`` and the README)."""
    ks = kinds().values()
    width = max(len(k.grammar) for k in ks)
    return "\n".join(f"  {k.grammar:<{width}}  {k.summary}" for k in ks)


def make_player(spec: str, ctx: SpecContext | None = None, **fields) -> Player:
    """The player of `spec` (``KIND[:ARGS]``), built by its kind with `ctx` (or a
    :class:`SpecContext` of `fields`). SpecError on a bad spec."""
    if not isinstance(spec, str):
        raise SpecError(f"player spec must be a string, got {spec!r}; valid forms: {spec_forms()}")
    ctx = ctx if ctx is not None else SpecContext(**fields)
    name, _, args = spec.partition(":")
    kind = kinds().get(name.strip().lower())
    if kind is None:
        raise SpecError(f"bad player spec {spec!r}: unknown player kind {name!r}; valid forms: {spec_forms()}")
    return kind.build(spec, args, ctx)


# ---------------------------------------------------------------- helpers for builders
def parse_number(spec: str, text: str, typ: type, what: str, lo=None, hi=None):
    """`text` as `typ` (int or float, finite) within [lo, hi]; SpecError naming `what`."""
    def bad(why: str) -> SpecError:
        return SpecError(f"bad player spec {spec!r}: {why}; valid forms: {spec_forms()}")

    try:
        v = typ(text)
    except ValueError:
        raise bad(f"{what} must be {'an integer' if typ is int else 'a number'}, got {text!r}") from None
    if typ is float and not math.isfinite(v):
        raise bad(f"{what} must be finite, got {text!r}")
    if lo is not None and v < lo:
        raise bad(f"{what} must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise SpecLimitError(f"player {spec!r}: {what} {v} is over the limit of {hi}")
    return v


def split_args(spec: str, args: str, most: int) -> list[str]:
    """`args` split at ':' (lower-cased; [] if empty); SpecError past `most` parts."""
    parts = args.strip().lower().split(":") if args.strip() else []
    if len(parts) > most:
        why = "takes no parameters" if most == 0 else "too many parameters"
        raise SpecError(f"bad player spec {spec!r}: {why}; valid forms: {spec_forms()}")
    return parts
