"""`python -m selfplay.apps.web`: the web board (play any engine, see its analysis).

Serves the page and the JSON API (docs/WEB.md) on http://127.0.0.1:8000 by
default. The server listens on the loopback interface only unless ``--host`` says
otherwise: anyone who can reach it can start engines on the models of ``models/`` and
``--model-dir``, so expose it only on a network you trust. It answers only requests
naming it in ``Host`` (loopback names, ``--host``, ``--allow-host``) and refuses other
sites' pages (docs/WEB.md). Engines run in ``--workers`` processes, each request capped
at ``--engine-seconds``.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import os
import sys

log = logging.getLogger("selfplay.apps.web")
MAX_GAMES = 100_000
MAX_SECONDS = 3600.0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def check_engine(spec: str, model_dirs) -> str | None:
    """Why the default engine `spec` cannot be used (None if it can): its model must lie in
    an allowed directory, and the player must build (the spec is parsed, the model loaded)."""
    from nets.players import make_player, split_net_spec
    from selfplay.apps.web.security import WEB_LIMITS, ModelDirs

    if spec.startswith("net:") and not ModelDirs(model_dirs).allows(split_net_spec(spec)[0]):
        return (f"--engine {spec!r}: its model is not an existing file or directory in the model "
                f"directories {list(model_dirs)} (add one with --model-dir)")
    try:
        make_player(spec, limits=WEB_LIMITS)
    except Exception as e:  # noqa: BLE001  (any reason: one line, exit 2)
        return f"--engine {spec!r}: {' '.join(str(e).split())}"
    return None


def main(argv=None) -> int:
    from selfplay.apps.web.security import MAX_WORKERS

    ap = argparse.ArgumentParser(prog="python -m selfplay.apps.web", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback)")
    ap.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    ap.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="a host name the browser may use besides 127.0.0.1, localhost, [::1] and --host "
                         "(the Host header is checked against DNS rebinding); repeatable")
    ap.add_argument("--model-dir", action="append", default=[], metavar="DIR",
                    help="a directory net: engines may read models from besides the shipped models/; repeatable")
    ap.add_argument("--engine", default=None,
                    help="default engine spec of the page (default: the shipped net, 200 playouts)")
    ap.add_argument("--workers", type=int, default=2, help=f"engine processes, 1..{MAX_WORKERS} (default 2)")
    ap.add_argument("--engine-seconds", type=float, default=30.0,
                    help="cap on one engine request (move, analysis, loading), seconds (default 30)")
    ap.add_argument("--analysis-seconds", type=float, default=5.0,
                    help="budget for the principal variation and per-column values, seconds (default 5)")
    ap.add_argument("--solver-seconds", type=float, default=10.0,
                    help="cap on the exact solver's verdict (6x7), seconds (default 10)")
    ap.add_argument("--queue-seconds", type=float, default=10.0,
                    help="wait for a free engine process or one of the client's own slots (default 10)")
    ap.add_argument("--client-requests", type=int, default=0,
                    help="engine requests of one client at once (default 0: half the workers, at least 1)")
    ap.add_argument("--max-games", type=int, default=200, help=f"games kept in memory, 1..{MAX_GAMES} (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of random boards and engines (0: fresh)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be in 0..65535, got {args.port}")
    if not args.host.strip():
        return _fail("--host must be an address or a host name")
    if not 1 <= args.workers <= MAX_WORKERS:
        return _fail(f"--workers must be in 1..{MAX_WORKERS}, got {args.workers}")
    if not 1 <= args.max_games <= MAX_GAMES:
        return _fail(f"--max-games must be in 1..{MAX_GAMES}, got {args.max_games}")
    if not 0 <= args.client_requests <= args.workers:
        return _fail(f"--client-requests must be in 0..--workers ({args.workers}), got {args.client_requests}")
    if args.seed < 0:
        return _fail(f"--seed must be >= 0, got {args.seed}")
    for flag in ("engine_seconds", "analysis_seconds", "solver_seconds", "queue_seconds"):
        v = getattr(args, flag)
        if not (math.isfinite(v) and 0 < v <= MAX_SECONDS):
            return _fail(f"--{flag.replace('_', '-')} must be in (0, {MAX_SECONDS}], got {v}")
    for d in args.model_dir:
        if not os.path.isdir(d):
            return _fail(f"--model-dir {d!r} is not a directory")
    for name in args.allow_host:
        if not name.strip() or any(c in name for c in "/ @"):
            return _fail(f"--allow-host {name!r} is not a host name")
    try:
        import uvicorn

        from selfplay.apps.web.app import WebConfig, create_app, default_engine, package_models_dir
    except ImportError as e:
        return _fail(f"{e}; install the web extra: pip install -e '.[web]'")
    model_dirs = (package_models_dir(), *args.model_dir)
    engine = args.engine if args.engine is not None else default_engine()
    why = check_engine(engine, model_dirs)
    if why:
        return _fail(why)
    try:
        config = WebConfig(workers=args.workers, engine_seconds=args.engine_seconds,
                           analysis_seconds=args.analysis_seconds, solver_seconds=args.solver_seconds,
                           queue_seconds=args.queue_seconds, client_requests=args.client_requests,
                           max_games=args.max_games, seed=args.seed, default_engine=engine,
                           allow_hosts=(args.host, *args.allow_host), model_dirs=tuple(args.model_dir))
    except ValueError as e:
        return _fail(str(e))
    if not _is_loopback(args.host):
        log.warning("listening on %s: anyone who can reach this address can use the engines and the "
                    "models in %s", args.host, list(model_dirs))
    uvicorn.run(create_app(config), host=args.host, port=args.port, log_level=args.log_level,
                access_log=args.log_level == "debug")
    return 0


if __name__ == "__main__":
    sys.exit(main())
