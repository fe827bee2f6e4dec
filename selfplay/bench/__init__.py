"""`c4fast bench` (`python -m selfplay.bench`): every c4fast benchmark from one place.

The benchmark modules live here: ``rules`` (rules, search, bots, the solver, the endgame
solve), ``nets`` (the net, the CPU engines, the server, the roofline), ``gpucheck`` (the GPU
acceptance check) and ``soak`` (hours of the loop and the web board, memory watched); the
trainer's own is ``nets.train --bench``. Each prints JSON lines whose ``"bench"`` key names
the measurement, with the machine it ran on. This command lists them and runs any of them
in a fresh process, so one benchmark's thread pools or allocator state never colour the
next.

    python -m selfplay.bench --list
    python -m selfplay.bench rules search        # several in a row
    python -m selfplay.bench all                 # everything (minutes)

Self-play end to end is measured by ``python -m selfplay.generation.run`` itself: its final JSON
summary (samples/s, evals/s, playouts/s, batch fill) is the benchmark.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

#: name -> (command, what it reports)
BENCHMARKS: dict[str, tuple[list[str], str]] = {
    "rules": (["-m", "selfplay.bench.rules", "rules"], "random / sensible moves/s, perft nodes/s, first-call time"),
    "search": (["-m", "selfplay.bench.rules", "search"], "batched MCTS playouts/s (1 and 8 leaves), MCGS playouts/s"),
    "bots": (["-m", "selfplay.bench.rules", "bots"], "choose() calls/s of each baseline bot, greedy vs random games/s"),
    "solver": (["-m", "selfplay.bench.rules", "solver"], "exact 6x7 solver positions/s on Pons's files"),
    "endgame": (["-m", "selfplay.bench.rules", "endgame"], "net player's exact endgame solve seconds by empty cells"),
    "nets": (["-m", "selfplay.bench.nets"], "roofline, evals/s and fraction of peak, CPU engines, server vs direct, "
                                   "playouts of the net player in 0.2 s per forward"),
    "train": (["-m", "nets.train", "--bench"], "trainer samples/s on synthetic data"),
    "cores": (["-m", "selfplay.generation.cores"], "the cpu loop's costs per role on this machine and its core split"),
    "gpucheck": (["-m", "selfplay.bench.gpucheck"], "GPU acceptance: graphs, server, self-play, trainer (CUDA)"),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"benchmarks to run: {', '.join(BENCHMARKS)} or all")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and what they report")
    args = ap.parse_args(argv)
    if args.list or not args.names:
        for name, (cmd, what) in BENCHMARKS.items():
            print(f"{name:8s} python {' '.join(cmd):32s} {what}")
        return 0
    names = list(BENCHMARKS) if args.names == ["all"] else args.names
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)} or all")
    worst = 0
    for name in names:
        rc = subprocess.run([sys.executable, *BENCHMARKS[name][0]]).returncode
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    sys.exit(main())
