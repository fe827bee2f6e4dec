"""What keeps the web board to its own page and its own models (docs/WEB.md, "Security").

* :class:`RequestGuard`, an ASGI middleware: the ``Host`` header must name the server
  (a loopback name or an ``--allow-host`` name, with the server's port), otherwise 400
  (DNS rebinding); an ``Origin`` header must be the server's own origin, otherwise 403
  (another site's page); a POST must declare ``Content-Type: application/json``,
  otherwise 415 (no CORS "simple request" gets through).
* :class:`ModelDirs`: ``net:`` engines may only read files under the allowed model
  directories, paths resolved (symlinks, ``..``) before the check; any model that
  cannot be used gets the same :data:`MODEL_UNAVAILABLE` answer.
* :class:`ClientSlots`: at most ``limit`` engine requests of one client (its address)
  at once; the others wait a short while in its own queue, so one client cannot hold
  every engine process; :data:`MAX_WORKERS` bounds the processes themselves.
* :data:`WEB_LIMITS`: the budgets a request's engine spec may ask for, checked when the
  spec is parsed, before any search memory is allocated.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import asynccontextmanager

from c4fast.players.registry import SpecLimits
from selfplay.apps.web.games import BadRequest

#: The one answer for a ``net:`` engine whose model cannot be used, whatever the reason
#: (outside the allowed directories, missing, a directory without checkpoints, unreadable,
#: not a model): the reason goes to the server log only, so the API is no file oracle.
#: Engine budgets of a web request (the command line's are c4fast.players.registry.CLI_LIMITS).
#: Memory per engine worker, before allocation: a graph search preallocates ~68 B per
#: playout (100,000: ~7 MB; a time-budget search a fixed 200,000-node graph, ~14 MB), UCT
#: ~0.5 kB per rollout (100,000: ~50 MB); a request's seconds are capped again by
#: --engine-seconds.
WEB_LIMITS = SpecLimits(playouts=100_000, rollouts=100_000, seconds=60.0, depth=64, leaves_per_step=64)

MAX_WORKERS = 64  # engine processes of one server (each holds a few players and their models)
MODEL_UNAVAILABLE = "model not available (see the server log)"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def host_name(host: str) -> str:
    """`host` as it appears in a Host header (IPv6 addresses in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class RequestGuard:
    """ASGI middleware refusing requests from anything but the board's own page (see the
    module docstring); `names` are the host names accepted besides the loopback ones."""

    def __init__(self, app, names=()):
        self.app = app
        self.names = {n.lower() for n in LOOPBACK_NAMES} | {host_name(n).lower() for n in names
                                                             if n not in WILDCARD_HOSTS}

    def allowed_hosts(self, port: int | None) -> set[str]:
        """Accepted Host header values: each name with the server's port (without it on port 80)."""
        out = {f"{n}:{port}" for n in self.names}
        if port in (80, None):
            out |= self.names
        return out

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        server = scope.get("server")
        hosts = self.allowed_hosts(server[1] if server else None)
        host = headers.get("host", "").lower()
        origin = headers.get("origin")
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if host not in hosts:
            error = (400, f"Host {host!r} is not this server's name; use http://127.0.0.1 or "
                          f"http://localhost with its port, or start the server with --allow-host NAME")
        elif origin is not None and origin.lower() not in {f"http://{h}" for h in hosts}:
            error = (403, f"requests from the page of another site ({origin!r}) are refused")
        elif scope["method"] == "POST" and ctype != "application/json":
            error = (415, "POST bodies must be sent with 'Content-Type: application/json'")
        else:
            return await self.app(scope, receive, send)
        body = json.dumps({"error": error[1]}).encode()
        await send({"type": "http.response.start", "status": error[0],
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class ModelDirs:
    """The directories ``net:`` engines may read models from (resolved once)."""

    def __init__(self, dirs):
        self.dirs = tuple(dict.fromkeys(os.path.realpath(d) for d in dirs))

    def allows(self, path: str) -> bool:
        """Whether `path`, resolved (symlinks, ``..``), is an existing file or directory
        inside one of the directories."""
        real = os.path.realpath(path)
        inside = any(os.path.commonpath([real, d]) == d for d in self.dirs)
        return inside and (os.path.isfile(real) or os.path.isdir(real))


class ClientSlots:
    """At most `limit` engine requests per client at once; a client's further requests
    wait up to `wait_seconds` for one of its own slots (429 after that)."""

    def __init__(self, limit: int, wait_seconds: float):
        self.limit = limit
        self.wait_seconds = wait_seconds
        self._slots: dict[str, list] = {}  # client -> [semaphore, requests holding or waiting]

    def __len__(self) -> int:
        """Clients with a request running or waiting."""
        return len(self._slots)

    @property
    def pending(self) -> int:
        """Requests running or waiting, over all clients."""
        return sum(entry[1] for entry in self._slots.values())

    @asynccontextmanager
    async def slot(self, client: str):
        entry = self._slots.setdefault(client, [asyncio.Semaphore(self.limit), 0])
        entry[1] += 1
        try:
            try:
                await asyncio.wait_for(entry[0].acquire(), self.wait_seconds)
            except asyncio.TimeoutError:
                raise BadRequest(429, f"you already have {self.limit} engine request(s) running and the "
                                      f"next waited {self.wait_seconds:g} s; try again") from None
            try:
                yield
            finally:
                entry[0].release()
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._slots[client]
