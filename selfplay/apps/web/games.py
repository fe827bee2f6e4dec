"""Games of the web board: request validation, the JSON state, notations, a bounded store.

No web framework here: everything raises :class:`BadRequest` (HTTP status + message) and
is tested without a server. Conventions: row 0 is the bottom; player 1 moves first; a
column is 0-based; ``human`` is the colour (1 or 2) the person plays.

Notations of a game's moves:

* **Saiblo**: each move as the ladder protocol writes it, ``"x y"`` with ``x`` the row
  counted from the TOP and ``y`` the column (see :mod:`selfplay.apps.saiblo`).
* **replay string**: ``HxW[@ROW,COL]:c1,c2,...`` — the board, the forbidden cell (row
  from the bottom, column; absent for none) and the columns played, e.g.
  ``9x10@0,4:4,5,4`` or ``6x7:3,3,2``. :func:`parse_replay` reads it back.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

import c4fast
from c4fast.board import RULES
from c4fast.game import IllegalMove, check_setup

MAX_SPEC_CHARS = 300
_REPLAY_RE = re.compile(r"^ *(\d{1,3})x(\d{1,3})(?:@(\d{1,3}),(\d{1,3}))?:((?: *\d{1,3} *,)* *\d{1,3} *,? *)?$")


class BadRequest(Exception):
    """A request the server refuses: ``status`` (4xx, or 5xx for engine failures) and a message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# ------------------------------------------------------------------------ field checks
def _int(body: dict, key: str, lo: int, hi: int) -> int:
    v = body.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(400, f"'{key}' must be an integer in {lo}..{hi}, got {v!r}")
    if not lo <= v <= hi:
        raise BadRequest(400, f"'{key}' must be in {lo}..{hi}, got {v}")
    return v


def game_id(body: dict) -> str:
    """The ``game`` field (a non-empty string of at most 64 characters)."""
    gid = body.get("game")
    if not isinstance(gid, str) or not 0 < len(gid) <= 64:
        raise BadRequest(400, f"'game' must be a game id string, got {gid!r}")
    return gid


def column(body: dict, width: int) -> int:
    """The ``col`` field: an integer column 0..width-1 (fullness is checked by the game)."""
    return _int(body, "col", 0, width - 1)


def engine_spec(body: dict, default: str) -> str:
    """The ``engine`` field (a player spec string), ``default`` when absent."""
    spec = body.get("engine", default)
    if spec is None:
        spec = default
    if not isinstance(spec, str) or not spec.strip() or len(spec) > MAX_SPEC_CHARS:
        raise BadRequest(400, f"'engine' must be a player spec string such as 'greedy', 'uct:2000', "
                              f"'alphabeta:0.5', 'solver' or 'net:PATH[:N|:policy|:Ts][:KEY=VALUE,...]', got {spec!r}")
    return spec.strip()


def new_game_setup(body: dict, rng: np.random.Generator) -> tuple[int, int, tuple | None, list[int]]:
    """Board and moves of a ``POST /api/new`` body: (height, width, forbidden, moves).

    Either ``replay`` (a replay string) or ``height``/``width`` (4..12 each; absent: a
    random Saiblo size), ``forbidden`` ([row, col] with row 0 the bottom, null for none,
    "random" or absent for a uniform random cell) and ``moves`` (columns, default []).
    """
    if body.get("replay") is not None:
        if any(k in body for k in ("height", "width", "forbidden", "moves")):
            raise BadRequest(400, "give either 'replay' or 'height'/'width'/'forbidden'/'moves', not both")
        return parse_replay(body["replay"])
    if "height" in body or "width" in body:
        h = _int(body, "height", RULES.min_side, RULES.max_side)
        w = _int(body, "width", RULES.min_side, RULES.max_side)
    else:
        h, w = (int(rng.choice(RULES.saiblo_sides)) for _ in range(2))
    f = body.get("forbidden", "random")
    if f == "random":
        forbidden = RULES.draw_cell(rng, h, w)
    elif f is None:
        forbidden = None
    elif (isinstance(f, list) and len(f) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) for x in f)):
        forbidden = (f[0], f[1])
    else:
        raise BadRequest(400, f"'forbidden' must be [row, col] (row 0 = bottom), null or 'random', got {f!r}")
    try:
        check_setup(h, w, forbidden)
    except ValueError as e:
        raise BadRequest(400, str(e)) from None
    moves = body.get("moves", [])
    if not isinstance(moves, list) or len(moves) > h * w \
            or not all(isinstance(c, int) and not isinstance(c, bool) for c in moves):
        raise BadRequest(400, f"'moves' must be a list of at most {h * w} column integers, got {moves!r}")
    return h, w, forbidden, moves


def replay_game(height: int, width: int, forbidden, moves) -> c4fast.Game:
    """The game after `moves`; BadRequest(400) naming the first illegal move."""
    try:
        return c4fast.Game.from_moves(height, width, forbidden, moves)
    except (IllegalMove, ValueError) as e:
        raise BadRequest(400, f"illegal move list: {e}") from None


# ---------------------------------------------------------------------------- notations
def replay_string(game: c4fast.Game) -> str:
    """``HxW[@ROW,COL]:c1,c2,...`` (row from the bottom; see the module docstring)."""
    f = game.forbidden
    head = f"{game.height}x{game.width}" + (f"@{f[0]},{f[1]}" if f else "")
    return head + ":" + ",".join(str(c) for c in game.moves)


def parse_replay(text) -> tuple[int, int, tuple | None, list[int]]:
    """(height, width, forbidden, moves) of a replay string; BadRequest(400) if malformed."""
    m = _REPLAY_RE.fullmatch(text) if isinstance(text, str) and len(text) < 1000 else None
    if not m:
        raise BadRequest(400, f"a replay string looks like '9x10@0,4:4,5,4' (HxW, @row,col of the "
                              f"forbidden cell if any, ':' and the columns played), got {text!r}")
    h, w = int(m[1]), int(m[2])
    forbidden = (int(m[3]), int(m[4])) if m[3] is not None else None
    try:
        check_setup(h, w, forbidden)
    except ValueError as e:
        raise BadRequest(400, f"replay string {text!r}: {e}") from None
    body = (m[5] or "").replace(" ", "").rstrip(",")
    moves = [int(c) for c in body.split(",")] if body else []
    return h, w, forbidden, moves


def saiblo_moves(game: c4fast.Game) -> list[str]:
    """Every move as the Saiblo protocol writes it: ``"x y"`` (x = row from the top)."""
    g = c4fast.Game(game.height, game.width, game.forbidden)
    out = []
    for c in game.moves:
        row = int(g.state[0]["top"][c])
        x, y = c4fast.to_saiblo(row, c, game.height)
        out.append(f"{x} {y}")
        g.play(c)
    return out


def win_line(game: c4fast.Game) -> list[list[int]] | None:
    """The cells [row, col] of the line of four (or more) the last move made, else None."""
    if not game.result or not game.moves:
        return None
    b = game.board()
    c = game.moves[-1]
    r = int(np.nonzero(b[:, c] > 0)[0].max())
    p = int(b[r, c])
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        line = [(r, c)]
        for s in (1, -1):
            rr, cc = r + s * dr, c + s * dc
            while 0 <= rr < game.height and 0 <= cc < game.width and b[rr, cc] == p:
                line.append((rr, cc))
                rr, cc = rr + s * dr, cc + s * dc
        if len(line) >= 4:
            return [list(x) for x in sorted(line)]
    return None


# ------------------------------------------------------------------------------- games
@dataclass
class WebGame:
    """One game: the position, the engine spec and the colour the person plays."""

    id: str
    game: c4fast.Game
    engine: str
    human: int
    last_engine: dict | None = None  # the engine's last reply: col, wdl, seconds
    analyses: dict = field(default_factory=dict)  # (ply, spec) -> analysis (the newest few)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    touched: float = field(default_factory=time.monotonic)

    def engine_to_move(self) -> bool:
        return self.game.result is None and self.game.to_move != self.human

    def state(self) -> dict:
        """The JSON state (see README: board rows from the bottom, -1 the forbidden cell)."""
        g = self.game
        return {
            "game": self.id,
            "height": g.height,
            "width": g.width,
            "forbidden": list(g.forbidden) if g.forbidden else None,
            "board": g.board().tolist(),
            "to_move": g.to_move,
            "moves": g.moves,
            "legal": g.legal_moves() if g.result is None else [],
            "result": g.result,
            "human": self.human,
            "engine": self.engine,
            "saiblo": saiblo_moves(g),
            "replay": replay_string(g),
            "win_line": win_line(g),
            "last_engine": self.last_engine,
        }


class GameStore:
    """Games in memory, at most ``max_games``; adding one evicts the least recently used."""

    def __init__(self, max_games: int):
        if max_games < 1:
            raise ValueError(f"max_games must be >= 1, got {max_games}")
        self.max_games = max_games
        self._games: OrderedDict[str, WebGame] = OrderedDict()

    def __len__(self) -> int:
        return len(self._games)

    def add(self, game: c4fast.Game, engine: str, human: int) -> WebGame:
        while len(self._games) >= self.max_games:
            self._games.popitem(last=False)
        wg = WebGame(secrets.token_urlsafe(9), game, engine, human)
        self._games[wg.id] = wg
        return wg

    def get(self, gid: str) -> WebGame:
        """The game `gid` (now the most recently used); BadRequest(404) if unknown or evicted."""
        wg = self._games.get(gid)
        if wg is None:
            raise BadRequest(404, f"unknown game {gid!r} (never created, or evicted: the server keeps "
                                  f"the {self.max_games} most recently used games)")
        self._games.move_to_end(gid)
        wg.touched = time.monotonic()
        return wg
