"""`c4fast loop` (`python -m selfplay.generation.loop`): the whole AlphaZero loop in one command.

The loop's presets and config (:class:`LoopConfig`, :data:`PRESETS`) and its local
placement: :class:`selfplay.generation.orchestrator.Orchestrator` with :class:`LocalPlacement`,
which runs self-play (``selfplay.generation.run`` following the trainer's checkpoints) and the
trainer in follow mode (``nets.train``) as child processes, each started with a JSON
config file written by this process; the orchestrator runs a periodic arena evaluation
of each new checkpoint against fixed anchors, with Elo ratings fitted on all games so
far. Everything lives under ``--dir``::

    DIR/loop.json        the complete LoopConfig, accumulated run time, evaluated checkpoints
    DIR/config/          selfplay.json, train.json: what the children were started with
    DIR/data/            self-play shards (HDF5)
    DIR/train/           train_state.pt, models/model_XXXXXXXX.pt, tb/ (TensorBoard)
    DIR/arena/games.jsonl  every evaluation game (selfplay.evaluation.elo reads it)
    DIR/ratings.json     latest Elo fit;  DIR/elo_curve.csv  Elo per checkpoint
    DIR/logs/            loop.log, selfplay.log, train.log

A status line every ``--status-every`` seconds (the run's games and samples, a resumed
run's earlier starts included; trainer steps, rates, latest Elo). Ctrl-C, SIGTERM or SIGHUP
stop everything cleanly (finished games and the trainer state are written); the children
die with this process even if it is killed; a second loop on the same DIR is refused. The
same command resumes where it stopped, until ``--minutes`` of run time in total (or
``--max-evaluations`` evaluated checkpoints).
Flags override the preset; on resume, the stored config plus the flags given now.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import field

from c4fast.cli import ConfigError, add_config_arguments, opt, save_config
from c4fast.config import SearchConfig
from c4fast.game import parse_sizes
from c4fast.runtime import (LockedError, cpu_seconds, read_json, die_with_parent, forget_handled_interrupt,
                            raise_on_interrupt, setup_logging)
from nets.config import get_preset
from nets.replay import WindowConfig
from nets.train import TrainConfig, TrainRunConfig
from selfplay.generation.config import RunConfig, SelfPlayConfig
from selfplay.evaluation.periodic import EvalConfig
from selfplay.generation.orchestrator import Orchestrator, OrchestratorError, run_config

log = logging.getLogger("selfplay.generation.loop")


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """One loop: run time, seed and sizes (shared by both children), the self-play run,
    the trainer and the evaluation. The fields in :data:`LOOP_MANAGED` are set by the
    loop itself (from ``net``, ``seed``, ``sizes`` and the run directory)."""

    preset: str = field(default="cpu", metadata=opt(cli=False))
    net: str = field(default="cpu_small", metadata=opt("network preset (self-play and trainer)"))
    minutes: float = field(default=60.0, metadata=opt("total run time in minutes"))
    max_evaluations: int = field(default=0, metadata=opt("stop after this many evaluated checkpoints (0: no limit)"))
    seed: int = field(default=0, metadata=opt("seed of self-play, the trainer and the arena"))
    sizes: str = field(default="saiblo", metadata=opt("board sizes: 'saiblo' or a list like 6x7"))
    status_every: float = field(default=30.0, metadata=opt("seconds between status lines"))
    selfplay: RunConfig = field(default=RunConfig(), metadata=opt("self-play"))
    train: TrainRunConfig = field(default=TrainRunConfig(), metadata=opt("trainer"))
    eval: EvalConfig = field(default=EvalConfig(), metadata=opt("evaluation"))

    def __post_init__(self):
        if not (math.isfinite(self.minutes) and self.minutes > 0):
            raise ValueError(f"--minutes must be a finite number > 0, got {self.minutes}")
        if self.max_evaluations < 0 or not (math.isfinite(self.status_every) and self.status_every > 0):
            raise ValueError("--max-evaluations must be >= 0 and --status-every > 0")
        parse_sizes(self.sizes)
        self.train.train.check_net(get_preset(self.net))  # the trainer runs this net (LOOP_MANAGED)


def _preset(name: str, net: str, *, evaluation: EvalConfig, gpus: int = 0, workers: int = 1,
            games: int = 48, full: int = 200, fast: int = 50, prob: float = 0.25, server_threads: int = 1,
            train_threads: int = 1, per_size: int = 16, ratio: float = 6.0, window_c: float = 25_000,
            checkpoint_every: int = 200, samples_per_shard: int = 2000, reload_interval: float = 5.0,
            forward: str = "auto", value_mix: float = 0.0, value_distance: float = 0.0, root_search: str = "puct",
            padded: bool = False, lr: float = TrainConfig.lr, ownership_weight: float = 0.0,
            c_puct: float = SearchConfig.c_puct, games_config: SelfPlayConfig = SelfPlayConfig()) -> LoopConfig:
    """A loop preset from the knobs that differ between presets (keywords; the rest are
    the config classes' defaults): `games` games per self-play worker, `full`/`fast`/`prob`
    the playout cap (playouts of a full and a fast search, share of full ones),
    `root_search` self-play's root (puct or gumbel), `per_size` training samples per board size per step, `ratio` trained per generated
    samples, `window_c` the replay window constant (samples), `padded` one compiled canvas pass per
    training step (``TrainConfig.padded`` and ``compile``: the per-size step's maths in one pass),
    `lr` the trainer's peak learning rate (SGD, per step), `ownership_weight` the weight of the
    training-only ownership target (``TrainConfig.ownership_weight``; 0: no head), `c_puct`
    self-play's PUCT constant (play keeps ``SearchConfig.c_puct``)."""
    return LoopConfig(
        preset=name, net=net,
        selfplay=RunConfig(gpus=gpus, workers=workers, games_per_worker=games, preset=net,
                           threads=server_threads, samples_per_shard=samples_per_shard,
                           reload_interval=reload_interval, status_every=30.0, forward=forward,
                           search=SearchConfig(full_playouts=full, fast_playouts=fast, full_probability=prob,
                                               root_search=root_search, c_puct=c_puct),
                           selfplay=games_config),
        train=TrainRunConfig(threads=train_threads, poll=min(5.0, reload_interval),
                             train=TrainConfig(preset=net, per_size=per_size, lr=lr, ratio=ratio, value_mix=value_mix,
                                               value_distance=value_distance, padded=padded, compile=padded,
                                               ownership_weight=ownership_weight,
                                               checkpoint_every=checkpoint_every,
                                               window=WindowConfig(c=window_c))),
        eval=evaluation)


def _standard(cfg: LoopConfig) -> LoopConfig:
    """`cfg` on standard connect four: 6x7 boards without a forbidden cell."""
    sp = dataclasses.replace(cfg.selfplay, selfplay=dataclasses.replace(cfg.selfplay.selfplay, forbidden_cell=False))
    return dataclasses.replace(cfg, sizes="6x7", selfplay=sp)


#: the cpu preset's evaluation anchors: UCT with 2,000 rollouts, alpha-beta to depth 6 (5 s cap)
CPU_ANCHORS = ("uct:2000", "alphabeta:5:6")

#: cpu: Saiblo boards on 2 cores; standard: 6x7 without a forbidden cell (Pons's yardstick);
#: gpu: one GPU with the b3c128nbt net; dummy: seconds-long runs for tests.
PRESETS = {
    # CPU budget: the workers, server threads and trainer threads (0 here) are sized at
    # start from this machine's measured speeds (selfplay.generation.cores: a 2-core machine
    # gets 1 worker, 1 server thread, 1 trainer thread; docs/PERFORMANCE.md); the server runs
    # the CPU engine measured fastest (forward auto, e.g. bf16 on AVX512-BF16/AMX CPUs);
    # value target 0.5 outcome + 0.5 root WDL: 0.63 [0.54, 0.71] in 60 pairs against the
    # outcome-only target after 12 equal minutes (docs/ABLATIONS.md); moves sampled at
    # temperature 0.5^(1 + 2x) (0.5 at the first move, 0.125 on a full board; katac4's
    # 0.8^(1 + x) before): 0.62 [0.55, 0.69] in 100 pairs after 60 equal minutes, 0.60
    # [0.50, 0.70] in 50 pairs at equal samples (docs/ABLATIONS.md). Evaluation anchors
    # UCT-2000 (rated 0) and a depth-6 alpha-beta, deterministic and neither saturated by a
    # 60-minute net (random/greedy/UCT-500 were: 46-48 wins of 48, ~1,300-Elo intervals).
    # Gumbel root search with 50 playouts for every move (each a weight-1 completed-Q policy
    # target) instead of PUCT with the playout cap 200/50, a quarter full: 0.72 [0.63, 0.79]
    # in 60 pairs after 12 equal minutes, 1.65x the samples (docs/ABLATIONS.md, issue 35).
    # 96 games per worker instead of 48: the server's mean batch 105 -> 198, 1.27x the samples
    # in 6 minutes and 0.62 [0.55, 0.68] in 100 pairs after 12 equal minutes on an AMX CPU
    # (docs/ABLATIONS.md, issue 34). KataGo's ownership target at weight 1.5 (as `standard`):
    # 0.665 and 0.5375 in 100 pairs each after 12 equal minutes, seeds 11 and 12 (0.601 [0.558,
    # 0.645] by pairs over the 200), on 0.89x and 0.85x the control's trainer steps (the head
    # costs the trainer's core); two 60-minute runs scored 0.600 [0.533, 0.667] and 0.6875
    # [0.624, 0.751] by pairs in 100 against the c4fast_cpu of 2026-11-26, trained without it;
    # the second shipped as c4fast_cpu (docs/ABLATIONS.md, issue 35). Self-play's c_puct 0.7 (PUCT
    # below the Gumbel root; play keeps 1.1), as `standard`: 0.525 and 0.575 in 100 pairs each
    # after 12 equal minutes, seeds 11 and 12 (0.550 [0.501, 0.599] by pairs over the 200), on
    # 0.94x and 0.84x the control's samples; 60 minutes of this preset beat that c4fast_cpu
    # 0.5825 [0.540, 0.625] by pairs in 200 and ship as c4fast_cpu (docs/ABLATIONS.md, issue 35).
    # No distance in the value target (`standard` has d = 1): d = 1 won two 12-minute seeds
    # (0.549 [0.503, 0.595] by pairs over 200) but over 60 minutes it was level with that
    # c4fast_cpu (0.489 [0.447, 0.531], seed 11) and lost to this preset re-run beside it
    # (0.415 [0.369, 0.461] by pairs in 200, seed 12, on 0.91x its samples; docs/ABLATIONS.md)
    "cpu": _preset("cpu", "cpu_small", games=96, value_mix=0.5, workers=0, server_threads=0, train_threads=0,
                   full=50, fast=50, prob=1.0, root_search="gumbel", ownership_weight=1.5, c_puct=0.7,
                   games_config=SelfPlayConfig(move_temp_base=0.5, move_temp_decay=2.0),
                   evaluation=EvalConfig(every_min=10.0, pairs=12, playouts=100, anchors=CPU_ANCHORS)),
    # GPU: 64 samples per size per step (1,024 a step): the trainer is launch-bound, so on an
    # H100 a step of 64 per size costs no more than one of 16 (217 vs 247 ms, 4,721 vs 1,036
    # samples/s, `nets.train --bench --device cuda`), and in a 20-minute loop it trained
    # 2,356 samples/s against 916 at 16 (docs/benchmarks/gpu_h100_2026-11-24.md); the value
    # mix 0.5 and the cooler move sampling of the cpu preset (measured there; issue 33 item 5:
    # kept until a GPU run measures otherwise). The trainer runs one compiled canvas pass per
    # step (--train.padded --train.compile: 74,675 samples/s at 256 per size on an H200 against
    # 15,684 for one pass per size, docs/benchmarks/gpu_h200_2026-11-27.md). With batch-norm
    # statistics per size it computes the per-size step's losses, gradients and running
    # statistics (tests/test_train.py); the earlier padded step pooled them over all sizes and
    # lost or tied in four 12-minute CPU loops, this one tied (0.5025 in 100 pairs, bf16 on an
    # AMX CPU; docs/ABLATIONS.md). The ownership target at 1.5 (issue 35): the cpu preset's,
    # measured there (two 12-minute seeds on Saiblo boards), kept until a GPU run measures otherwise;
    # the padded step trains the head as the per-size one does (tests/test_train.py)
    "gpu": _preset("gpu", "b3c128nbt", gpus=1, workers=8, games=256, full=800, fast=160, server_threads=0,
                   train_threads=0, per_size=64, ratio=4.0, window_c=250_000, checkpoint_every=500,
                   value_mix=0.5, padded=True, ownership_weight=1.5,
                   games_config=SelfPlayConfig(move_temp_base=0.5, move_temp_decay=2.0),
                   evaluation=EvalConfig(every_min=10.0, pairs=20, playouts=200)),
    # value target 0.5 outcome + 0.5 root WDL: 8.5 % vs 11.7 % non-optimal Pons moves after
    # 12 equal minutes (docs/ABLATIONS.md); PUCT with the playout cap, not Gumbel: Gumbel 50
    # made 10.7 % vs 8.5-8.7 % in two seeds (issue 35); distance in the value target (a
    # decided outcome gives plies left / cells of its mass to the draw): 8.82 -> 7.84 % and
    # 8.84 -> 7.62 % in two 12-minute seeds, matches level (pooled 0.5075), 8.02 % after 60
    # minutes against the shipped model's 9.12 % (0.5325 in 100 pairs; docs/ABLATIONS.md);
    # exact solver labels (outcome and distance) for samples with <= 20 empty cells: 0.52,
    # 0.55, 0.57 in three 12-minute seeds against the preset without them (0.547 [0.505,
    # 0.588] over the 150 pairs), Pons exact misses -0.80, -0.20, -0.14 points, result-
    # changing ones level; about 450 solver nodes a sample, no fewer samples; half the games
    # start from a fork of up to 28 random-ish moves (Pons's positions look like random play):
    # Pons 8.04 -> 7.48 % exact / 1.86 -> 1.52 % result-changing in 12 minutes (seed 11, the
    # control beside it), 7.84 -> 6.76 % / 1.16 -> 0.92 % over 60 (seed 17), matches level
    # (0.485 and 0.485 in 100 pairs each; docs/ABLATIONS.md); learning rate 0.05 instead of
    # 0.02: 0.5675 and 0.5475 in two 12-minute seeds (0.5575 [0.52, 0.60] by pairs over the
    # 200), Pons 7.80 -> 7.54 % and 7.78 -> 7.18 % exact, 1.58 -> 1.46 % and 1.86 -> 1.32 %
    # result-changing; 0.01 lost 0.4425, 0.1 was level with 0.05; over 60 minutes (seed 17,
    # the 0.02 control beside it) 0.5675 [0.535, 0.60] by pairs in 200, Pons 6.32 -> 6.56 %
    # exact, 0.74 -> 0.82 % result-changing (inside the seed spread; docs/ABLATIONS.md);
    # KataGo's ownership target at weight 1.5 (a training-only head learns each cell's owner at
    # the game's end): Pons 6.98 -> 6.52 % and 7.46 -> 6.22 % exact, 1.34 -> 1.26 % and 1.50 ->
    # 1.18 % result-changing in two 12-minute seeds against the preset re-run beside it,
    # matches 0.5825 and 0.470 (1.22x and 0.85x the control's samples); over 60 minutes (seed
    # 17) 5.86 % / 0.68 %, 0.529 [0.497, 0.561] by pairs in 200 against the shipped model on
    # 0.80x its samples (docs/ABLATIONS.md); self-play's c_puct 0.7 instead of 1.1 (play keeps
    # 1.1): Pons 6.64 -> 6.56 %, 7.04 -> 6.58 %, 7.16 -> 6.52 % exact in three 12-minute seeds
    # against the preset re-run beside them, raw policy +1.3 to +3.8 points, matches 0.5675,
    # 0.5225, 0.520 (0.537 [0.507, 0.566] by pairs over the 300; docs/ABLATIONS.md); solver
    # rescoring (the samples before a solved one take its result and distance): 0.5375
    # [0.507, 0.568] by pairs over three 12-minute seeds, Pons -0.42 and -0.32 exact points in
    # the two with matched samples; over 60 minutes (seed 11, the control beside it) Pons 5.56
    # -> 4.96 % exact, 0.68 -> 0.50 % result-changing, 0.509 [0.483, 0.535] by pairs in 200
    "standard": _standard(_preset("standard", "cpu_small", per_size=64, value_mix=0.5, value_distance=1.0, lr=0.05,
                                  ownership_weight=1.5, c_puct=0.7,
                                  games_config=SelfPlayConfig(solve_max_empty=20, solve_rescore=True,
                                                              fork_probability=0.5, fork_max_fill=0.67),
                                  workers=0,
                                  server_threads=0, train_threads=0,
                                  evaluation=EvalConfig(every_min=10.0, pairs=8, playouts=100,
                                                        anchors=("random", "greedy", "alphabeta:0.05")))),
    "dummy": _preset("dummy", "tiny", games=4, full=16, fast=4, prob=0.5, per_size=4, ratio=1.0, window_c=1000,
                     checkpoint_every=5, samples_per_shard=100, reload_interval=1.0,
                     evaluation=EvalConfig(every_min=0.02, pairs=1, playouts=8, anchors=("random",))),
}


#: fields of the children's configs that the loop sets (no flags for them)
LOOP_MANAGED = frozenset({"selfplay.model", "selfplay.out", "selfplay.time", "selfplay.seed", "selfplay.sizes",
                          "selfplay.preset", "selfplay.status_file", "train.out", "train.follow", "train.resume",
                          "train.status_file", "train.sizes", "train.train.seed",
                          "train.train.preset"})


class LocalPlacement:
    """The loop's processes on this machine: ``selfplay.generation.run`` and ``nets.train`` as child
    processes (own process groups, dying with this process), each started with its config
    as a JSON file in ``DIR/config/``, logging to ``DIR/logs/``."""

    state_file = "loop.json"
    lock_name = "selfplay.generation.loop"

    def __init__(self):
        self.procs: dict[str, subprocess.Popen] = {}
        self.plan: dict | None = None  # the measured core split (see sized)
        self.run: Orchestrator | None = None
        self.budget = 0.0
        self._cpu_last: tuple[float, dict] | None = None  # (monotonic time, CPU seconds per role)
        self._before = (0, 0)  # (games, samples) that earlier starts of a resumed run left in DIR/data

    def start(self, run: Orchestrator, remaining_s: float) -> None:
        self.run, self.budget = run, remaining_s
        # a resumed run: the status line counts the run's games and samples, not this start's
        # alone, and never reads an earlier start's self-play status as this one's
        self._before = run.totals()
        try:
            os.remove(os.path.join(run.logs, "selfplay_status.json"))
        except FileNotFoundError:
            pass
        sp, tr = self.sized(run, *run.child_configs(remaining_s))
        conf = os.path.join(run.dir, "config")
        save_config(sp, os.path.join(conf, "selfplay.json"))
        save_config(tr, os.path.join(conf, "train.json"))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        parent = os.getpid()

        def child_setup():  # new process group (clean group signals), dies with the loop
            os.setsid()
            die_with_parent(signal.SIGTERM, parent)

        for name, module in (("selfplay", "selfplay.generation.run"), ("train", "nets.train")):
            out = open(os.path.join(run.logs, f"{name}.log"), "a")
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", module, "--config", os.path.join(conf, f"{name}.json")],
                stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=child_setup)
            out.close()
            log.info("started %s (pid %d), log %s", name, self.procs[name].pid, out.name)

    def sized(self, run: Orchestrator, sp: RunConfig, tr: TrainRunConfig) -> tuple[RunConfig, TrainRunConfig]:
        """The children's configs with the roles left at 0 (``selfplay.workers``,
        ``selfplay.threads``, ``train.threads``) sized from this machine's measured speeds
        (:mod:`selfplay.generation.cores`; CPU self-play only: a GPU run keeps them). The
        plan goes into the state file and the summary."""
        if sp.gpus > 0 or 0 not in (sp.workers, sp.threads, tr.threads):
            return sp, tr
        from selfplay.generation.cores import measure_costs, split_cores, usable_cores

        cores = usable_cores()
        games = sp.games_per_worker or 32
        costs = measure_costs(sp.net_preset, sp.size_list, sp.search, sp.selfplay, sp.forward,
                              min(256, games * sp.search.leaves_per_step), tr.train.resolved_precision(),
                              tr.train.per_size)
        plan = split_cores(cores, costs, tr.train.ratio)
        sp = dataclasses.replace(sp, workers=sp.workers or plan.workers, threads=sp.threads or plan.server_threads)
        tr = dataclasses.replace(tr, threads=tr.threads or plan.train_threads)
        self.plan = {"cores": cores, **plan.to_dict(), "costs": dataclasses.asdict(costs),
                     "used": {"workers": sp.workers, "server_threads": sp.threads, "train_threads": tr.threads}}
        run.state["core_split"] = self.plan
        log.info("cores: %d usable; measured %s; split %s -> %d worker(s), %d server thread(s), "
                 "%d trainer thread(s)", cores, costs, plan.shares, sp.workers, sp.threads, tr.threads)
        return sp, tr

    def poll(self) -> None:
        tr, sp = self.procs["train"], self.procs["selfplay"]
        logs = self.run.logs
        if tr.poll() is not None:
            raise OrchestratorError(f"the trainer exited with code {tr.returncode}; see {logs}/train.log")
        if sp.poll() is not None and self.run.run_time() < self.budget - 5:
            raise OrchestratorError(f"self-play exited with code {sp.returncode}; see {logs}/selfplay.log")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 120
        for name, p in self.procs.items():
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in time: killing it", name)
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def progress(self) -> dict:
        sp = read_json(os.path.join(self.run.logs, "selfplay_status.json"))
        tr = read_json(os.path.join(self.run.logs, "train_status.json"))
        games, samples = self._before
        return {"games": games + sp.get("games", 0), "samples": samples + sp.get("samples", 0),
                "samples_per_s": sp.get("samples_per_s", 0), "evals_per_s": sp.get("evals_per_s", 0),
                "train_step": tr.get("step", 0), "train_samples_per_s": tr.get("samples_per_s", 0),
                "cores": self.cpu_split(sp), "note": _selfplay_note(sp)}

    def cpu_split(self, sp: dict) -> dict[str, float]:
        """Cores in use per role since the previous call (CPU seconds / wall seconds, from
        /proc): "search" (self-play workers: search, encoding, shard writing), "inference"
        (the servers), "train" (the trainer), "other" (the loop with its evaluation games and
        the self-play parent). The CPU budget of the preset, as measured."""
        pids = {"search": sp.get("worker_pids", []), "inference": sp.get("server_pids", []),
                "train": [self.procs["train"].pid] if "train" in self.procs else [],
                "other": [self.procs["selfplay"].pid] if "selfplay" in self.procs else []}
        now = time.monotonic()
        total = {role: sum(cpu_seconds(p) for p in ps) for role, ps in pids.items()}
        total["other"] += cpu_seconds(os.getpid(), reaped_children=True)  # + evaluation games
        last, self._cpu_last = self._cpu_last, (now, total)
        if last is None or now - last[0] < 1.0:
            return {}
        dt = now - last[0]
        # a restarted process starts again from 0: never report a negative share
        return {role: max(0.0, (total[role] - last[1].get(role, 0.0)) / dt) for role in total}

    def summary(self) -> dict:
        """The measured core split, and this start's self-play counts from its last status
        (the solver's labels among them; ``samples`` above counts the whole run)."""
        out = {"core_split": self.plan} if self.plan else {}
        sp = read_json(os.path.join(self.run.logs, "selfplay_status.json")) if self.run else {}
        if sp:
            out["selfplay"] = {"final": False, **{k: sp[k] for k in _SELFPLAY_SUMMARY if k in sp}}
        return out


_SELFPLAY_SUMMARY = ("seconds", "games", "samples", "samples_per_s", "evals_per_s", "solved_samples",
                     "solve_tries", "rescored_samples", "worker_restarts", "forward", "final")


def _selfplay_note(sp: dict) -> str:
    """The status line's self-play tail: the forward in use and, with the solver on, its labels."""
    parts = [f"forward {sp['forward']}"] if sp.get("forward") else []
    if sp.get("solve_tries"):
        parts.append(f"solved {sp.get('solved_samples', 0)} of {sp['solve_tries']} tried, "
                     f"rescored {sp.get('rescored_samples', 0)}")
    return "  ".join(parts)


def build_parser() -> argparse.ArgumentParser:
    """``--preset``/``--dir`` plus flags derived from :class:`LoopConfig` (nested ones
    prefixed: ``--selfplay.full-playouts``, ``--train.lr``, ``--eval.pairs``)."""
    ap = argparse.ArgumentParser(prog="python -m selfplay.generation.loop", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default=None, choices=sorted(PRESETS),
                    help="loop preset for a new run (default cpu; a resumed run keeps its own)")
    ap.add_argument("--dir", default="runs/loop", help="run directory (default runs/loop)")
    add_config_arguments(ap, LoopConfig, base=PRESETS["cpu"], skip=LOOP_MANAGED)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    raise_on_interrupt()
    try:
        cfg = run_config(LoopConfig, args, PRESETS, LocalPlacement.state_file)
        loop = Orchestrator(cfg, args.dir, LocalPlacement())
        setup_logging(os.path.join(args.dir, "logs", "loop.log"))
        loop.open()
    except (ConfigError, ValueError, OSError) as e:
        setup_logging()
        log.error("%s", e)
        return 2
    except LockedError as e:
        log.error("%s", e)
        return 2
    summary = loop.run()
    print(json.dumps(summary), flush=True)
    forget_handled_interrupt()
    return 1 if "error" in summary else 0


if __name__ == "__main__":
    sys.exit(main())
