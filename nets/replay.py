"""Replay window: the newest self-play samples, held in RAM per board size.

Window size (KataGo's rule, katac4's constants)::

    N_window = c * (1 + beta * ((N_total / c) ** alpha - 1) / alpha)   if N_total >= c
    N_window = N_total                                                    otherwise

with c = 250 000, alpha = 0.75, beta = 0.4. Shards are taken newest first (by file
modification time, then name) until the window is full; the oldest shard in the
window may be partly used. Each sample also carries ``plies_left`` (:func:`nets.shards.plies_left`: its game's
``num_moves`` minus its ``ply``, joined on ``game_id`` within its shard when the shard is
loaded), the moves-left head's target, and with ``ownership`` the board its game ended on
(:func:`nets.shards.final_boards`), the ownership head's target. Batches are drawn with
numpy from the in-RAM arrays and their input planes rebuilt exactly
(c4fast.bitboard.rebuild_batch + encode_batch), so random access costs nothing like
reading compressed HDF5 chunks. Sampling is uniform.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
import logging
import os

import numpy as np

from c4fast.cli import opt
from c4fast.encode import NUM_PLANES, encode_batch
from nets.shards import (SAMPLE_FIELDS, ShardError, ShardVersionError, final_boards, plies_left, read_shard,
                         rebuild_positions)

KEEP_FIELDS = ("stones", "forbidden", "last", "ply", "policy", "policy_weight", "outcome", "root_wdl", "game_id")


@dataclasses.dataclass(frozen=True)
class WindowConfig:
    """Replay window constants (see module docstring)."""

    c: float = field(default=250_000, metadata=opt("window constant c (samples)"))
    alpha: float = field(default=0.75, metadata=opt("window growth exponent"))
    beta: float = field(default=0.4, metadata=opt("window growth scale"))

    def __post_init__(self):
        if self.c <= 0 or self.alpha <= 0 or self.beta < 0:
            raise ValueError(f"bad WindowConfig {self}")

    def size(self, n_total: int) -> int:
        if n_total < self.c:
            return int(n_total)
        return int(self.c * (1 + self.beta * ((n_total / self.c) ** self.alpha - 1) / self.alpha))


@dataclasses.dataclass
class Batch:
    """One board size's training batch (numpy; the trainer moves it to torch)."""

    height: int
    width: int
    planes: np.ndarray  # (B, C, H, W) float32
    policy: np.ndarray  # (B, H, W) float32 target
    policy_weight: np.ndarray  # (B,)
    outcome: np.ndarray  # (B,) int64: 0 win, 1 draw, 2 loss for the side to move
    legal: np.ndarray  # (B, H, W) bool: playable cells
    root_wdl: np.ndarray | None = None  # (B, 3) float32: the search's (win, draw, loss) for the side to move
    plies_left: np.ndarray | None = None  # (B,) float32: plies from the position to its game's end
    # (B, H, W) float32: the game's final board, +1 the side to move's stone, -1 the
    # opponent's, 0 empty; only from ReplayWindow(ownership=True)
    ownership: np.ndarray | None = None


def flip_batch(b: Batch, mask: np.ndarray) -> None:
    """Mirror (column c -> W-1-c) the samples selected by boolean `mask`, in place.

    Planes, policy targets, legal cells and ownership targets flip together; the
    forbidden cell is part of plane 3 and the last moves of planes 4/5, so it mirrors
    with them.
    """
    if mask.any():
        b.planes[mask] = b.planes[mask][..., ::-1]
        b.policy[mask] = b.policy[mask][..., ::-1]
        b.legal[mask] = b.legal[mask][..., ::-1]
        if b.ownership is not None:
            b.ownership[mask] = b.ownership[mask][..., ::-1]


class ReplayWindow:
    """The samples of the newest shards, grouped by board size, and a batch sampler.
    With `ownership` each sample also keeps its game's final board and batches carry the
    ownership target (:attr:`Batch.ownership`)."""

    def __init__(self, config: WindowConfig = WindowConfig(), warn=None, ownership: bool = False):
        self.config = config
        self.ownership = ownership
        self.warn = warn or logging.getLogger("nets.replay").warning
        self.shard_cache: dict[str, dict] = {}  # path -> per-size arrays (loaded once)
        self.bad: set[str] = set()
        self.dropped: dict[str, int] = {}  # path -> samples of shards older than the window
        self.total_samples = 0  # N_total over every readable shard seen
        self.data: dict[tuple[int, int], dict] = {}
        self.window_samples = 0
        self.num_games = 0
        self.game_length_sum = 0

    def _load(self, path: str) -> dict | None:
        if path in self.shard_cache:
            return self.shard_cache[path]
        if path in self.bad:
            return None
        try:
            d = read_shard(path)
            games = d.pop("games")
            entry = {k: {**{f: v[f] for f in KEEP_FIELDS}, "plies_left": plies_left(path, v, games),
                         **({"final": final_boards(path, v, games, *k)} if self.ownership else {})}
                     for k, v in d.items()}
        except ShardVersionError:
            raise
        except ShardError as e:  # unreadable, truncated or bad values: skip it by name
            self.warn(f"skipping {path}: {e}")
            self.bad.add(path)
            return None
        entry["_n"] = sum(len(v["ply"]) for v in entry.values())
        entry["_games"] = (len(games["game_id"]), int(games["num_moves"].sum()))
        self.shard_cache[path] = entry
        return entry

    def update(self, paths: list[str]) -> bool:
        """(Re)build the window from shard `paths` (unreadable ones are skipped with a
        warning naming the file; another schema version raises ShardError). Returns
        True if the window changed."""
        def mtime(p):
            try:
                return os.path.getmtime(p)
            except OSError:
                return 0.0

        ordered = sorted(paths, key=lambda p: (mtime(p), p))
        loaded = [(p, self._load(p)) for p in ordered if p not in self.dropped]
        loaded = [(p, e) for p, e in loaded if e is not None]
        total = sum(e["_n"] for _, e in loaded) + sum(self.dropped.get(p, 0) for p in ordered)
        want = self.config.size(total)
        chosen: dict[tuple[int, int], list] = {}
        have = 0
        games = length = 0
        used = set()
        for p, e in reversed(loaded):  # newest first
            if have >= want:
                break
            used.add(p)
            take = min(e["_n"], want - have)
            frac = take / e["_n"]
            games += e["_games"][0]
            length += e["_games"][1]
            for key, arrays in e.items():
                if isinstance(key, str):
                    continue
                n = len(arrays["ply"])
                k = n if take == e["_n"] else int(round(n * frac))
                if k > 0:
                    chosen.setdefault(key, []).append({f: a[n - k:] for f, a in arrays.items()})
            have += take
        changed = total != self.total_samples
        self.total_samples = total
        self.data = {key: {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}
                     for key, parts in chosen.items()}
        self.window_samples = sum(len(v["ply"]) for v in self.data.values())
        self.num_games, self.game_length_sum = games, length
        # shards that fell out of the window entirely are not kept in RAM (they only
        # count towards N_total, which is remembered per path)
        for p in list(self.shard_cache):
            if p not in used:
                self.dropped[p] = self.shard_cache.pop(p)["_n"]
        return changed

    @property
    def sizes(self) -> list[tuple[int, int]]:
        return sorted(k for k, v in self.data.items() if len(v["ply"]) > 0)

    def sample(self, rng: np.random.Generator, size: tuple[int, int], n: int, flip: bool = True) -> Batch:
        """n samples of one board size from the window, drawn uniformly, randomly mirrored."""
        d = self.data[size]
        idx = rng.integers(0, len(d["ply"]), n)
        h, w = size
        g = {f: d[f][idx] for f in d}
        recs = rebuild_positions(g, h, w)
        planes = np.zeros((n, NUM_PLANES, h, w), np.float32)
        encode_batch(recs, planes)
        legal = planes[:, 2] > 0
        left = g.get("plies_left")
        own = None
        if "final" in g:  # the mover's view: +1 the side to move's stones (player ply % 2 + 1)
            mover = (g["ply"].astype(np.int64) % 2 + 1)[:, None, None]
            own = np.where(g["final"] == mover, 1.0, np.where(g["final"] > 0, -1.0, 0.0)).astype(np.float32)
        b = Batch(h, w, planes, g["policy"].astype(np.float32), g["policy_weight"].astype(np.float32),
                  g["outcome"].astype(np.int64), legal, g["root_wdl"].astype(np.float32),
                  None if left is None else left.astype(np.float32), own)
        if flip:
            flip_batch(b, rng.random(n) < 0.5)
        return b


__all__ = ["Batch", "ReplayWindow", "WindowConfig", "flip_batch", "SAMPLE_FIELDS"]
