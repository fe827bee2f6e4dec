"""The Starlette app of the web board: the JSON API and the static page.

Endpoints (bodies and answers are JSON; errors are ``{"error": message}`` with a 4xx
status, or 503/504 when the engines are busy or too slow, and never change a game):

* ``GET /api/health`` — liveness and load (games, engine processes busy);
* ``POST /api/new`` — a new game, the engine's first move included when it starts;
* ``GET /api/game/{id}`` — the state of a game;
* ``POST /api/move`` — the person's column and the engine's reply;
* ``POST /api/undo`` — take back the person's last move and the engine's reply;
* ``POST /api/analyse`` — the engine's view of the position (and the exact solver's
  verdict per column on boards it solves quickly, 6x7 in practice).

docs/WEB.md documents the fields and the security model. Engines run in worker processes
(:mod:`selfplay.apps.web.engines`); games live in memory (:class:`~selfplay.apps.web.games.GameStore`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass

import numpy as np
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import c4fast
from c4fast.players.solver import fits_one_word
from selfplay.apps.web import games as gm
from selfplay.apps.web.engines import EnginePool
from selfplay.apps.web.security import MAX_WORKERS, MODEL_UNAVAILABLE, WEB_LIMITS, ClientSlots, ModelDirs, RequestGuard

log = logging.getLogger("selfplay.apps.web")

ANALYSES_KEPT = 8  # analyses cached per game (the newest positions)


def package_models_dir() -> str:
    """The repository's ``models/`` (the shipped networks): always an allowed model directory."""
    from selfplay.apps.saiblo import DEFAULT_MODEL

    return os.path.dirname(DEFAULT_MODEL)


def default_engine() -> str:
    """The shipped network with 200 playouts if present, else ``uct:2000``."""
    from selfplay.apps.saiblo import DEFAULT_MODEL

    if not os.path.exists(DEFAULT_MODEL):
        return "uct:2000"
    rel = os.path.relpath(DEFAULT_MODEL)
    return f"net:{DEFAULT_MODEL if rel.startswith('..') else rel}:200"


@dataclass(frozen=True)
class WebConfig:
    """Settings of the web board server (times in seconds).

    ``workers`` engine processes (1..MAX_WORKERS); ``engine_seconds`` caps one engine
    request (a move, an analysis, loading an engine); ``analysis_seconds`` is the
    analysis's own budget for the principal variation and per-column values (inside the
    cap); ``solver_seconds`` caps the exact solver's verdict; ``queue_seconds`` bounds the
    wait for a free process, and for one of the client's own slots;
    ``client_requests`` engine requests of one client (address) run at once (0:
    half the workers, at least one); ``max_games`` games are kept (least recently used
    evicted); ``max_body_bytes`` bounds a request body; ``pv_plies`` is the length of the
    shown principal variation; ``allow_hosts`` are the host names accepted in ``Host``
    besides the loopback ones; ``model_dirs`` the directories ``net:`` engines may read
    besides the shipped ``models/``.
    """

    workers: int = 2
    engine_seconds: float = 30.0
    analysis_seconds: float = 5.0
    solver_seconds: float = 10.0
    queue_seconds: float = 10.0
    client_requests: int = 0
    max_games: int = 200
    max_body_bytes: int = 16_384
    pv_plies: int = 8
    seed: int = 0
    default_engine: str = ""
    allow_hosts: tuple[str, ...] = ()
    model_dirs: tuple[str, ...] = ()

    def __post_init__(self):
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be in 1..{MAX_WORKERS}, got {self.workers}")
        if self.max_games < 1 or self.max_body_bytes < 64 or self.pv_plies < 1 or self.client_requests < 0:
            raise ValueError(f"max_games, pv_plies must be >= 1, client_requests >= 0 and max_body_bytes "
                             f">= 64: {self}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        for d in self.model_dirs:
            if not os.path.isdir(d):
                raise ValueError(f"model directory {d!r} is not a directory")
        for k in ("engine_seconds", "analysis_seconds", "solver_seconds", "queue_seconds"):
            if not getattr(self, k) > 0:
                raise ValueError(f"{k} must be > 0, got {getattr(self, k)}")


def solvable(game: c4fast.Game) -> bool:
    """Boards the exact solver's one-word engine handles (6x7 and smaller)."""
    return fits_one_word(game.height, game.width)


class Board:
    """The server's state: the games, the engine pool and the solver pool."""

    def __init__(self, config: WebConfig):
        self.config = config
        self.default_engine = config.default_engine or default_engine()
        self.games = gm.GameStore(config.max_games)
        self.model_dirs = ModelDirs((package_models_dir(), *config.model_dirs))
        self.clients = ClientSlots(config.client_requests or max(1, config.workers // 2), config.queue_seconds)
        seed = config.seed or int(np.random.SeedSequence().generate_state(1)[0] >> 1)
        self.engines = EnginePool(config.workers, seed, "engine")
        self.solver = EnginePool(1, seed, "solver")
        self.rng = np.random.default_rng(seed)

    def _req(self, op: str, spec: str | None, game: c4fast.Game, **extra) -> dict:
        return {"op": op, "spec": spec, "height": game.height, "width": game.width,
                "forbidden": game.forbidden, "moves": game.moves, **extra}

    def check_spec(self, spec: str) -> str:
        """`spec`, or BadRequest(400) for a ``net:`` engine whose model is outside the
        allowed directories (or gone), or whose spec is malformed; nothing is loaded."""
        if not spec.startswith("net:"):
            return spec
        from c4fast.players.registry import SpecContext
        from nets.players import check_net_spec, split_net_spec

        path = split_net_spec(spec)[0]
        if not self.model_dirs.allows(path):
            log.warning("engine %r refused: %s is not an existing file or directory in the model "
                        "directories %s", spec, os.path.realpath(path), list(self.model_dirs.dirs))
            raise gm.BadRequest(400, MODEL_UNAVAILABLE)
        try:
            check_net_spec(spec, SpecContext(limits=WEB_LIMITS))
        except ValueError as e:
            raise gm.BadRequest(400, f"bad engine spec: {e}") from None
        return spec

    async def engine_call(self, req: dict, client: str) -> dict:
        """`req` on an engine process, within `client`'s own slots."""
        c = self.config
        async with self.clients.slot(client):
            return await self.engines.call(req, c.engine_seconds, c.queue_seconds)

    async def engine_reply(self, spec: str, human: int, game: c4fast.Game, client: str) -> dict | None:
        """Let engine `spec` move in `game` (in place) if it is its turn (the person plays
        `human`); returns its move's col, wdl (for the engine) and seconds, or None."""
        if game.result is not None or game.to_move == human:
            return None
        r = await self.engine_call(self._req("move", spec, game), client)
        game.play(r["col"])
        return {"col": r["col"], "wdl": r["wdl"], "seconds": r["seconds"]}


# ------------------------------------------------------------------------------ helpers
async def read_body(request: Request, limit: int) -> dict:
    """The JSON object of a request body; BadRequest for oversized, non-JSON or non-object bodies."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise gm.BadRequest(413, f"request body over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise gm.BadRequest(413, f"request body over {limit} bytes")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks) or b"{}")
    except (ValueError, UnicodeDecodeError) as e:
        raise gm.BadRequest(400, f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise gm.BadRequest(400, "the body is not valid JSON: nested too deeply") from None
    if not isinstance(body, dict):
        raise gm.BadRequest(400, f"the body must be a JSON object, got {type(body).__name__}")
    return body


def _board(request: Request) -> Board:
    return request.app.state.board


def _client(request: Request) -> str:
    """Who sent `request`, for the per-client limits: its address."""
    return request.client.host if request.client else "unknown"


def _locked(wg: gm.WebGame):
    if wg.lock.locked():
        raise gm.BadRequest(409, "the engine is still working on this game; wait for its answer")
    return wg.lock


def _check_ply(body: dict, wg: gm.WebGame) -> None:
    """Optional ``ply``: the number of moves the client saw (a stale view gets 409)."""
    if "ply" in body:
        ply = body["ply"]
        if isinstance(ply, bool) or not isinstance(ply, int):
            raise gm.BadRequest(400, f"'ply' must be an integer, got {ply!r}")
        if ply != wg.game.ply:
            raise gm.BadRequest(409, f"the game has {wg.game.ply} moves, the request expected {ply}; reload it")


# ---------------------------------------------------------------------------- endpoints
async def health(request: Request) -> JSONResponse:
    b = _board(request)
    return JSONResponse({"ok": True, "games": len(b.games), "max_games": b.config.max_games,
                         "workers": b.config.workers, "idle": b.engines.idle, "busy": b.engines.busy,
                         "started": b.engines.started, "starting": b.engines.starting,
                         "restarts": b.engines.restarts + b.solver.restarts, "solver_calls": b.solver.calls,
                         "clients": len(b.clients), "client_requests": b.clients.pending,
                         "default_engine": b.default_engine, "config": asdict(b.config)})


async def new_game(request: Request) -> JSONResponse:
    b = _board(request)
    body = await read_body(request, b.config.max_body_bytes)
    h, w, forbidden, moves = gm.new_game_setup(body, b.rng)
    spec = b.check_spec(gm.engine_spec(body, b.default_engine))
    human_first = body.get("human_first", True)
    if not isinstance(human_first, bool):
        raise gm.BadRequest(400, f"'human_first' must be true or false, got {human_first!r}")
    game = gm.replay_game(h, w, forbidden, moves)
    await b.engine_call({"op": "check", "spec": spec}, _client(request))  # a bad spec or model: 400 here
    human = 1 if human_first else 2
    reply = await b.engine_reply(spec, human, game, _client(request))
    wg = b.games.add(game, spec, human)
    wg.last_engine = reply
    return JSONResponse(wg.state())


async def get_game(request: Request) -> JSONResponse:
    wg = _board(request).games.get(request.path_params["gid"])
    return JSONResponse(wg.state())


async def move(request: Request) -> JSONResponse:
    b = _board(request)
    body = await read_body(request, b.config.max_body_bytes)
    wg = b.games.get(gm.game_id(body))
    async with _locked(wg):
        _check_ply(body, wg)
        col = gm.column(body, wg.game.width)
        if wg.game.result is not None:
            raise gm.BadRequest(400, f"the game is over (result {wg.game.result}); start a new one or undo")
        if wg.game.to_move != wg.human:
            raise gm.BadRequest(409, "it is the engine's turn")
        trial = wg.game.copy()
        try:
            trial.play(col)
        except c4fast.IllegalMove as e:
            raise gm.BadRequest(400, f"illegal move: {e}") from None
        reply = await b.engine_reply(wg.engine, wg.human, trial, _client(request))
        wg.game, wg.last_engine = trial, reply
        return JSONResponse(wg.state())


async def undo(request: Request) -> JSONResponse:
    b = _board(request)
    body = await read_body(request, b.config.max_body_bytes)
    wg = b.games.get(gm.game_id(body))
    async with _locked(wg):
        _check_ply(body, wg)
        moves = wg.game.moves
        n = len(moves)
        while n > 0:
            n -= 1
            if n % 2 + 1 == wg.human:  # move n (0-based) was the person's
                break
        else:
            raise gm.BadRequest(400, "nothing to undo: you have not moved yet")
        wg.game = gm.replay_game(wg.game.height, wg.game.width, wg.game.forbidden, moves[:n])
        wg.last_engine = None
        return JSONResponse(wg.state())


async def analyse(request: Request) -> JSONResponse:
    b = _board(request)
    c = b.config
    body = await read_body(request, c.max_body_bytes)
    wg = b.games.get(gm.game_id(body))
    spec = b.check_spec(gm.engine_spec(body, wg.engine))
    game = wg.game.copy()
    if game.result is not None:
        raise gm.BadRequest(400, f"the game is over (result {game.result}): nothing to analyse")
    key = (game.ply, game.hash, spec)
    cached = wg.analyses.get(key)
    if cached is not None:
        return JSONResponse(cached)
    req = b._req("analyse", spec, game, pv_plies=c.pv_plies,
                 soft_seconds=min(c.analysis_seconds, 0.8 * c.engine_seconds))
    async with b.clients.slot(_client(request)):
        if spec != wg.engine:  # another engine than the game's: a bad one is refused before any wait
            await b.engines.call({"op": "check", "spec": spec}, c.engine_seconds, c.queue_seconds)
        jobs = [b.engines.call(req, c.engine_seconds, c.queue_seconds)]
        if solvable(game):
            jobs.append(b.solver.call(b._req("solve", None, game), c.solver_seconds, c.queue_seconds))
        results = await asyncio.gather(*jobs, return_exceptions=True)
    if isinstance(results[0], BaseException):
        raise results[0]
    a = results[0]
    out = {"game": wg.id, "ply": game.ply, "to_move": game.to_move, "engine": spec,
           "best": a["best"], "wdl": a["wdl"], "policy": a["policy"], "raw_wdl": a["raw_wdl"],
           "visits": a["visits"], "values": a["values"], "values_from": a["values_from"],
           "pv": a["pv"], "pv_cells": _pv_cells(game, a["pv"]), "partial": a["partial"],
           "seconds": a["seconds"], "solver": None, "solver_note": None}
    if len(results) > 1:
        s = results[1]
        if isinstance(s, gm.BadRequest):
            out["solver_note"] = (f"the exact solver needs more than {c.solver_seconds:g} s here"
                                  if s.status == 504 else s.message)
        elif isinstance(s, BaseException):
            raise s
        else:
            scores = {int(k): v for k, v in s["scores"].items()}
            out["solver"] = [None if col not in scores else
                             {"score": scores[col],
                              "verdict": "win" if scores[col] > 0 else "draw" if scores[col] == 0 else "loss"}
                             for col in range(game.width)]
    else:
        out["solver_note"] = "exact verdicts on 6x7 and smaller boards only"
    while len(wg.analyses) >= ANALYSES_KEPT:
        wg.analyses.pop(next(iter(wg.analyses)))
    wg.analyses[key] = out
    return JSONResponse(out)


def _pv_cells(game: c4fast.Game, pv: list[int]) -> list[list[int]]:
    """The cells [row, col] the principal variation's stones land on, in order."""
    g = game.copy()
    cells = []
    for col in pv:
        cells.append([int(g.state[0]["top"][col]), col])
        g.play(col)
    return cells


async def index(request: Request) -> RedirectResponse:
    return RedirectResponse("/static/index.html")


# ------------------------------------------------------------------------------ the app
def _errors(handler):
    """Wrap an endpoint: BadRequest -> {"error": message} with its status."""

    async def wrapped(request: Request):
        try:
            return await handler(request)
        except gm.BadRequest as e:
            if e.status >= 500:
                log.warning("%s %s: %s", request.method, request.url.path, e.message)
            return JSONResponse({"error": e.message}, status_code=e.status)

    wrapped.__name__ = handler.__name__
    return wrapped


def create_app(config: WebConfig | None = None) -> Starlette:
    """The ASGI app; engine processes start with the app's lifespan and stop with it."""
    config = config or WebConfig()
    board = Board(config)

    @asynccontextmanager
    async def lifespan(app):
        await board.engines.start()  # the solver's process starts on the first 6x7 analysis
        log.info("engines: %d processes, default engine %s", config.workers, board.default_engine)
        try:
            yield
        finally:
            await board.engines.close()
            await board.solver.close()

    routes = [
        Route("/", index),
        Route("/api/health", _errors(health)),
        Route("/api/new", _errors(new_game), methods=["POST"]),
        Route("/api/game/{gid}", _errors(get_game)),
        Route("/api/move", _errors(move), methods=["POST"]),
        Route("/api/undo", _errors(undo), methods=["POST"]),
        Route("/api/analyse", _errors(analyse), methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("selfplay.apps.web", "static")]), name="static"),
    ]
    guard = Middleware(RequestGuard, names=config.allow_hosts)
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[guard])
    app.state.board = board
    return app
