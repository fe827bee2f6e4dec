"""`c4fast`: the one front door. ``c4fast COMMAND [ARGS...]`` runs a command's ``main``.

Each command is a module with ``main(argv) -> int``; ``python -m MODULE`` runs the same
code (those forms stay as aliases). ``c4fast COMMAND --help`` shows a command's options;
``c4fast players`` lists the player specs every command accepts (from
:mod:`c4fast.players.registry`).
"""

from __future__ import annotations

import importlib
import sys

#: command -> (module with main(argv), one line on what it does); grouped for --help.
COMMANDS: dict[str, tuple[str, str]] = {
    # training
    "loop": ("selfplay.generation.loop", "the whole AlphaZero loop on this machine (self-play, trainer, evaluation)"),
    "cluster": ("selfplay.cluster.driver", "the loop on a Ray cluster (self-play on every node)"),
    "run": ("selfplay.generation.run", "self-play only: workers and inference servers writing shards"),
    "train": ("nets.train", "the trainer only (a directory of shards -> checkpoints)"),
    "average": ("nets.averaging", "average recent checkpoints (SWA or EMA), batch norm re-estimated -> one checkpoint"),
    # evaluation
    "arena": ("selfplay.evaluation.arena", "paired matches between two players, with an interval"),
    "elo": ("selfplay.evaluation.elo", "Elo ratings with 95 % intervals from game records"),
    "rate": ("selfplay.evaluation.rate", "rate checkpoints against fixed anchors"),
    "compare": ("selfplay.evaluation.compare", "paired difference of two players against one opponent"),
    "solverbench": ("selfplay.evaluation.solverbench", "a player's moves against exact 6x7 play (Pons's sets)"),
    "fill": ("selfplay.evaluation.fill", "final board fill of games (self-play shards, arena records): mean, histogram"),
    # applications
    "play": ("selfplay.apps.play", "play against an engine in the terminal"),
    "web": ("selfplay.apps.web.__main__", "the browser board with the engine's analysis"),
    "saiblo": ("selfplay.apps.saiblo", "the Saiblo ladder player (stdin/stdout protocol), --bundle"),
    # tools
    "bench": ("selfplay.bench", "every benchmark (rules, search, bots, solver, nets, train), JSON lines"),
    "gpucheck": ("selfplay.bench.gpucheck", "the GPU acceptance check (CUDA graphs, server, trainer)"),
    "solve": ("c4fast.players.solver", "exact 6x7 scores of positions or Pons's files"),
    "perft": ("c4fast.perft", "count move sequences (rules check)"),
    "soak": ("selfplay.bench.soak", "run the loop and the web board for an hour, watching memory and files"),
}


def usage() -> str:
    from nets.players import spec_forms  # noqa: F401  (registers net:)
    from c4fast.players.registry import spec_help

    width = max(map(len, COMMANDS))
    lines = ["usage: c4fast COMMAND [ARGS...]   (c4fast COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    lines += ["  players" + " " * (width - 7) + "  the player specs below", "", "player specs:", spec_help()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name == "players":
        from nets.players import spec_forms  # noqa: F401  (registers net:)
        from c4fast.players.registry import spec_help

        print(spec_help())
        return 0
    if name not in COMMANDS:
        print(f"c4fast: unknown command {name!r}; commands: {', '.join(COMMANDS)}, players", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    sys.argv[0] = f"c4fast {name}"
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
