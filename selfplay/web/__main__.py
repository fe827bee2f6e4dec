"""`python -m selfplay.web`: the web board (play any engine, see its analysis).

Serves the page and the JSON API (README, "Web board") on http://127.0.0.1:8000 by
default. The server listens on the loopback interface only unless ``--host`` says
otherwise: anyone who can reach it can start engines (and make the server load any
checkpoint path it can read), so expose it only on a network you trust.
Engines run in ``--workers`` processes, each request capped at ``--engine-seconds``.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

log = logging.getLogger("selfplay.web")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.web", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback)")
    ap.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    ap.add_argument("--engine", default=None,
                    help="default engine spec of the page (default: the shipped net, 200 playouts)")
    ap.add_argument("--workers", type=int, default=2, help="engine processes (default 2)")
    ap.add_argument("--engine-seconds", type=float, default=30.0,
                    help="cap on one engine request (move, analysis, loading), seconds (default 30)")
    ap.add_argument("--analysis-seconds", type=float, default=5.0,
                    help="budget for the principal variation and per-column values, seconds (default 5)")
    ap.add_argument("--solver-seconds", type=float, default=10.0,
                    help="cap on the exact solver's verdict (6x7), seconds (default 10)")
    ap.add_argument("--max-games", type=int, default=200, help="games kept in memory (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of random boards and engines (0: fresh)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        import uvicorn

        from selfplay.web.app import WebConfig, create_app
    except ImportError as e:
        print(f"error: {e}; install the web extra: pip install -e '.[web]'", file=sys.stderr)
        return 2
    try:
        config = WebConfig(workers=args.workers, engine_seconds=args.engine_seconds,
                           analysis_seconds=args.analysis_seconds, solver_seconds=args.solver_seconds,
                           max_games=args.max_games, seed=args.seed, default_engine=args.engine or "")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not _is_loopback(args.host):
        log.warning("listening on %s: anyone who can reach this address can use the engines and make "
                    "the server load any checkpoint path it can read", args.host)
    uvicorn.run(create_app(config), host=args.host, port=args.port, log_level=args.log_level,
                access_log=args.log_level == "debug")
    return 0


if __name__ == "__main__":
    sys.exit(main())
