"""Baseline players: random, greedy, plain UCT, alpha-beta, and the exact solver.

Every player follows the small :class:`Player` protocol used by the arena, the
Saiblo player and human play::

    player.reset(game)      # a new game starts (the board setup is known)
    col = player.choose(game)   # a legal column for game.to_move
    player.analysis()       # what the last choose() found ({} if nothing)

Players are deterministic for a seed (each owns its RNG; the alpha-beta player's
time budget makes its depth, hence its move, depend on the machine's speed unless
``max_depth`` binds first) and never modify the game they are given.  The search kernels are Numba ``njit`` code on POSITION_DTYPE
records and bitboard words; Python runs once per move, never per node.

* :class:`RandomPlayer`: a uniformly random legal column.
* :class:`GreedyPlayer`: win now; else block the opponent's immediate win; else avoid
  columns that give the opponent a win on top; else centre-biased random.
* :class:`UCTPlayer`: plain UCT (UCB1) with uniformly random rollouts, one rollout
  per iteration, an array tree (the kind of sample AI the Saiblo platform offers).
* :class:`AlphaBetaPlayer`: iterative-deepening negamax with a transposition table
  under a time budget, threat-aware static evaluation at the horizon (the engine of
  :mod:`c4fast.players.solver`; exact once the depth reaches the number of empty cells).
* :class:`SolverPlayer`: a uniformly random optimal move of the exact solver (on
  boards larger than the one-word engine's, alpha-beta while more than 20 cells are
  empty).

``nets.players.make_player(spec)`` builds one from a string: ``random``, ``greedy``,
``uct[:ROLLOUTS[:C[:sensible]]]``, ``alphabeta[:SECONDS[:MAX_DEPTH]]``, ``solver``.
Benchmark: ``python -m selfplay.bench.rules bots``.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

import c4fast  # noqa: F401  (sets up the Numba cache directory)
from c4fast import bitboard as bb
from c4fast.game import Game
from c4fast.protocols import Player
from c4fast.rollout import make_rng, playout, randbelow
from c4fast.players import solver as sv
from c4fast.players.registry import (PlayerKind, SpecContext, SpecError, parse_number, register, spec_forms,
                                     split_args)


def _seed_int(seed) -> int:
    """A 63-bit integer seed from an int, None (fresh entropy) or a numpy Generator."""
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**63 - 1))
    return int(seed)


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _check_running(game: Game) -> None:
    if game.result is not None:
        raise ValueError(f"the game is over (result {game.result}): no move to choose")


# =============================================================================== random
class RandomPlayer:
    """A uniformly random legal column."""

    def __init__(self, seed=None):
        self.name = "random"
        self._rng = make_rng(_seed_int(seed))

    def reset(self, game: Game) -> None:
        pass

    def choose(self, game: Game) -> int:
        _check_running(game)
        return int(_random_kernel(game._state[0], self._rng))

    def analysis(self) -> dict:
        return {}


@njit(cache=True)
def _random_kernel(pos, rng):
    legal = bb.legal_columns(pos)
    return bb.nth_set_bit(legal, randbelow(rng, bb.popcount16(legal)))


# =============================================================================== greedy
@njit(cache=True)
def _centre_pick(colmask, width, rng):
    """A random set column of `colmask`, weight width - |2c - (width - 1)| (centre heavy)."""
    total = 0
    for c in range(width):
        if (colmask >> c) & 1:
            total += width - abs(2 * c - (width - 1))
    r = randbelow(rng, total)
    for c in range(width):
        if (colmask >> c) & 1:
            r -= width - abs(2 * c - (width - 1))
            if r < 0:
                return c
    return -1


@njit(cache=True)
def _forbidden_words(pos):
    f0 = np.uint64(0)
    f1 = np.uint64(0)
    f2 = np.uint64(0)
    fr = np.int64(pos.forbidden[0])
    if fr != bb.NO_CELL:
        fc = np.int64(pos.forbidden[1])
        bit = np.uint64(1) << np.uint64((fc & 3) * bb.LANE_BITS + fr)
        if fc < 4:
            f0 = bit
        elif fc < 8:
            f1 = bit
        else:
            f2 = bit
    return f0, f1, f2


@njit(cache=True)
def greedy_column(pos, rng):
    """The greedy player's move on record `pos` (see :class:`GreedyPlayer`)."""
    width = np.int64(pos.width)
    p = pos.ply & 1
    c0, c1, c2 = bb.playable_cells(pos)
    w0, w1, w2 = bb.winning_cells(pos, p)
    win = bb.columns_of(w0 & c0, w1 & c1, w2 & c2, width)
    if win:
        return _centre_pick(win, width, rng)
    o0, o1, o2 = bb.winning_cells(pos, 1 - p)
    block = bb.columns_of(o0 & c0, o1 & c1, o2 & c2, width)
    if block:
        return _centre_pick(block, width, rng)
    legal = bb.legal_columns(pos)
    f0, f1, f2 = _forbidden_words(pos)
    u0, u1, u2 = sv._under3(o0, o1, o2, f0, f1, f2)
    unsafe = bb.columns_of(c0 & u0, c1 & u1, c2 & u2, width)
    safe = legal & ~unsafe
    return _centre_pick(safe if safe else legal, width, rng)


class GreedyPlayer:
    """Win now; else block an immediate opponent win; else avoid columns whose next
    landing cell would be an opponent winning cell (when some column is safe); else a
    centre-biased random column (weight ``width - |2c - (width - 1)|``)."""

    def __init__(self, seed=None):
        self.name = "greedy"
        self._rng = make_rng(_seed_int(seed))

    def reset(self, game: Game) -> None:
        pass

    def choose(self, game: Game) -> int:
        _check_running(game)
        return int(greedy_column(game._state[0], self._rng))

    def analysis(self) -> dict:
        return {}


# ================================================================================== UCT
@njit(cache=True)
def uct_search(root, rollouts, c_uct, sensible, rng, visits, wins, draws, first, nchild,
               move, path, work):
    """Plain UCT from record `root`: `rollouts` iterations of select (UCB1, unvisited
    children first in random order), expand (all children of the leaf, descend into a
    random one), one uniformly random rollout (random sensible moves if `sensible`),
    backup.  Node 0 is the root; the node
    arrays need ``1 + rollouts * width`` entries.  ``wins``/``draws`` count results for
    the player who moved into the node.  Returns the number of nodes used."""
    width = np.int64(root.width)
    root_p = np.int64(root.ply & 1)
    visits[0] = 0
    wins[0] = 0.0
    draws[0] = 0.0
    first[0] = -1
    nchild[0] = 0
    nfree = 1
    w = work[0]
    for _ in range(rollouts):
        bb.copy_into(root, w)
        node = 0
        depth = 0
        while w.result == bb.RUNNING:
            if nchild[node] == 0:
                legal = bb.legal_columns(w)
                k = 0
                for col in range(width):
                    if (legal >> col) & 1:
                        i = nfree + k
                        visits[i] = 0
                        wins[i] = 0.0
                        draws[i] = 0.0
                        first[i] = -1
                        nchild[i] = 0
                        move[i] = col
                        k += 1
                first[node] = nfree
                nchild[node] = k
                nfree += k
                ch = first[node] + randbelow(rng, k)
                bb.play(w, move[ch])
                depth += 1
                path[depth] = ch
                break
            f = first[node]
            k = nchild[node]
            unvisited = 0
            for i in range(f, f + k):
                if visits[i] == 0:
                    unvisited += 1
            if unvisited > 0:
                r = randbelow(rng, unvisited)
                ch = -1
                for i in range(f, f + k):
                    if visits[i] == 0:
                        if r == 0:
                            ch = i
                            break
                        r -= 1
            else:
                logn = math.log(visits[node])
                best = -1.0
                ch = f
                for i in range(f, f + k):
                    n = visits[i]
                    s = (wins[i] + 0.5 * draws[i]) / n + c_uct * math.sqrt(logn / n)
                    if s > best:
                        best = s
                        ch = i
            bb.play(w, move[ch])
            depth += 1
            path[depth] = ch
            node = ch
        playout(w, rng, sensible)
        res = w.result
        visits[0] += 1
        for d in range(1, depth + 1):
            i = path[d]
            visits[i] += 1
            mover = (root_p + d - 1) & 1  # player index who moved into the node
            if res == bb.DRAW:
                draws[i] += 1.0
            elif res == mover + 1:
                wins[i] += 1.0
    return nfree


class UCTPlayer:
    """Plain UCT with ``rollouts`` random rollouts per move (UCB1 constant ``c``).
    The move is the most visited root child (ties: better mean, then lower column).
    ``sensible=True`` makes the rollouts play random sensible moves instead (win now,
    else block; see :func:`c4fast.bitboard.sensible_columns`)."""

    def __init__(self, rollouts: int = 2000, seed=None, c: float = 1.4, sensible: bool = False):
        if not _is_int(rollouts) or rollouts < 1:
            raise ValueError(f"rollouts must be a positive integer, got {rollouts!r}")
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0):
            raise ValueError(f"c must be a finite number >= 0, got {c!r}")
        self.rollouts = int(rollouts)
        self.c = float(c)
        self.sensible = bool(sensible)
        self.name = f"uct:{self.rollouts}"
        if self.c != 1.4 or self.sensible:
            self.name += f":{self.c:g}"
        if self.sensible:
            self.name += ":sensible"
        self._rng = make_rng(_seed_int(seed))
        n = 1 + self.rollouts * bb.MAX_SIZE
        self._visits = np.zeros(n, np.int64)
        self._wins = np.zeros(n, np.float64)
        self._draws = np.zeros(n, np.float64)
        self._first = np.zeros(n, np.int64)
        self._nchild = np.zeros(n, np.int64)
        self._move = np.zeros(n, np.int64)
        self._path = np.zeros(bb.MAX_SIZE * bb.MAX_SIZE + 2, np.int64)
        self._work = np.zeros(1, dtype=bb.POSITION_DTYPE)
        self._analysis: dict = {}

    def reset(self, game: Game) -> None:
        self._analysis = {}

    def choose(self, game: Game) -> int:
        _check_running(game)
        uct_search(game._state[0], self.rollouts, self.c, self.sensible, self._rng, self._visits,
                   self._wins, self._draws, self._first, self._nchild, self._move,
                   self._path, self._work)
        f, k = int(self._first[0]), int(self._nchild[0])
        vis = {int(self._move[i]): int(self._visits[i]) for i in range(f, f + k)}
        n = max(1, int(self._visits[0]))
        w = float(self._wins[f:f + k].sum()) / n
        d = float(self._draws[f:f + k].sum()) / n
        self._analysis = {"wdl": (w, d, max(0.0, 1.0 - w - d)), "visits": vis}

        def key(i):
            v = self._visits[i]
            mean = (self._wins[i] + 0.5 * self._draws[i]) / v if v else -1.0
            return (v, mean, -int(self._move[i]))

        return int(self._move[max(range(f, f + k), key=key)])

    def analysis(self) -> dict:
        return dict(self._analysis)


# =========================================================================== alpha-beta
class AlphaBetaPlayer:
    """Iterative-deepening alpha-beta (negamax, transposition table keyed by the Zobrist
    hash, TT move then threat-creating moves then centre first, non-losing moves only,
    forced replies extend the depth) with a static evaluation at the horizon: open
    windows of two and three stones, winning cells weighted by row parity, blocked
    (shadowed) and stacked threats.

    Each iteration runs in one ``njit`` call with a node budget derived from the nodes
    per second measured so far, so the search stops close to ``time_budget_s``; depth 1
    always completes.  The search is exact once the depth reaches the number of empty
    cells (or a forced result is found), then it plays an optimal move in Pons's sense
    (fastest win, slowest loss).  Ties between equal root values are broken at random.
    """

    def __init__(self, time_budget_s: float = 0.5, max_depth: int = 64, seed=None,
                 tt_log2: int = 20):
        if not (isinstance(time_budget_s, (int, float)) and math.isfinite(time_budget_s)
                and time_budget_s > 0):
            raise ValueError(f"time_budget_s must be a positive number, got {time_budget_s!r}")
        if not _is_int(max_depth) or max_depth < 1:
            raise ValueError(f"max_depth must be a positive integer, got {max_depth!r}")
        if not 10 <= tt_log2 <= 28:
            raise ValueError(f"tt_log2 must be in 10..28, got {tt_log2}")
        self.time_budget_s = float(time_budget_s)
        self.max_depth = int(max_depth)
        self.name = f"alphabeta:{self.time_budget_s:g}" + (
            "" if self.max_depth == 64 else f":{self.max_depth}"
        )
        self._rng = np.random.default_rng(_seed_int(seed))
        self._ttk = np.zeros(1 << tt_log2, dtype=np.uint64)
        self._ttd = np.zeros(1 << tt_log2, dtype=np.int64)
        self._buf = np.zeros((bb.MAX_SIZE * bb.MAX_SIZE + 2, sv.BUF_STRIDE), dtype=np.int64)
        self._stats = np.zeros(4, dtype=np.int64)
        self._vals = np.zeros(bb.MAX_SIZE, dtype=np.int64)
        self._exact = np.zeros(bb.MAX_SIZE, dtype=np.int64)
        self._analysis: dict = {}

    def reset(self, game: Game) -> None:
        self._ttk[:] = 0
        self._ttd[:] = 0
        self._analysis = {}

    def choose(self, game: Game) -> int:
        _check_running(game)
        t0 = time.perf_counter()
        st = game._state[0]
        legal = game.legal_moves()
        cells = game.height * game.width - (game.forbidden is not None)
        n = game.ply
        wins = [c for c in legal if _wins_at_once(st, c)]
        if wins:
            self._analysis = {"score": (cells + 1 - n) // 2, "exact": True, "depth": 1,
                              "nodes": 0, "wdl": (1.0, 0.0, 0.0)}
            return int(self._rng.choice(wins))
        if len(legal) == 1:
            self._analysis = {}
            return legal[0]
        geo = sv.geometry3(game.height, game.width, game.forbidden)
        words = sv.record_to_words3(st)
        empties = cells - n
        best_vals = None
        depth_done = 0
        nodes_total = 0
        budget_nodes = np.iinfo(np.int64).max
        for d in range(1, min(self.max_depth, empties) + 1):
            self._stats[:] = 0
            self._stats[1] = budget_nodes
            sv._root3(*words, np.int64(d), geo, self._ttk, self._ttd, self._buf,
                      self._stats, self._vals, self._exact)
            nodes_total += int(self._stats[0])
            if self._stats[2]:
                break  # out of time in the middle of this depth: keep the previous one
            best_vals = (self._vals.copy(), self._exact.copy())
            depth_done = d
            best = max(int(v) for c, v in enumerate(self._vals) if self._exact[c] >= 0)
            if abs(best) >= sv.WIN_BASE:
                break  # a forced result: deeper searches cannot change the choice
            elapsed = time.perf_counter() - t0
            remaining = self.time_budget_s - elapsed
            if elapsed > 0.45 * self.time_budget_s or remaining <= 0:
                break
            rate = nodes_total / max(elapsed, 1e-6)
            budget_nodes = max(1000, int(0.85 * rate * remaining))  # 15% margin for jitter
        vals, exact = best_vals
        best = max(int(vals[c]) for c in legal)
        ties = [c for c in legal if exact[c] == 1 and int(vals[c]) == best]
        col = int(self._rng.choice(ties)) if ties else max(legal, key=lambda c: vals[c])
        proven = abs(best) >= sv.WIN_BASE or depth_done >= empties
        if best >= sv.WIN_BASE:
            wdl = (1.0, 0.0, 0.0)
        elif best <= -sv.WIN_BASE:
            wdl = (0.0, 0.0, 1.0)
        elif proven:
            wdl = (0.0, 1.0, 0.0)
        else:
            p = 1.0 / (1.0 + math.exp(-best / 100.0))
            wdl = (p, 0.0, 1.0 - p)
        self._analysis = {
            "score": sv.value_to_pons(best) if proven else None,
            "value": best,
            "exact": proven,
            "depth": depth_done,
            "nodes": nodes_total,
            "values": {c: int(vals[c]) for c in legal},
            "wdl": wdl,
        }
        return col

    def analysis(self) -> dict:
        return dict(self._analysis)


@njit(cache=True)
def _wins_at_once_kernel(pos, col):
    p = pos.ply & 1
    c0, c1, c2 = bb.playable_cells(pos)
    w0, w1, w2 = bb.winning_cells(pos, p)
    return (bb.columns_of(w0 & c0, w1 & c1, w2 & c2, pos.width) >> col) & 1


def _wins_at_once(state, col: int) -> bool:
    return bool(_wins_at_once_kernel(state, col))


# =============================================================================== solver
class SolverPlayer:
    """A uniformly random optimal move (Pons's sense: fastest win, slowest loss) by the
    exact solver.

    Exact solving is only practical on small boards (6x7 from a few moves in; the
    first moves of 6x7 can take minutes without an opening book) and in endgames.  On
    boards that do not fit the one-word engine (``(height + 1) * width > 64``, every
    Saiblo size) positions with more than ``max_empty`` empty cells (default 20) are
    played by an :class:`AlphaBetaPlayer` of ``fallback_seconds`` instead, and
    ``analysis()["exact"]`` is False.  ``max_empty`` given explicitly applies to every
    board.
    """

    def __init__(self, seed=None, tt_log2: int = 22, max_empty: int | None = None,
                 fallback_seconds: float = 1.0):
        self.name = "solver"
        seed = _seed_int(seed)
        self._rng = np.random.default_rng(seed)
        self._solver = sv.Solver(tt_log2)
        self._max_empty = max_empty
        self._fallback = AlphaBetaPlayer(fallback_seconds, seed=seed + 1, tt_log2=18)
        self._analysis: dict = {}

    def reset(self, game: Game) -> None:
        self._analysis = {}
        self._fallback.reset(game)

    def _limit(self, game: Game) -> int | None:
        if self._max_empty is not None:
            return self._max_empty
        return None if sv.fits_one_word(game.height, game.width) else 20

    def choose(self, game: Game) -> int:
        _check_running(game)
        limit = self._limit(game)
        empty = game.height * game.width - (game.forbidden is not None) - game.ply
        if limit is not None and empty > limit:
            col = self._fallback.choose(game)
            self._analysis = dict(self._fallback.analysis(), exact=False, fallback=True)
            return col
        moves = self._solver.best_moves(game)
        s = self._solver.solve(game)
        wdl = (1.0, 0.0, 0.0) if s > 0 else ((0.0, 1.0, 0.0) if s == 0 else (0.0, 0.0, 1.0))
        self._analysis = {"score": s, "best": moves, "exact": True, "wdl": wdl}
        return int(self._rng.choice(moves))

    def analysis(self) -> dict:
        return dict(self._analysis)


def play_game(first: Player, second: Player, game: Game) -> Game:
    """Play `first` (player 1) against `second` from `game` (copied) to the end."""
    g = game.copy()
    first.reset(g)
    second.reset(g)
    players = (first, second)
    while g.result is None:
        g.play(players[g.to_move - 1].choose(g))
    return g


#: share of the moves of :func:`play_fork` that are the greedy player's (the rest uniform)
FORK_GREEDY_SHARE = 0.5

#: share of the moves of an alpha-beta fork that are the search's best (the rest uniform
#: among the columns the search does not see losing)
FORK_SEARCH_SHARE = 0.5


def play_fork(game: Game, plies: int, rng: np.random.Generator, searcher: "AlphaBetaPlayer | None" = None) -> int:
    """Advance running `game` in place by up to `plies` cheap randomized moves that never
    end it (self-play's mid-game forks). Without `searcher` each move is the greedy
    player's with probability :data:`FORK_GREEDY_SHARE` (it blocks an immediate opponent
    win and avoids giving one), else a uniformly random legal column. With `searcher` (a
    depth-limited :class:`AlphaBetaPlayer`, reset here) each move is its best with
    probability :data:`FORK_SEARCH_SHARE`, else uniform among the columns its search does
    not prove lost (its best where every column loses): quieter, balanced positions.
    Either way a column that would end the game (a win or the last cell) is replaced by a
    uniform one of those that do not (with `searcher`, of those that also hand the opponent
    no win at once, where there are any); it stops early when every column ends the game.
    Returns the number of moves played; all randomness from `rng` (and the searcher's seed)."""
    if game.result is not None:
        raise ValueError("play_fork needs a running game")
    nb_rng = make_rng(int(rng.integers(2**31)))
    if searcher is not None:
        searcher.reset(game)
    played = 0
    while played < plies:
        legal = game.legal_moves()
        if searcher is not None:
            col = searcher.choose(game)
            if rng.random() >= FORK_SEARCH_SHARE:
                values = searcher.analysis().get("values") or {}  # none: a win at once, replaced below
                safe = [c for c in legal if c in values and values[c] > -sv.WIN_BASE]
                if safe:  # where every column is proven lost, the search's (slowest loss) stays
                    col = int(safe[int(rng.integers(len(safe)))])
        elif rng.random() < FORK_GREEDY_SHARE:
            col = int(greedy_column(game._state[0], nb_rng))
        else:
            col = int(legal[int(rng.integers(len(legal)))])
        g2 = game.copy()
        g2.play(col)
        if g2.result is not None:
            quiet = [c for c in legal if c != col and _keeps_running(game, c)]
            if not quiet:
                break
            if searcher is not None:  # the search's player: not a column that hands over a win at once
                quiet = [c for c in quiet if not _hands_over_a_win(game, c)] or quiet
            col = quiet[int(rng.integers(len(quiet)))]
        game.play(col)
        played += 1
    return played


def _hands_over_a_win(game: Game, col: int) -> bool:
    """After `col` the opponent has a column that wins at once."""
    g2 = game.copy()
    g2.play(col)
    return g2.result is None and any(_wins_at_once(g2._state[0], c) for c in g2.legal_moves())


def _keeps_running(game: Game, col: int) -> bool:
    g2 = game.copy()
    g2.play(col)
    return g2.result is None


def random_positions(n: int, seed: int, sizes=None, plies: tuple[int, int] | None = None) -> list[Game]:
    """`n` running positions: random Saiblo setups (or random sizes `sizes`) after a
    random number of uniformly random moves (uniform in ``plies`` = (lo, hi) inclusive;
    default 0 .. half the cells)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        if sizes is None:
            g = Game.random(rng)
        else:
            h, w = (int(rng.choice(sizes)) for _ in range(2))
            f = (int(rng.integers(h)), int(rng.integers(w))) if rng.random() < 0.75 else None
            g = Game(h, w, f)
        k = int(rng.integers(0, g.height * g.width // 2) if plies is None else rng.integers(plies[0], plies[1] + 1))
        for _ in range(k):
            if g.result is not None:
                break
            g.play(int(rng.choice(g.legal_moves())))
        if g.result is None:
            out.append(g)
    return out


# ================================================================================ specs
def _no_args(cls):
    def build(spec: str, args: str, ctx: SpecContext) -> Player:
        split_args(spec, args, 0)
        return cls(seed=ctx.seed)
    return build


def _build_uct(spec: str, args: str, ctx: SpecContext) -> Player:
    parts = split_args(spec, args, 3)
    if len(parts) == 3 and parts[2] != "sensible":
        raise SpecError(f"bad player spec {spec!r}: expected 'sensible', got {parts[2]!r}; "
                        f"valid forms: {spec_forms()}")
    rollouts = parse_number(spec, parts[0], int, "ROLLOUTS", 1, ctx.limits.rollouts) if parts else 2000
    c = parse_number(spec, parts[1], float, "C", 0) if len(parts) > 1 else 1.4
    return UCTPlayer(rollouts, seed=ctx.seed, c=c, sensible=len(parts) == 3)


def _build_alphabeta(spec: str, args: str, ctx: SpecContext) -> Player:
    parts = split_args(spec, args, 2)
    secs = parse_number(spec, parts[0], float, "SECONDS", None, ctx.limits.seconds) if parts else 0.5
    if secs <= 0:
        raise SpecError(f"bad player spec {spec!r}: SECONDS must be > 0, got {secs}; valid forms: {spec_forms()}")
    depth = parse_number(spec, parts[1], int, "MAX_DEPTH", 1, ctx.limits.depth) if len(parts) > 1 else 64
    return AlphaBetaPlayer(secs, depth, seed=ctx.seed)


register(PlayerKind("random", "random", "uniformly random legal moves", _no_args(RandomPlayer)))
register(PlayerKind("greedy", "greedy", "wins at once, blocks, else near the centre", _no_args(GreedyPlayer)))
register(PlayerKind("uct", "uct[:ROLLOUTS[:C[:sensible]]]",
                    "plain UCT with random (or sensible) rollouts; 2000 rollouts, C 1.4", _build_uct))
register(PlayerKind("alphabeta", "alphabeta[:SECONDS[:MAX_DEPTH]]",
                    "iterative-deepening alpha-beta with a static evaluation; 0.5 s", _build_alphabeta))
register(PlayerKind("solver", "solver", "exact optimal moves on 6x7 (alpha-beta fallback on larger boards)",
                    _no_args(SolverPlayer)))
