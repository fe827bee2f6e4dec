"""Engines for the web board, in worker processes the event loop never waits on.

Numba kernels hold the GIL, so a search in a thread would freeze the server: every
engine runs in a spawned worker process instead. A request carries the whole game
(board setup and moves), so workers hold no game state, only a few players built by
the arena's factory (this module is the only place the web board imports it), reset
for each request. :class:`EnginePool` hands a request to an idle worker and waits in a
thread with a time cap; a worker past its cap, or whose caller gave up, is killed and
replaced, so a slow engine costs one worker for at most the cap.

Requests (dicts): ``op`` is ``check`` (build the player), ``move`` (the engine's column
for the position), ``analyse`` (see :func:`analyse`) or ``solve`` (the exact solver's
score of every legal column, Pons's convention, for the side to move).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import multiprocessing as mp
import os
import time
from collections import OrderedDict

import c4fast
from c4fast.players.registry import SpecLimitError
from nets.players import make_player, split_net_spec
from selfplay.apps.web.security import WEB_LIMITS
from selfplay.apps.web.games import BadRequest
from selfplay.apps.web.security import MODEL_UNAVAILABLE

log = logging.getLogger("selfplay.apps.web")

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
MAX_PLAYERS = 6  # players kept per worker (each may hold a network or search tables)


def policy_spec(spec: str) -> str | None:
    """The raw-policy spec (``net:PATH:policy``) of a network spec, None for other engines."""
    if not spec.startswith("net:"):
        return None
    return f"net:{split_net_spec(spec)[0]}:policy"


def _expected(wdl) -> float:
    """W + D/2 of a (win, draw, loss) triple."""
    return float(wdl[0]) + 0.5 * float(wdl[1])


def _alphabeta_value(v: int) -> float:
    """An alpha-beta root value (c4fast.players.solver units) as an expected score in [0, 1]."""
    from c4fast.players.solver import WIN_BASE

    if v >= WIN_BASE:
        return 1.0
    if v <= -WIN_BASE:
        return 0.0
    return 1.0 / (1.0 + math.exp(-v / 100.0))  # the alpha-beta player's own mapping


#: a graph search's root Q stands for a column's value in :func:`analyse` where the column
#: has at least this share of the most visited column's visits (fewer: a search of its own)
ROOT_Q_SHARE = 0.25

_PROVEN_VALUE = {"win": 1.0, "draw": 0.5, "loss": 0.0}


def root_values(a: dict, legal: list[int]) -> dict[int, float]:
    """{column: expected score in [0, 1] for the side to move} from a player's
    ``analysis()`` `a`: exact for its proven columns (``proven``: a graph search's or the
    endgame solver's), (Q + 1) / 2 for the columns of its root ``q`` with at least
    :data:`ROOT_Q_SHARE` of the top visits; empty for a player with neither."""
    q, proven, visits = a.get("q") or {}, a.get("proven") or {}, a.get("visits") or {}
    enough = max(1.0, ROOT_Q_SHARE * max(visits.values(), default=0))
    out = {}
    for c in legal:
        if c in proven:
            out[c] = _PROVEN_VALUE[proven[c]]
        elif c in q and visits.get(c, 0) >= enough:
            out[c] = min(1.0, max(0.0, (float(q[c]) + 1.0) / 2.0))
    return out


class Engines:
    """The players of one worker process, by spec (least recently used dropped)."""

    def __init__(self, seed: int):
        self._seed = seed
        self._players: OrderedDict = OrderedDict()
        self._solver = None

    def player(self, spec: str):
        p = self._players.get(spec)
        if p is None:
            try:
                p = make_player(spec, seed=self._seed, limits=WEB_LIMITS)
            except SpecLimitError as e:  # a budget: nothing about any file in the message
                raise BadRequest(400, f"bad engine spec: {e}") from None
            except Exception as e:  # noqa: BLE001  (a model that does not load, whatever the reason)
                if spec.startswith("net:"):  # the reason to the log only: the API is no file oracle
                    log.warning("engine %r: %s: %s", spec, type(e).__name__, e)
                    raise BadRequest(400, MODEL_UNAVAILABLE) from None
                if isinstance(e, ValueError):
                    raise BadRequest(400, f"bad engine spec: {e}") from None
                raise
            self._players[spec] = p
            while len(self._players) > MAX_PLAYERS:
                self._players.popitem(last=False)
        self._players.move_to_end(spec)
        return p

    def handle(self, req: dict) -> dict:
        op = req["op"]
        if op == "check":
            return {"name": self.player(req["spec"]).name}
        game = c4fast.Game.from_moves(req["height"], req["width"], req["forbidden"], req["moves"])
        if op == "move":
            return self.move(req["spec"], game)
        if op == "analyse":
            return analyse(self, req["spec"], game, req["pv_plies"], req["soft_seconds"])
        if op == "solve":
            return {"scores": self.solve(game)}
        raise ValueError(f"unknown op {op!r}")

    def move(self, spec: str, game: c4fast.Game) -> dict:
        p = self.player(spec)
        p.reset(game)
        t0 = time.perf_counter()
        col = int(p.choose(game.copy()))
        if col not in game.legal_moves():
            raise RuntimeError(f"engine {spec!r} chose the illegal column {col}")
        a = p.analysis()
        wdl = [float(x) for x in a["wdl"]] if a.get("wdl") else None
        return {"col": col, "wdl": wdl, "seconds": round(time.perf_counter() - t0, 4)}

    def solve(self, game: c4fast.Game) -> dict:
        from c4fast.players.solver import Solver

        if self._solver is None:
            self._solver = Solver(tt_log2=22)
        return {str(c): int(s) for c, s in self._solver.move_scores(game).items()}


def analyse(engines: Engines, spec: str, game: c4fast.Game, pv_plies: int, soft_seconds: float) -> dict:
    """What engine `spec` thinks of `game` (running), for the side to move.

    * ``best``, ``wdl``: its move and its win/draw/loss estimate (None if it has none);
    * ``visits``: search visits per column (tree searches; None elsewhere);
    * ``policy``, ``raw_wdl``: the network's raw policy over the sensible columns (0 on
      the others) and raw value, for ``net:`` engines;
    * ``values``: expected score (W + D/2) of each legal column for the side to move:
      alpha-beta's root values; or a graph search's own root values ((Q + 1) / 2, exact
      where proven) for the columns it searched with at least :data:`ROOT_Q_SHARE` of the
      most visited column's visits, and for the others the engine's estimate after
      searching the position the column leads to (``values_from`` says which);
    * ``pv``: the engine's line — its move, then its choice for each side in turn, up to
      ``pv_plies`` moves.

    Extra searches stop once ``soft_seconds`` have passed (``partial`` is then True).
    """
    t0 = time.perf_counter()
    width = game.width
    legal = game.legal_moves()
    p = engines.player(spec)
    p.reset(game)
    best = int(p.choose(game.copy()))
    a = p.analysis()
    out = {"best": best, "wdl": [float(x) for x in a["wdl"]] if a.get("wdl") else None,
           "visits": None, "policy": None, "raw_wdl": None, "values": None, "values_from": None,
           "pv": [best], "partial": False}
    if a.get("visits") is not None:
        out["visits"] = [int(a["visits"].get(c, 0)) if c in legal else None for c in range(width)]
    pol = a.get("policy")
    raw_wdl = a.get("wdl") if pol is not None else None
    pspec = policy_spec(spec)
    if pol is None and pspec is not None:
        pp = engines.player(pspec)
        pp.reset(game)
        pp.choose(game.copy())
        pa = pp.analysis()
        pol, raw_wdl = pa.get("policy"), pa.get("wdl")
    if pol is not None:
        out["policy"] = [float(pol.get(c, 0.0)) if c in legal else None for c in range(width)]
        out["raw_wdl"] = [float(x) for x in raw_wdl] if raw_wdl else None

    def over() -> bool:
        if time.perf_counter() - t0 > soft_seconds:
            out["partial"] = True
        return out["partial"]

    line = game.copy()
    line.play(best)
    while line.result is None and len(out["pv"]) < pv_plies and not over():
        c = int(p.choose(line.copy()))
        out["pv"].append(c)
        line.play(c)

    if a.get("values"):
        out["values"] = [_alphabeta_value(a["values"][c]) if c in a["values"] else None
                         for c in range(width)]
        out["values_from"] = "alpha-beta root values"
    elif a.get("wdl") is not None:
        values: list = [None] * width
        mover = game.to_move
        from_root = root_values(a, legal)
        for c, v in from_root.items():
            values[c] = v
        rank = out["visits"] or out["policy"] or [0] * width  # the likeliest columns first
        for c in sorted(legal, key=lambda c: -(rank[c] or 0)):
            if c in from_root:
                continue
            if over():
                break
            child = game.copy()
            child.play(c)
            if child.result is not None:
                values[c] = 1.0 if child.result == mover else 0.5
                continue
            p.choose(child.copy())
            w = p.analysis().get("wdl")
            if w is not None:
                values[c] = 1.0 - _expected(w)
        out["values"] = values
        out["values_from"] = ("engine search after each column" if not from_root else
                              "the search's root values" if len(from_root) == len(legal) else
                              "the search's root values, engine search after the other columns")
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out


# ============================================================================ processes
def worker_main(conn, seed: int) -> None:
    """A worker process: warm up, say ready, then answer requests until the pipe closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    engines = Engines(seed)
    warm = c4fast.Game(6, 7)
    engines.move("greedy", warm)  # loads the cached Numba kernels before the first request
    conn.send({"ready": True})
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = {"ok": True, **engines.handle(req)}
        except BadRequest as e:
            reply = {"ok": False, "status": e.status, "error": e.message}
        except Exception as e:  # reported to the caller, the worker goes on
            logging.getLogger("selfplay.apps.web.worker").exception("request %s failed", req.get("op"))
            reply = {"ok": False, "status": 500, "error": f"engine error: {type(e).__name__}: {e}"}
        reply["id"] = req.get("id")
        conn.send(reply)


class _Worker:
    """One spawned worker process and its end of the pipe."""

    def __init__(self, ctx, name: str, seed: int):
        self.name = name
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, seed), name=name, daemon=True)
        self.proc.start()
        child.close()

    def wait_ready(self) -> None:
        msg = self.conn.recv()
        if not msg.get("ready"):
            raise RuntimeError(f"{self.name}: unexpected first message {msg!r}")

    def request(self, req: dict) -> dict:
        self.conn.send(req)
        reply = self.conn.recv()
        if reply.get("id") != req["id"]:
            raise RuntimeError(f"{self.name}: reply {reply.get('id')} to request {req['id']}")
        return reply

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class EnginePool:
    """``size`` worker processes; :meth:`call` runs one request on an idle one under a cap."""

    def __init__(self, size: int, seed: int = 0, name: str = "engine"):
        if size < 1:
            raise ValueError(f"an engine pool needs at least one worker, got {size}")
        self.size = size
        self.name = name
        self._seed = seed
        self._ctx = mp.get_context("spawn")
        self._ids = itertools.count()
        self._idle: asyncio.Queue | None = None
        self._workers: set[_Worker] = set()
        self._tasks: set[asyncio.Task] = set()
        self._seeds = itertools.count()
        self._starting = 0  # workers being started
        self.busy = 0
        self.calls = 0  # requests handed to a worker
        self.restarts = 0

    @property
    def started(self) -> int:
        """Worker processes started (warming up, idle or busy)."""
        return len(self._workers)

    @property
    def starting(self) -> int:
        """Workers not yet warmed up (being started or waiting for their turn to start)."""
        return self._starting

    @property
    def idle(self) -> int:
        """Workers started, warmed up and free."""
        return self._idle.qsize() if self._idle is not None else 0

    async def start(self) -> None:
        """Start the workers one after another, outside the event loop (each joins the
        idle queue once warmed up); the first :meth:`call` starts them if this was not called."""
        # one BLAS thread per worker: the numpy net's small matrix products are 5-10x
        # slower with OpenBLAS's spinning threads on a busy machine (spawned children
        # inherit the environment; the server itself does no BLAS work)
        for var in BLAS_THREAD_VARS:
            os.environ.setdefault(var, "1")
        self._idle = asyncio.Queue()
        self._launch(self.size)

    def _launch(self, n: int) -> None:
        """Start `n` workers in a background task, each once the previous one is ready."""
        self._starting += n
        task = asyncio.get_running_loop().create_task(self._start_workers(n))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start_workers(self, n: int) -> None:
        for i in range(n):
            try:
                name, seed = f"{self.name}-{next(self._ids)}", self._seed + next(self._seeds)
                w = await asyncio.to_thread(_Worker, self._ctx, name, seed)  # spawning blocks
                self._workers.add(w)
                await self._admit(w)
            finally:
                self._starting -= 1  # after _admit: a started worker is idle or gone

    async def _admit(self, w: _Worker) -> None:
        try:
            await asyncio.to_thread(w.wait_ready)
        except Exception as e:  # noqa: BLE001  (logged; the pool runs one short)
            log.error("%s failed to start: %s", w.name, e)
            self._discard(w)
            return
        self._idle.put_nowait(w)

    def _discard(self, w: _Worker) -> None:
        self._workers.discard(w)
        w.kill()

    def _replace(self, w: _Worker) -> None:
        self._discard(w)
        self.restarts += 1
        self._launch(1)

    async def call(self, req: dict, seconds: float, wait_seconds: float) -> dict:
        """Run `req` on an idle worker: its reply, or BadRequest (the worker's 4xx; 503 if
        none is free within `wait_seconds`; 504 past `seconds`, the worker replaced)."""
        if self._idle is None:
            await self.start()
        if not self._workers and not self._starting:
            raise BadRequest(503, f"no {self.name} process is running (they failed to start; "
                                  f"see the server log)")
        try:
            w = await asyncio.wait_for(self._idle.get(), wait_seconds)
        except asyncio.TimeoutError:
            raise BadRequest(503, f"all {self.size} {self.name} processes stayed busy for "
                                  f"{wait_seconds:g} s; try again") from None
        req = dict(req, id=next(self._ids))
        self.calls += 1
        self.busy += 1
        try:
            reply = await asyncio.wait_for(asyncio.to_thread(w.request, req), seconds)
        except asyncio.TimeoutError:
            log.warning("%s: %s took longer than %g s; replacing it", w.name, req["op"], seconds)
            self._replace(w)
            raise BadRequest(504, f"the engine took longer than {seconds:g} s and was stopped; "
                                  f"the game is unchanged") from None
        except BaseException as e:  # died, or our caller was cancelled: its pipe is unusable
            log.warning("%s: %s failed (%s); replacing it", w.name, req["op"], type(e).__name__)
            self._replace(w)
            if isinstance(e, Exception):
                raise BadRequest(500, f"the engine process failed ({type(e).__name__}); "
                                      f"the game is unchanged") from None
            raise
        finally:
            self.busy -= 1
        self._idle.put_nowait(w)
        if not reply["ok"]:
            raise BadRequest(reply["status"], reply["error"])
        return reply

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for w in list(self._workers):
            self._discard(w)
