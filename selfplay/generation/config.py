"""Configs of self-play: what a game does around each search, and a whole run.

:class:`SelfPlayConfig` (katac4's defaults): temperatures are functions of the game
phase ``x = ply / cells`` (cells = playable cells of the board, so x runs from 0 to 1
over a full game). :class:`RunConfig`: everything ``python -m selfplay.generation.run`` does; its
flags are derived from it (:mod:`c4fast.cli`), and ``selfplay.generation.loop`` hands it to the
child as a JSON file.
"""

from __future__ import annotations

import dataclasses
import math
import re
import socket
from dataclasses import field

import numpy as np

from c4fast import bitboard as bb
from c4fast.board import RULES
from c4fast.cli import flatten, opt
from c4fast.config import SearchConfig
from c4fast.game import SAIBLO_SIZES, parse_sizes  # noqa: F401  (re-exported)
from nets.config import CPU_ONLY_FORWARDS, FORWARDS

MAX_CELLS = bb.MAX_SIZE * bb.MAX_SIZE  # cells of the largest board
#: values of SelfPlayConfig.fork_player
FORK_PLAYERS = ("greedy", "alphabeta")

@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Settings of self-play games (the search itself is c4fast.config.SearchConfig).

    ====================== ======= ====================================================
    field                  default meaning
    ====================== ======= ====================================================
    root_temp_start        1.35    root policy temperature max(floor, start * base^x)
    root_temp_base         0.66
    root_temp_floor        1.03
    move_temp_base         0.8     move sampling temperature base^(1 + decay * x)
    move_temp_decay        1.0
    opening_max            4       the first k ~ U{0..opening_max} moves are sampled from
                                   the raw policy (one evaluation, no sample recorded)
    forbidden_cell         True    random forbidden cell (False: none, e.g. standard 6x7)
    games_per_size         0       games a worker plays on one size before rotating
                                   (0: as many as it plays at once)
    solve_max_empty        0       samples with at most this many empty playable cells
                                   take their value label (outcome, exact plies to the
                                   end) from the exact solver (0: off; see the worker)
    solve_nodes            200000  node budget of one such solve (over it: the game's
                                   outcome, as without the solver)
    solve_rescore          False   also relabel every unsolved sample before a solved one
                                   from the nearest solved sample after it: its result
                                   and plies to the end as if the game were played
                                   perfectly from there (Lc0's tablebase rescoring)
    fork_probability       0.0     share of games started from a mid-game fork: up to
                                   fork_max_fill * cells cheap randomized moves
                                   (c4fast.players.bots.play_fork), samples from there
    fork_max_fill          0.5     the fork's stones / playable cells at most (the fork
                                   ply is uniform in 1 .. that many stones)
    fork_player            greedy  who plays a fork: ``greedy`` (half greedy, half uniform
                                   moves) or ``alphabeta`` (half the moves a depth-
                                   ``fork_depth`` alpha-beta's best, half uniform among
                                   those it does not prove lost: quieter positions)
    fork_depth             4       the alpha-beta fork's search depth (plies)
    ====================== ======= ====================================================

    A hotter or cooler schedule late in the game is ``move_temp_decay``: the move
    temperature is ``base^(1 + decay * x)``, x = ply / cells, so decay 0 keeps ``base``
    to the end of the game (hotter late than today's 1) and 2 cools it twice as fast.
    """

    root_temp_start: float = field(default=1.35, metadata=opt("root policy temperature at ply 0"))
    root_temp_base: float = field(default=0.66, metadata=opt("root temperature decay base"))
    root_temp_floor: float = field(default=1.03, metadata=opt("root temperature floor"))
    move_temp_base: float = field(default=0.8, metadata=opt("move sampling temperature base"))
    move_temp_decay: float = field(default=1.0, metadata=opt("move temperature decay with the phase"))
    opening_max: int = field(default=4, metadata=opt("up to this many opening moves from the raw policy"))
    forbidden_cell: bool = field(default=True, metadata=opt("a random forbidden cell on every board "
                                                           "(--no-forbidden-cell: standard boards)"))
    games_per_size: int = field(default=0, metadata=opt("games per board size before rotating (0: auto)"))
    solve_max_empty: int = field(default=0, metadata=opt(
        "exact solver labels (outcome, plies to the end) for samples with at most this many empty playable "
        "cells (0: off)"))
    solve_nodes: int = field(default=200_000, metadata=opt(
        "node budget of one solver label (over it: the game's outcome)"))
    solve_rescore: bool = field(default=False, metadata=opt(
        "relabel the samples before a solved one with its result and distance, as if the game were played "
        "perfectly from there (needs solve_max_empty > 0)"))
    fork_probability: float = field(default=0.0, metadata=opt(
        "share of games started from a mid-game position reached by cheap randomized moves (samples from there)"))
    fork_max_fill: float = field(default=0.5, metadata=opt(
        "a fork's stones / playable cells at most (its ply is uniform in 1..that)"))
    fork_player: str = field(default="greedy", metadata=opt(
        "who plays a fork: greedy (half greedy, half uniform) or alphabeta (half a depth-limited "
        "alpha-beta's best, half uniform among the moves it does not prove lost)"))
    fork_depth: int = field(default=4, metadata=opt("the alpha-beta fork's search depth in plies"))

    def __post_init__(self):
        for f in ("root_temp_start", "root_temp_base", "root_temp_floor", "move_temp_base"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"SelfPlayConfig.{f} must be > 0, got {v!r}")
        if self.move_temp_decay < 0:
            raise ValueError(f"SelfPlayConfig.move_temp_decay must be >= 0, got {self.move_temp_decay}")
        if self.opening_max < 0 or self.games_per_size < 0:
            raise ValueError("SelfPlayConfig.opening_max and games_per_size must be >= 0")
        if not 0 <= self.solve_max_empty <= MAX_CELLS:
            raise ValueError(f"SelfPlayConfig.solve_max_empty must be in 0..{MAX_CELLS}, got {self.solve_max_empty}")
        if self.solve_nodes < 1:
            raise ValueError(f"SelfPlayConfig.solve_nodes must be >= 1, got {self.solve_nodes}")
        if self.solve_rescore and self.solve_max_empty == 0:
            raise ValueError("SelfPlayConfig.solve_rescore needs solver labels (solve_max_empty > 0); "
                             "switch it off too (--no-selfplay.solve-rescore)")
        if not (math.isfinite(self.fork_probability) and 0.0 <= self.fork_probability <= 1.0):
            raise ValueError(f"SelfPlayConfig.fork_probability must be in [0, 1], got {self.fork_probability}")
        if not (math.isfinite(self.fork_max_fill) and 0.0 < self.fork_max_fill < 1.0):
            raise ValueError(f"SelfPlayConfig.fork_max_fill must be in (0, 1), got {self.fork_max_fill}")
        if self.fork_player not in FORK_PLAYERS:
            raise ValueError(f"SelfPlayConfig.fork_player must be one of {', '.join(FORK_PLAYERS)}, "
                             f"got {self.fork_player!r}")
        if not 1 <= self.fork_depth <= 16:
            raise ValueError(f"SelfPlayConfig.fork_depth must be in 1..16, got {self.fork_depth}")

    def root_temperature(self, ply: int, cells: int) -> float:
        x = ply / max(cells, 1)
        return max(self.root_temp_floor, self.root_temp_start * self.root_temp_base**x)

    def move_temperature(self, ply: int, cells: int) -> float:
        x = ply / max(cells, 1)
        return self.move_temp_base ** (1.0 + self.move_temp_decay * x)

    def draw_setup(self, rng: np.random.Generator, height: int, width: int):
        """A forbidden cell (row, col) uniform on the board, or None."""
        if not self.forbidden_cell:
            return None
        return RULES.draw_cell(rng, height, width)

    def fork_plies(self, cells: int) -> int:
        """The most stones a fork puts on a board of `cells` playable cells (>= 1)."""
        return max(1, int(self.fork_max_fill * cells))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


NODE_TAG_RE = re.compile(r"^[A-Za-z0-9-]{1,32}$")


def default_node_tag() -> str:
    """The host name reduced to letters, digits and '-' (at most 32 characters)."""
    return re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname()).strip("-")[:32] or "node"


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One ``selfplay.generation.run``: processes, model, stop conditions, output, and the nested
    search and self-play settings. 0 means "automatic" for workers and games per worker
    (CPU: 2 workers x 32 games; GPUs: usable cores - GPUs workers x 256 games)."""

    gpus: int = field(default=0, metadata=opt("GPUs to use, one server each (0: a CPU server)"))
    workers: int = field(default=0, metadata=opt("worker processes (0: automatic)"))
    games_per_worker: int = field(default=0, metadata=opt("games each worker plays at once (0: automatic)"))
    populations: int = field(default=0, metadata=opt(
        "game populations per worker, each on its own request slot: while the server evaluates one, the "
        "worker searches the others (0: automatic, 2 with --gpus, 1 on the CPU)"))
    model: str | None = field(default=None, metadata=opt(
        "checkpoint file, or a directory followed for newer checkpoints (None: a fresh --preset net)"))
    preset: str | None = field(default=None, metadata=opt(
        "network preset of a fresh net (None: cpu_small, or b3c128nbt with --gpus)"))
    out: str = field(default="data/selfplay", metadata=opt("directory for the shards"))
    max_games: int = field(default=0, metadata=opt("stop after this many games (0: no limit)"))
    max_samples: int = field(default=0, metadata=opt("stop after this many samples (0: no limit)"))
    time: float = field(default=0.0, metadata=opt("stop after this many seconds (0: no limit)"))
    seed: int = field(default=0, metadata=opt("seed of the games and of a fresh net"))
    sizes: str = field(default="saiblo", metadata=opt("board sizes: 'saiblo' or a list like 6x7,9x9"))
    samples_per_shard: int = field(default=20000, metadata=opt("samples per shard file"))
    shard_seconds: float = field(default=600.0, metadata=opt(
        "also write a shard when its oldest game is this many seconds old (0: only by size)"))
    max_restarts: int = field(default=8, metadata=opt(
        "restarts of one worker before the run gives up with an error (back-off 1..30 s)"))
    threads: int = field(default=0, metadata=opt("torch threads of a CPU server (0: all cores)"))
    forward: str = field(default="auto", metadata=opt(
        "forward path of the server: auto (CPU: the fastest engine that passes its self-check, measured; CUDA: "
        "compiled canvas graphs, fused if the compile fails), " + ", ".join(FORWARDS[1:])
        + " (nets.backends; docs/PERFORMANCE.md)"))
    canvas: bool = field(default=True, metadata=opt(
        "GPU servers run every board size in one masked 12x12 canvas forward (one graph per batch bucket, "
        "requests of all sizes merged; nets.canvas); --no-canvas: per-size graphs"))
    reload_interval: float = field(default=5.0, metadata=opt("seconds between checks for a newer checkpoint"))
    status_every: float = field(default=5.0, metadata=opt("seconds between status lines"))
    node_tag: str | None = field(default=None, metadata=opt(
        "names this machine in shard names, seeds and game ids (letters, digits, '-'; None: the host name)"))
    incarnation: int | None = field(default=None, metadata=opt(
        "names this run on the node, ditto (None: random, so a rerun never replays an earlier run's games)"))
    status_file: str | None = field(default=None, metadata=opt(
        "also write each status as JSON to this file (atomically; the loop reads it)"))
    search: SearchConfig = field(default=SearchConfig(), metadata=flatten("search settings"))
    selfplay: SelfPlayConfig = field(default=SelfPlayConfig(), metadata=flatten("self-play game settings"))

    def __post_init__(self):
        for name in ("gpus", "workers", "games_per_worker", "populations", "max_games", "max_samples", "threads",
                     "max_restarts"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= 0, got {v!r}")
        if self.samples_per_shard < 1:
            raise ValueError(f"--samples-per-shard must be >= 1, got {self.samples_per_shard}")
        for name, low_ok in (("time", True), ("status_every", False), ("reload_interval", False),
                             ("shard_seconds", True)):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0 or (v == 0 and not low_ok):
                raise ValueError(f"--{name.replace('_', '-')} must be a finite number "
                                 f"{'>= 0' if low_ok else '> 0'}, got {v!r}")
        parse_sizes(self.sizes)
        if self.forward not in FORWARDS:
            raise ValueError(f"--forward must be one of {', '.join(FORWARDS)}, got {self.forward!r}")
        if self.forward in CPU_ONLY_FORWARDS and self.gpus > 0:
            raise ValueError(f"--forward {self.forward} runs on the CPU only (drop --gpus)")
        if self.node_tag is not None and not NODE_TAG_RE.match(self.node_tag):
            raise ValueError(f"--node-tag {self.node_tag!r}: use 1..32 letters, digits or '-'")
        if self.incarnation is not None and not 0 <= self.incarnation < 2**63:
            raise ValueError(f"--incarnation must be in [0, 2**63), got {self.incarnation}")

    @property
    def net_preset(self) -> str:
        """The network preset to build a fresh net from (see ``preset``)."""
        return self.preset or ("b3c128nbt" if self.gpus > 0 else "cpu_small")

    @property
    def size_list(self) -> tuple[tuple[int, int], ...]:
        return parse_sizes(self.sizes)
