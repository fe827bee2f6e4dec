"""HDF5 self-play shards: schema, crash-safe writer, reader and validator.

Schema version 1 (also written down in data/README.md). One file holds the samples
of several finished games, grouped by board size so the trainer loads a size at once:

    /                      attrs: schema_version, encoding_version, created (unix s),
                                  worker, num_samples, num_games, config (JSON)
    /samples/h{H}w{W}/     one group per board size present (H, W = 4..12)
        stones       uint64  (N, 2, 3)  bitboards of player 1 and player 2 (c4fast layout)
        forbidden    int8    (N, 2)     (row, col), row 0 = bottom; (-1, -1) = none
        last         int8    (N, 2, 2)  (row, col) of the last and the previous move; -1 = none
        ply          int16   (N,)       stones on the board; side to move = ply % 2 + 1
        policy       float32 (N, H, W)  search policy target over cells (sums to 1 over
                                        the landing cells of legal columns)
        policy_weight float32 (N,)      1 for full searches, 0 for fast ones (Gumbel: 1 for every search)
        outcome      int8    (N,)       final result for the side to move: 0 win, 1 draw, 2 loss
        root_wdl     float32 (N, 3)     the search's (win, draw, loss) at the root
        game_id      int64   (N,)
        model_version int64  (N,)       network version that played the move
        solved_plies int16   (N,)       optional: exact plies to the end under perfect play
                                        where ``outcome`` is the exact solver's result
                                        (SelfPlayConfig.solve_max_empty; with solve_rescore
                                        also the game's plies to a later solved position
                                        plus its exact distance), -1 where it is
                                        the game's; absent (read as all -1) in shards of runs
                                        without the solver
        (shards written from d99ce20 to 0f5c532 also hold ``surprise``, for the removed
        policy-surprise weighting; readers ignore it)
    /games/                one row per finished game
        game_id int64 (M,), height int8 (M,), width int8 (M,), forbidden int8 (M, 2),
        moves int8 (M, 144) (columns, -1 padded), num_moves int16 (M,),
        result int8 (M,) (0 draw, 1 / 2 winner), model_version int64 (M,)

Planes are rebuilt exactly from (height, width, forbidden, stones, last, ply) with
c4fast.bitboard.rebuild_batch + c4fast.encode.encode_batch, in c4fast's encoding. A shard
stores positions, not planes, so its ``encoding_version`` attribute only records what the
writer used: version 1, or 2 for shards written from 3e18975 to 0f5c532 (the removed
parity planes); both read (:data:`READABLE_ENCODINGS`).

Crash safety: a shard is written to ``NAME.h5.tmp``, closed, then renamed to
``NAME.h5``; readers only look at ``*.h5``. A writer killed mid-write leaves a
``.tmp`` file that is never taken for a shard.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import h5py
import numpy as np

from c4fast import bitboard as bb
from c4fast.evaluators import column_plane
from c4fast.game import Game, IllegalMove, outcome_for
from c4fast.runtime import fsync_dir
from c4fast.encode import ENCODING_VERSION, NUM_PLANES, encode_batch

SCHEMA_VERSION = 1
#: encoding versions of the shards that read: c4fast's, and 2 (written from 3e18975 to
#: 0f5c532; its planes were version 1's plus two, and a shard holds positions, not planes)
READABLE_ENCODINGS = (1, 2)
MAX_MOVES = 144
SAMPLE_FIELDS = {
    "stones": (np.uint64, (2, 3)),
    "forbidden": (np.int8, (2,)),
    "last": (np.int8, (2, 2)),
    "ply": (np.int16, ()),
    "policy_weight": (np.float32, ()),
    "outcome": (np.int8, ()),
    "root_wdl": (np.float32, (3,)),
    "game_id": (np.int64, ()),
    "model_version": (np.int64, ()),
}
#: sample datasets a shard may lack: name -> (dtype, shape, the value a reader fills in)
OPTIONAL_SAMPLE_FIELDS = {
    "solved_plies": (np.int16, (), -1),
}
GAME_FIELDS = {
    "game_id": (np.int64, ()),
    "height": (np.int8, ()),
    "width": (np.int8, ()),
    "forbidden": (np.int8, (2,)),
    "moves": (np.int8, (MAX_MOVES,)),
    "num_moves": (np.int16, ()),
    "result": (np.int8, ()),
    "model_version": (np.int64, ()),
}


class ShardError(ValueError):
    """A shard file is unreadable, truncated, or violates the schema (message names it)."""


class ShardVersionError(ShardError):
    """A shard of another schema or encoding version: written by other code, never skipped
    silently (the trainer stops rather than train on misread data)."""


class ShardValueError(ShardError):
    """A shard whose values are out of range: non-finite, policies not summing to 1,
    outcomes outside {0, 1, 2}, weights outside {0, 1}. Readers skip it by name."""


def check_values(path: str, h: int, w: int, g: dict) -> None:
    """Vectorised value checks of one size group (cheap enough for every read).

    Raises :class:`ShardValueError` naming the file, the group and the first bad field.
    """
    where = f"shard {path!r} {size_group(h, w)}"
    pol = np.asarray(g["policy"], np.float64)
    if not np.isfinite(pol).all() or (pol < 0).any():
        raise ShardValueError(f"{where}: policy holds NaN, infinite or negative values")
    sums = pol.reshape(len(pol), -1).sum(axis=1)
    if len(sums) and np.abs(sums - 1.0).max() > 1e-3:
        raise ShardValueError(f"{where}: a policy target sums to {sums[np.abs(sums - 1).argmax()]:.4g}, not 1")
    wdl = np.asarray(g["root_wdl"], np.float64)
    if not np.isfinite(wdl).all() or (wdl < -1e-6).any() or (len(wdl) and np.abs(wdl.sum(axis=1) - 1).max() > 1e-3):
        raise ShardValueError(f"{where}: root_wdl is not a finite win/draw/loss distribution")
    if not np.isin(g["outcome"], (0, 1, 2)).all():
        raise ShardValueError(f"{where}: outcome outside {{0, 1, 2}}")
    if not np.isin(g["policy_weight"], (0.0, 1.0)).all():
        raise ShardValueError(f"{where}: policy_weight outside {{0, 1}}")
    ply = np.asarray(g["ply"])
    if (ply < 0).any() or (ply >= h * w).any():
        raise ShardValueError(f"{where}: ply outside 0..{h * w - 1}")
    if "solved_plies" in g:
        check_solved(where, g, h, w)


def check_solved(where: str, g: dict, h: int, w: int) -> None:
    """``solved_plies`` d of a size group: -1 (the game's outcome), or an exact distance
    that fits its outcome: a win ends on the side to move's stone (d odd), a loss on the
    opponent's (d even), a draw fills the board (d = empty playable cells)."""
    d = np.asarray(g["solved_plies"], np.int64)
    ply = np.asarray(g["ply"], np.int64)
    empty = h * w - (np.asarray(g["forbidden"])[:, 0] >= 0) - ply
    out = np.asarray(g["outcome"])
    solved = d != -1
    ok = ~solved | ((d >= 1) & (d <= empty) & np.where(out == 1, d == empty, d % 2 == np.where(out == 0, 1, 0)))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ShardValueError(f"{where} sample {i}: solved_plies {int(d[i])} does not fit outcome {int(out[i])} "
                              f"with {int(empty[i])} empty cells")


def size_group(h: int, w: int) -> str:
    return f"h{h}w{w}"


@dataclass
class SampleBuffer:
    """Samples of one board size, accumulated as lists of per-sample arrays."""

    height: int
    width: int
    rows: dict = field(default_factory=lambda: {k: [] for k in [*SAMPLE_FIELDS, "policy", *OPTIONAL_SAMPLE_FIELDS]})
    present: set = field(default_factory=set)  # optional fields some sample of the buffer carries

    def __len__(self):
        return len(self.rows["ply"])


class ShardWriter:
    """Collects finished games and writes them as shards (temp name, fsync, rename, fsync
    of the directory). A shard is written when `samples_per_shard` samples are pending,
    or when the oldest pending game is `max_seconds` old (so a slow run never holds much
    in memory), and on :meth:`flush`."""

    def __init__(self, out_dir: str, prefix: str, attrs: dict | None = None,
                 samples_per_shard: int = 20000, max_seconds: float = 0.0):
        self.out_dir = out_dir
        self.prefix = prefix
        self.attrs = dict(attrs or {})
        self.samples_per_shard = int(samples_per_shard)
        self.max_seconds = float(max_seconds)
        self.first_pending: float | None = None
        self.seq = 0
        self.buffers: dict = {}
        self.games: list = []
        self.pending_samples = 0
        self.written_games = 0  # in the shards written so far (their files in place)
        self.written_samples = 0

    def add_game(self, game: dict, samples: list[dict]) -> None:
        """game: GAME_FIELDS values (moves as a list); samples: SAMPLE_FIELDS + 'policy' (H, W),
        and optionally OPTIONAL_SAMPLE_FIELDS (written only for a size some sample has them)."""
        h, w = int(game["height"]), int(game["width"])
        buf = self.buffers.setdefault((h, w), SampleBuffer(h, w))
        for s in samples:
            for k in buf.rows:
                if k in OPTIONAL_SAMPLE_FIELDS:
                    if k in s:
                        buf.present.add(k)
                    buf.rows[k].append(s.get(k, OPTIONAL_SAMPLE_FIELDS[k][2]))
                else:
                    buf.rows[k].append(s[k])
        self.games.append(game)
        self.pending_samples += len(samples)
        now = time.monotonic()
        if self.first_pending is None:
            self.first_pending = now
        if self.pending_samples >= self.samples_per_shard or (
                self.max_seconds > 0 and now - self.first_pending >= self.max_seconds):
            self.flush()

    def flush(self) -> str | None:
        """Write everything collected so far as one shard; returns its path (None if empty)."""
        if not self.games:
            return None
        os.makedirs(self.out_dir, exist_ok=True)
        name = f"{self.prefix}_{self.seq:05d}.h5"
        final = os.path.join(self.out_dir, name)
        tmp = final + ".tmp"
        with h5py.File(tmp, "w") as f:
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["encoding_version"] = ENCODING_VERSION
            f.attrs["created"] = time.time()
            f.attrs["num_samples"] = self.pending_samples
            f.attrs["num_games"] = len(self.games)
            for k, v in self.attrs.items():
                f.attrs[k] = v if not isinstance(v, dict) else json.dumps(v)
            sg = f.create_group("samples")
            for (h, w), buf in sorted(self.buffers.items()):
                if not len(buf):
                    continue
                g = sg.create_group(size_group(h, w))
                for k, (dt, shape) in SAMPLE_FIELDS.items():
                    g.create_dataset(k, data=np.asarray(buf.rows[k], dtype=dt).reshape(len(buf), *shape),
                                     compression="lzf")
                g.create_dataset("policy", data=np.asarray(buf.rows["policy"], np.float32).reshape(len(buf), h, w),
                                 compression="lzf")
                for k in sorted(buf.present):
                    dt, shape, _ = OPTIONAL_SAMPLE_FIELDS[k]
                    g.create_dataset(k, data=np.asarray(buf.rows[k], dtype=dt).reshape(len(buf), *shape),
                                     compression="lzf")
            gg = f.create_group("games")
            for k, (dt, shape) in GAME_FIELDS.items():
                if k == "moves":
                    arr = np.full((len(self.games), MAX_MOVES), -1, np.int8)
                    for i, gm in enumerate(self.games):
                        arr[i, : len(gm["moves"])] = gm["moves"]
                else:
                    arr = np.asarray([gm[k] for gm in self.games], dtype=dt).reshape(len(self.games), *shape)
                gg.create_dataset(k, data=arr, compression="lzf")
        fd = os.open(tmp, os.O_RDONLY)  # h5py closed the file; make its bytes durable
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        fsync_dir(self.out_dir)
        self.written_games += len(self.games)
        self.written_samples += self.pending_samples
        self.first_pending = None
        self.seq += 1
        self.buffers = {}
        self.games = []
        self.pending_samples = 0
        return final


def _open(path: str) -> h5py.File:
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise ShardError(f"shard {path!r} is unreadable or truncated: {e}") from None


def read_shard(path: str) -> dict:
    """{(h, w): {field: array}} plus key 'games': {field: array}. Raises ShardError."""
    with _open(path) as f:
        version = f.attrs.get("schema_version")
        version = version.item() if hasattr(version, "item") else version
        if version != SCHEMA_VERSION:
            raise ShardVersionError(f"shard {path!r} has schema version {version!r}; this code reads "
                             f"version {SCHEMA_VERSION}")
        enc = f.attrs.get("encoding_version")
        enc = enc.item() if hasattr(enc, "item") else enc
        if enc not in READABLE_ENCODINGS:  # positions are stored, planes rebuilt
            raise ShardVersionError(f"shard {path!r} has encoding version {enc!r}; c4fast reads "
                                    f"{list(READABLE_ENCODINGS)}")
        out: dict = {}
        try:
            for name, g in f["samples"].items():
                h, w = (int(x) for x in name[1:].split("w"))
                grp = out[(h, w)] = {k: g[k][()] for k in [*SAMPLE_FIELDS, "policy"]}
                n = len(grp["ply"])
                for k, (dt, shape, fill) in OPTIONAL_SAMPLE_FIELDS.items():
                    grp[k] = g[k][()] if k in g else np.full((n, *shape), fill, dt)
            out["games"] = {k: f["games"][k][()] for k in GAME_FIELDS}
        except (KeyError, OSError, ValueError) as e:
            raise ShardError(f"shard {path!r} is corrupt or misses data: {e}") from None
    for key, g in out.items():
        if key != "games":
            check_values(path, key[0], key[1], g)
    return out


def _game_rows(path: str, group: dict, games: dict) -> np.ndarray:
    """Each sample's row in the shard's /games (joined on ``game_id``). Raises
    :class:`ShardValueError` for a sample of a game the shard does not hold."""
    gid = np.asarray(games["game_id"], np.int64)
    order = np.argsort(gid, kind="stable")
    sid = np.asarray(group["game_id"], np.int64)
    at = np.searchsorted(gid[order], sid)
    at = np.minimum(at, max(len(gid) - 1, 0))
    if len(sid) and (not len(gid) or (gid[order][at] != sid).any()):
        bad = sid[~np.isin(sid, gid)][0]
        raise ShardValueError(f"shard {path!r}: a sample of game {int(bad)}, which its /games does not hold")
    return order[at] if len(sid) else np.zeros(0, np.int64)


def plies_left(path: str, group: dict, games: dict) -> np.ndarray:
    """Plies from each sample's position to the end of its game (int16, >= 1): the game's
    ``num_moves`` (from the shard's /games, joined on ``game_id``) minus the sample's
    ``ply``. ``num_moves`` counts every stone of the game and ``ply`` the stones on the
    sample's board, so this holds for a game started from a position reached before its
    first sample too. A sample with an exact solver label (``solved_plies`` >= 0, the
    distance under perfect play; for a sample rescored from a later solved one, the plies
    to it plus its exact distance) takes that instead, as its outcome is the solved one.
    The moves-left head's target (``NetConfig.moves_left``). Raises
    :class:`ShardValueError` for a sample of a game the shard does not hold, or one at or
    past its game's end."""
    rows = _game_rows(path, group, games)
    left = np.asarray(games["num_moves"], np.int64)[rows] - np.asarray(group["ply"], np.int64)
    if (left < 1).any():
        raise ShardValueError(f"shard {path!r}: a sample at or past the end of its game (num_moves <= ply)")
    if "solved_plies" in group:
        solved = np.asarray(group["solved_plies"], np.int64)
        left = np.where(solved >= 0, solved, left)
    return left.astype(np.int16)


def final_boards(path: str, group: dict, games: dict, h: int, w: int) -> np.ndarray:
    """The board each sample's game ended on, (N, H, W) int8: 0 empty (the forbidden cell
    too), 1 / 2 the player whose stone lies there; row 0 bottom. Replayed from the shard's
    /games (``moves[:num_moves]`` from the empty board, so a forked game's opening counts).
    The ownership target (``TrainConfig.ownership_weight``). Raises
    :class:`ShardValueError` for a sample of a game the shard does not hold, a game of
    another size, or moves that do not replay."""
    games_of, at = np.unique(_game_rows(path, group, games), return_inverse=True)
    boards = np.zeros((len(games_of), h, w), np.int8)  # one replay per game, then one gather
    for k, r in enumerate(games_of):
        if (int(games["height"][r]), int(games["width"][r])) != (h, w):
            raise ShardValueError(f"shard {path!r}: game {int(games['game_id'][r])} is "
                                  f"{int(games['height'][r])}x{int(games['width'][r])}, its samples {h}x{w}")
        fr, fc = (int(x) for x in games["forbidden"][r])
        n = int(games["num_moves"][r])
        try:
            g = Game.from_moves(h, w, None if fr < 0 else (fr, fc), [int(c) for c in games["moves"][r][:n]])
        except IllegalMove as e:
            raise ShardValueError(f"shard {path!r}: game {int(games['game_id'][r])} does not replay: {e}") from None
        boards[k] = np.maximum(g.board(), 0)
    return boards[at.reshape(-1)]


def rebuild_positions(group: dict, h: int, w: int) -> np.ndarray:
    """POSITION_DTYPE records of a size group's samples."""
    n = len(group["ply"])
    recs = np.zeros(n, bb.POSITION_DTYPE)
    bb.rebuild_batch(recs, np.full(n, h, np.int64), np.full(n, w, np.int64),
                     group["forbidden"].astype(np.int64), group["stones"], group["last"],
                     group["ply"].astype(np.int64))
    return recs


def planes_of(group: dict, h: int, w: int, dtype=np.float32) -> np.ndarray:
    """Input planes (N, C, H, W) rebuilt exactly from a size group's stored state."""
    recs = rebuild_positions(group, h, w)
    out = np.zeros((len(recs), NUM_PLANES, h, w), dtype)
    encode_batch(recs, out)
    return out


def validate_shard(path: str, replay: bool = True) -> dict:
    """Check a shard against the schema; returns a summary. Raises ShardError naming the file.

    Checks dtypes and shapes (of the optional fields too where present), that every policy
    target is a distribution over the landing cells of legal columns, weights in {0, 1},
    outcomes in {0, 1, 2}, solver labels (``solved_plies``) that fit their outcomes, that
    each sample's outcome agrees with its game's result unless the solver gave it, and
    (with `replay`) that replaying every stored game gives its stored result and that every
    sample is the position after its game's first ``ply`` moves (forked games included).
    """
    data = read_shard(path)
    games = data.pop("games")
    result_of = {int(g): int(r) for g, r in zip(games["game_id"], games["result"])}
    n_samples = 0
    for (h, w), g in data.items():
        n = len(g["ply"])
        n_samples += n
        for k, (dt, shape) in SAMPLE_FIELDS.items():
            if g[k].dtype != dt or g[k].shape != (n, *shape):
                raise ShardError(f"shard {path!r} {size_group(h, w)}/{k}: dtype {g[k].dtype} shape "
                                 f"{g[k].shape}, expected {np.dtype(dt)} {(n, *shape)}")
        for k, (dt, shape, _) in OPTIONAL_SAMPLE_FIELDS.items():
            if g[k].dtype != dt or g[k].shape != (n, *shape):
                raise ShardError(f"shard {path!r} {size_group(h, w)}/{k}: dtype {g[k].dtype} shape "
                                 f"{g[k].shape}, expected {np.dtype(dt)} {(n, *shape)}")
        if g["policy"].shape != (n, h, w):
            raise ShardError(f"shard {path!r} {size_group(h, w)}/policy has shape {g['policy'].shape}")
        recs = rebuild_positions(g, h, w)
        if (recs["result"] != bb.RUNNING).any():
            raise ShardError(f"shard {path!r} {size_group(h, w)} holds a finished position")
        for i in range(n):
            pol = g["policy"][i]
            legal = column_plane((recs[i]["top"] < h)[:w], recs[i], h, w, bool)
            if abs(float(pol.sum()) - 1.0) > 1e-4 or pol[~legal].any() or (pol < 0).any():
                raise ShardError(f"shard {path!r} {size_group(h, w)} sample {i}: policy is not a "
                                 f"distribution over legal cells")
        if not np.isin(g["policy_weight"], (0.0, 1.0)).all():
            raise ShardError(f"shard {path!r} {size_group(h, w)}: policy_weight outside {{0, 1}}")
        if not np.isin(g["outcome"], (0, 1, 2)).all():
            raise ShardError(f"shard {path!r} {size_group(h, w)}: outcome outside {{0, 1, 2}}")
        for gid, ply, out, solved in zip(g["game_id"], g["ply"], g["outcome"], g["solved_plies"]):
            res = result_of.get(int(gid))
            if res is None:
                raise ShardError(f"shard {path!r}: sample of unknown game {int(gid)}")
            if solved != -1:  # the exact solver's result, which a game may miss
                continue
            expect = outcome_for(res, int(ply))
            if int(out) != expect:
                raise ShardError(f"shard {path!r}: game {int(gid)} ply {int(ply)} outcome {int(out)} "
                                 f"disagrees with the game result {res}")
    if replay:
        hashes = {}  # game id -> position hash after each number of moves
        for i in range(len(games["game_id"])):
            k = int(games["num_moves"][i])
            fr, fc = (int(x) for x in games["forbidden"][i])
            forb = None if fr < 0 else (fr, fc)
            gm = Game(int(games["height"][i]), int(games["width"][i]), forb)
            seen = [gm.hash]
            try:
                for c in games["moves"][i, :k]:
                    gm.play(int(c))
                    seen.append(gm.hash)
            except ValueError as e:
                raise ShardError(f"shard {path!r}: game {int(games['game_id'][i])} does not replay: {e}") from None
            if gm.result is None or gm.result != int(games["result"][i]):
                raise ShardError(f"shard {path!r}: game {int(games['game_id'][i])} replays to "
                                 f"{gm.result}, stored {int(games['result'][i])}")
            hashes[int(games["game_id"][i])] = seen
        for (h, w), g in data.items():
            recs = rebuild_positions(g, h, w)
            for j, (gid, ply) in enumerate(zip(g["game_id"], g["ply"])):
                seen = hashes[int(gid)]
                if not int(ply) < len(seen) - 1 or int(recs[j]["hash"]) != seen[int(ply)]:
                    raise ShardError(f"shard {path!r} {size_group(h, w)} sample {j}: not the position after "
                                     f"the first {int(ply)} moves of game {int(gid)}")
    return {"path": path, "samples": n_samples, "games": len(games["game_id"]),
            "sizes": sorted(k for k in data)}


def list_shards(paths) -> list[str]:
    """Expand files, globs and directories into sorted ``*.h5`` shard paths (no .tmp)."""
    import glob

    out: set[str] = set()
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out.update(glob.glob(os.path.join(p, "**", "*.h5"), recursive=True))
        elif any(ch in p for ch in "*?["):
            out.update(x for x in glob.glob(p, recursive=True) if x.endswith(".h5"))
        else:
            out.add(p)
    return sorted(out)


def shard_totals(paths, cache: dict | None = None) -> tuple[int, int]:
    """(games, samples) in the finished shards in `paths`, from each shard's ``num_games`` and
    ``num_samples`` attributes (unreadable shards count as 0; a header without ``num_games``
    as 0 games). `cache` (path -> (games, samples)), if given, is filled and reused, so each
    header is read once."""
    shards = list_shards(paths)
    cache = {} if cache is None else cache
    for p in shards:
        if p not in cache:
            try:
                with h5py.File(p, "r") as f:
                    cache[p] = (int(f.attrs.get("num_games", 0)), int(f.attrs["num_samples"]))
            except (OSError, KeyError):
                continue
    counts = [cache[p] for p in shards if p in cache]
    return sum(g for g, _ in counts), sum(n for _, n in counts)
