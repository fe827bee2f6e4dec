"""Self-play worker: G games of one board size advancing together through one BatchedMCTS.

Every step selects leaves in all unfinished searches, evaluates them in one batch,
backs up, and then, for every game whose search is done, records a sample, picks a
move and starts the next search. With ``SearchConfig.root_search == "gumbel"`` every
searched move (full or fast) records the completed-Q policy target with policy weight 1
and plays the search's survivor (``BatchedMCTS.gumbel_move``: the Gumbel draw replaces
move sampling, so the move temperature applies to PUCT searches only); the opening's
moves are sampled from the raw policy either way. Finished games are handed to a callback (the shard
writer) with their samples and final outcome; new games start in their slots until the
size's quota is reached, then the worker rotates to the next board size. The workers of a
node start spread evenly over the sizes (:func:`first_size_index`), so that the sizes in
play at any moment, and hence in the newest shards of the replay window, are spread too.

Switches of :class:`SelfPlayConfig` (off by default): ``fork_probability`` starts a share of
the games from a mid-game position reached by cheap randomized moves (``fork_player``:
greedy or depth-limited alpha-beta ones; :func:`c4fast.players.bots.play_fork`; the game's ``moves`` still start from the empty
board, its samples start at the fork), and ``solve_max_empty`` labels the samples with at
most that many empty playable cells with the exact solver's result and distance, and with
``solve_rescore`` the earlier samples of the game from the nearest solved one after them
(:meth:`SelfPlayEngine._solve_labels`).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from dataclasses import dataclass, field

import numpy as np

import c4fast
from c4fast.config import SearchConfig
from c4fast.evaluators import column_plane
from c4fast.mcts import BatchedMCTS, choose_move, run_search
from c4fast.players.bots import AlphaBetaPlayer, play_fork
from c4fast.players.endgame import EndgameSolver, score_result
from c4fast.protocols import Evaluator, ZeroCopyEvaluator
from selfplay.evaluation.fill import FILL_BINS, fill_bin
from selfplay.generation.config import SelfPlayConfig


SERVER_ERROR_EXIT = 3  # a worker's exit code when the inference server failed or refused
SOLVE_TT_LOG2 = 20  # transposition table of a worker's solver for exact labels (2**20 entries, 16 MiB)


@dataclass
class Stats:
    games: int = 0
    samples: int = 0
    moves: int = 0
    evals: int = 0
    playouts: int = 0
    batches: int = 0
    game_length_sum: int = 0
    forks: int = 0  # finished games that started from a mid-game fork
    solve_tries: int = 0  # samples the solver was asked to label (at most solve_max_empty empty cells)
    solved: int = 0  # samples labelled by the solver (within its node budget)
    solve_nodes: int = 0  # nodes of the successful solves
    rescored: int = 0  # unsolved samples relabelled from a later solved one (solve_rescore)
    fill_sum: float = 0.0  # sum over finished games of the final fill (stones / playable cells)
    fill_hist: np.ndarray = field(default_factory=lambda: np.zeros(FILL_BINS, np.int64))  # games per fill bin

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Slot:
    game: c4fast.Game | None = None
    game_id: int = 0
    opening: int = 0
    samples: list = field(default_factory=list)
    full: bool = False
    start_visits: int = 0
    forked: bool = False  # started from a mid-game fork (SelfPlayConfig.fork_probability)


class SelfPlayEngine:
    """Plays games of one board size with any evaluator (see c4fast.evaluators)."""

    def __init__(self, evaluator: Evaluator, search: SearchConfig, policy: SelfPlayConfig, height: int,
                 width: int, num_games: int, seed: int, model_version=lambda: 0, next_game_id=None,
                 solver: EndgameSolver | None = None):
        self.ev = evaluator
        if solver is None and policy.solve_max_empty > 0:
            solver = EndgameSolver(SOLVE_TT_LOG2)
        self.solver = solver  # exact labels (policy.solve_max_empty); shared across a worker's engines
        self.next_game_id = next_game_id  # callable -> int64 id; None: random 62-bit ids
        self.search = search
        self.policy = policy
        self.height, self.width = height, width
        self.num_games = num_games
        self.rng = np.random.default_rng(seed)
        # the alpha-beta fork player (policy.fork_player); its own seed, so that self.rng's
        # stream is the same with either fork player
        self.fork_searcher = (AlphaBetaPlayer(time_budget_s=3600.0, max_depth=policy.fork_depth,
                                              seed=(int(seed) * 7919 + 17) % 2**31, tt_log2=16)
                              if policy.fork_probability > 0 and policy.fork_player == "alphabeta" else None)
        self.mcts = BatchedMCTS(search, num_games, height, width, seed=int(self.rng.integers(2**31)),
                                max_playouts=search.full_playouts)
        if isinstance(evaluator, ZeroCopyEvaluator) and evaluator.max_batch >= self.mcts.max_leaves:
            self.planes = evaluator.planes_buffer(height, width)
        else:
            self.planes = self.mcts.planes_buffer()
        self.gumbel = search.root_search == "gumbel"
        self.slots = [_Slot() for _ in range(num_games)]
        self.model_version = model_version
        self.stats = Stats()

    # -------------------------------------------------------------- game control
    def _new_game(self, g: int) -> None:
        forb = self.policy.draw_setup(self.rng, self.height, self.width)
        s = self.slots[g]
        s.game = c4fast.Game(self.height, self.width, forb)
        s.game_id = int(self.rng.integers(1, 2**62))  # drawn either way: the same random stream
        if self.next_game_id is not None:
            s.game_id = int(self.next_game_id())
        s.opening = int(self.rng.integers(0, self.policy.opening_max + 1))
        s.samples = []
        s.forked = False
        if self.policy.fork_probability > 0 and self.rng.random() < self.policy.fork_probability:
            cells = int(s.game.state[0]["cells"])
            play_fork(s.game, int(self.rng.integers(1, self.policy.fork_plies(cells) + 1)), self.rng,
                      self.fork_searcher)
            s.opening = 0  # samples from the fork on
            s.forked = True
        self.mcts.set_position(g, s.game.state)
        self.mcts.active[g] = True
        self._start_search(g)

    def _start_search(self, g: int) -> None:
        s = self.slots[g]
        game = s.game
        if len(game.moves) < s.opening:
            s.full = False
            self.mcts.start_search(g, 1, full=False, root_temp=1.0)
        else:
            s.full = bool(self.rng.random() < self.search.full_probability)
            target = self.search.full_playouts if s.full else self.search.fast_playouts
            cells = int(game.state[0]["cells"])
            self.mcts.start_search(g, target, full=s.full,
                                   root_temp=self.policy.root_temperature(game.ply, cells))
        s.start_visits = self.mcts.root_playouts(g)

    def _finish_move(self, g: int, on_game) -> None:
        s = self.slots[g]
        game = s.game
        st = self.stats
        st.playouts += self.mcts.root_playouts(g) - s.start_visits
        if len(game.moves) < s.opening:  # opening: sample from the root priors (tempered; noised in full searches)
            p = self.mcts.root_priors(g)
            col = int(self.rng.choice(self.width, p=p / p.sum()))
        else:
            rec = self.mcts.games.positions[g]
            target = self.mcts.policy_target(g)
            policy = column_plane(target, rec, self.height, self.width)
            policy /= policy.sum()
            s.samples.append({
                "stones": rec["stones"].copy(), "forbidden": rec["forbidden"].copy(),
                "last": rec["last"].copy(), "ply": int(rec["ply"]), "policy": policy,
                "policy_weight": 1.0 if s.full or self.gumbel else 0.0,
                "root_wdl": self.mcts.root_wdl(g).astype(np.float32),
                "game_id": s.game_id, "model_version": int(self.model_version()),
            })
            if self.gumbel:
                col = self.mcts.gumbel_move(g)
            else:
                visits = self.mcts.root_visits(g)
                cells = int(rec["cells"])
                col = choose_move(visits, self.policy.move_temperature(game.ply, cells), self.rng)
        game.play(col)
        st.moves += 1
        if game.result is None:
            self.mcts.advance(g, col)
            self._start_search(g)
            return
        # game over: outcome for the side to move of every sample
        res = game.result
        for smp in s.samples:
            smp["outcome"] = c4fast.outcome_for(res, smp["ply"])
        if self.policy.solve_max_empty > 0:
            self._solve_labels(s.samples, game)
        record = {"game_id": s.game_id, "height": self.height, "width": self.width,
                  "forbidden": game.forbidden or (-1, -1), "moves": game.moves,
                  "num_moves": len(game.moves), "result": res, "model_version": int(self.model_version())}
        st.games += 1
        st.samples += len(s.samples)
        st.game_length_sum += len(game.moves)
        st.forks += s.forked
        cells = int(game.state[0]["cells"])
        st.fill_sum += len(game.moves) / cells
        st.fill_hist[fill_bin(len(game.moves), cells)] += 1
        on_game(record, s.samples)
        s.game = None
        self.mcts.active[g] = False

    def _solve_labels(self, samples: list, game: c4fast.Game) -> None:
        """Exact value labels (``SelfPlayConfig.solve_max_empty``), in place: a sample with at
        most that many empty playable cells whose solve fits in ``solve_nodes`` nodes takes
        the solver's result for the side to move as its ``outcome`` and the exact plies to the
        end under perfect play as ``solved_plies``; every other sample keeps the game's
        outcome and ``solved_plies`` -1. The positions are replayed from the game's moves.

        With ``solve_rescore`` an unsolved sample followed by a solved one (at ``k`` more
        plies, label ``(outcome, d)``) takes that sample's result for its own side to move
        (the same for even ``k``, win and loss swapped for odd ``k``) and ``solved_plies``
        ``k + d``: the game's own moves up to the solved position, perfect play from there.
        Such a distance has the parity of an exact one (a win ends on the mover's stone), so
        the shards validate it alike; it is the game's distance with perfect play from the
        solved position on, not the sample position's own exact distance."""
        st = self.stats
        cells = int(game.state[0]["cells"])
        replay = c4fast.Game(self.height, self.width, game.forbidden)
        for smp in samples:
            smp["solved_plies"] = -1
            ply = int(smp["ply"])
            if cells - ply > self.policy.solve_max_empty:
                continue
            while replay.ply < ply:
                replay.play(game.moves[replay.ply])
            st.solve_tries += 1
            res = self.solver.solve(replay, nodes=self.policy.solve_nodes)
            if res is None:  # over budget: the game's outcome stays
                continue
            smp["outcome"], smp["solved_plies"] = score_result(res.score, ply, cells)
            st.solved += 1
            st.solve_nodes += res.nodes
        if self.policy.solve_rescore:
            later = None  # (ply, outcome, solved_plies) of the nearest solved sample after this one
            for smp in reversed(samples):
                ply = int(smp["ply"])
                if smp["solved_plies"] >= 0:
                    later = (ply, int(smp["outcome"]), int(smp["solved_plies"]))
                elif later is not None:
                    k = later[0] - ply
                    smp["outcome"] = later[1] if k % 2 == 0 else 2 - later[1]
                    smp["solved_plies"] = k + later[2]
                    st.rescored += 1

    # -------------------------------------------------------------- main loop
    def begin(self, games_to_start: int, on_game, should_stop=lambda: False) -> None:
        """Start up to `games_to_start` games (the rest start as slots free up in
        :meth:`after_step`); `on_game` receives each finished game."""
        self._quota, self._started, self._on_game, self._should_stop = games_to_start, 0, on_game, should_stop
        self.mcts.active[:] = False
        for g in range(self.num_games):
            if self._started < games_to_start:
                self._new_game(g)
                self._started += 1

    def after_step(self, n: int) -> None:
        """Bookkeeping after a step that evaluated `n` leaves: finish the moves whose search is
        done, record samples, start new games in freed slots."""
        if n:
            self.stats.evals += n
            self.stats.batches += 1
        for g in self.mcts.finished():
            self._finish_move(int(g), self._on_game)
            if self.slots[g].game is None and self._started < self._quota and not self._should_stop():
                self._new_game(int(g))
                self._started += 1

    def play(self, games_to_start: int, on_game, should_stop=lambda: False, on_step=None) -> None:
        """Play until `games_to_start` games have been started here and all are finished
        (or `should_stop()`: then unfinished games are dropped)."""
        self.begin(games_to_start, on_game, should_stop)

        def step(n: int) -> bool:
            self.after_step(n)
            if on_step is not None:
                on_step()
            return should_stop()

        if not should_stop():
            run_search(self.mcts, self.ev, self.planes, on_step=step)
        if should_stop():
            self.mcts.active[:] = False  # unfinished games are dropped


def play_overlapped(engines: list, games_to_start: int, on_game, should_stop=lambda: False, on_step=None) -> None:
    """:meth:`SelfPlayEngine.play` for several game populations of one worker, each searching
    through its own request slot (an :class:`nets.shm_queue.InferenceClient`, ``submit`` and
    ``collect``): while the server evaluates one population's leaves, the worker backs up and
    selects in the others, so neither the worker nor the server waits for the other. The
    games to start are split evenly; `should_stop()` drops the unfinished ones."""
    k = len(engines)
    for i, e in enumerate(engines):
        e.begin(games_to_start // k + (i < games_to_start % k), on_game, should_stop)
    pending = [0] * k  # leaves in flight per population
    while not should_stop():
        busy = False
        for i, e in enumerate(engines):
            if pending[i]:
                logits, wdl = e.ev.collect()
                e.mcts.expand_and_backup(pending[i], logits, wdl)
                e.after_step(pending[i])
                pending[i] = 0
            if e.mcts.active.any() and not should_stop():
                n = e.mcts.select(e.planes)
                if n:
                    e.ev.submit(e.planes[:n])
                    pending[i] = n
                else:
                    e.after_step(0)
            busy = busy or bool(pending[i]) or bool(e.mcts.active.any())
        if on_step is not None:
            on_step()
        if not busy:
            break
    for i, e in enumerate(engines):  # an answer still in flight is read before the slot is reused
        if pending[i]:
            e.ev.collect()
    if should_stop():
        for e in engines:
            e.mcts.active[:] = False  # unfinished games are dropped


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process needs (picklable).

    Identity: ``node_tag`` (the machine), ``incarnation`` (the ``selfplay.generation.run`` invocation
    on it, random by default), ``index`` (the worker) and ``restart`` (how often it was
    restarted) together seed the games and number them, so no two incarnations anywhere
    replay the same games or reuse a game id; all are recorded in the shard.
    """

    index: int
    slot: int
    out_dir: str
    sizes: tuple
    games_per_worker: int
    search: SearchConfig
    policy: SelfPlayConfig
    seed: int
    run_prefix: str
    samples_per_shard: int
    config_json: str
    node_tag: str = "node"
    incarnation: int = 0
    restart: int = 0
    parent_pid: int = 0
    shard_seconds: float = 0.0
    workers: int = 1  # workers of this node (spreads their first board sizes)
    populations: int = 1  # game populations, each on its own request slot (slot * populations + j)

    def seed_sequence(self) -> list[int]:
        return [self.seed, node_hash(self.node_tag), self.incarnation, self.index, self.restart]


def first_size_index(index: int, workers: int, num_sizes: int, node_tag: str = "node") -> int:
    """Index in the size list of worker `index`'s first board size (of `workers` on one
    node): evenly spread, ``index * num_sizes // workers``, turned by a per-node offset so
    that the nodes of a cluster start on different sizes too.

    Workers rotate through the sizes at similar rates, so consecutive starts (0, 1, ..., 7
    of 16) keep a block of neighbouring sizes in play together: a 20-minute H100 run ended
    with 10 of its 16 sizes in the replay window. Spread starts keep them apart."""
    if not (0 <= index < workers and num_sizes >= 1):
        raise ValueError(f"worker {index} of {workers}, {num_sizes} sizes")
    return (index * num_sizes // workers + node_hash(node_tag)) % num_sizes


def node_hash(tag: str) -> int:
    """32-bit hash (sha256) of a node tag: one word of the worker seed."""
    return int.from_bytes(hashlib.sha256(tag.encode()).digest()[:4], "little")


GAME_SERIAL_BITS = 24  # low bits of a game id: serial number within one stream


def game_id_stream(spec: WorkerSpec):
    """Game ids of one worker incarnation: ``stream << 24 | serial``, all in [1, 2**63).

    ``stream`` is a 39-bit hash (sha256, never 0) of (seed, node tag, incarnation,
    worker, restart, serial >> 24), so ids are exactly unique within a stream and two
    streams collide with probability ~2**-39 per pair.
    """
    serial = 0
    while True:
        epoch, low = divmod(serial, 1 << GAME_SERIAL_BITS)
        key = f"{spec.seed}/{spec.node_tag}/{spec.incarnation}/{spec.index}/{spec.restart}/{epoch}"
        stream = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") % ((1 << 39) - 1) + 1
        yield (stream << GAME_SERIAL_BITS) | low
        serial += 1


def worker_main(spec: WorkerSpec, handles, stop_event, reports) -> None:
    """Process entry: play rotating board sizes through the inference server until stopped.

    `reports`: this incarnation's own pipe to the supervisor (a write-only
    ``multiprocessing`` connection): running totals about once a second, then its final
    totals and, on failure, the reason.

    Signals: SIGINT is ignored (the parent decides); SIGTERM and SIGHUP end the worker
    cleanly (finished games are written); the worker also gets SIGTERM when its parent
    dies (no orphans).
    """
    from c4fast.runtime import die_with_parent
    from nets.shm_queue import InferenceClient, ServerError
    from nets.shards import ShardWriter

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    stopping = []

    def on_term(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    if spec.parent_pid:
        die_with_parent(signal.SIGTERM, spec.parent_pid)
    should_stop = lambda: bool(stopping) or stop_event.is_set()  # noqa: E731
    clients = [InferenceClient(handles, spec.slot * spec.populations + j) for j in range(spec.populations)]
    client = clients[0]
    name = (f"{spec.run_prefix}_w{spec.index:02d}_p{os.getpid()}_{spec.node_tag}"
            f"_i{spec.incarnation}_r{spec.restart}")
    writer = ShardWriter(spec.out_dir, name,
                         attrs={"worker": spec.index, "restart": spec.restart, "node_tag": spec.node_tag,
                                "incarnation": str(spec.incarnation),
                                "seed_sequence": json.dumps(spec.seed_sequence()), "config": spec.config_json},
                         samples_per_shard=spec.samples_per_shard, max_seconds=spec.shard_seconds)
    rng = np.random.default_rng(spec.seed_sequence())
    ids = game_id_stream(spec)
    solver = EndgameSolver(SOLVE_TT_LOG2) if spec.policy.solve_max_empty > 0 else None
    sizes = list(spec.sizes)
    k = first_size_index(spec.index, spec.workers, len(sizes), spec.node_tag)
    last_report = time.monotonic()
    totals = Stats()
    engines: list = []
    per_population = max(1, spec.games_per_worker // spec.populations)

    def report(force=False):
        nonlocal last_report
        now = time.monotonic()
        if force or now - last_report > 1.0:
            cur = {k2: totals.__dict__[k2] + sum(e.stats.__dict__[k2] for e in engines) for k2 in totals.__dict__}
            reports.send(("stats", spec.index, spec.restart,
                             {**cur, "written_games": writer.written_games, "written_samples": writer.written_samples}))
            last_report = now

    try:
        while not should_stop():
            h, w = sizes[k % len(sizes)]
            k += 1
            engines = [SelfPlayEngine(c, spec.search, spec.policy, h, w, per_population,
                                      seed=int(rng.integers(2**31)), model_version=lambda: client.model_version,
                                      next_game_id=ids.__next__, solver=solver) for c in clients]
            quota = spec.policy.games_per_size or spec.games_per_worker
            if len(engines) == 1:
                engines[0].play(quota, writer.add_game, should_stop=should_stop, on_step=report)
            else:
                play_overlapped(engines, quota, writer.add_game, should_stop=should_stop, on_step=report)
            for e in engines:
                for key in totals.__dict__:
                    totals.__dict__[key] += e.stats.__dict__[key]
                e.stats = Stats()
            report(force=True)
        writer.flush()
        report(force=True)
    except ServerError as e:
        writer.flush()
        report(force=True)
        reports.send(("error", spec.index, spec.restart, str(e)))
        raise SystemExit(SERVER_ERROR_EXIT) from None
    except Exception as e:  # e.g. a shard that could not be written: the parent's summary says so
        report(force=True)  # what this incarnation did write
        reports.send(("failed", spec.index, spec.restart, f"{type(e).__name__}: {e}"))
        raise
    finally:
        for c in clients:
            c.close()
