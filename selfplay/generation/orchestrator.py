"""One training run over one run directory, whatever places its processes.

The :class:`Orchestrator` owns the run directory and everything about the run that does
not depend on where the processes live: the directory lock, the state file (settings, run
time so far, evaluated checkpoints, latest Elo), the time budget across resumes, the
periodic evaluation of the newest checkpoint, the status line and the summary. A
:class:`Placement` owns the processes: :class:`selfplay.generation.loop.LocalPlacement` runs
``selfplay.generation.run`` and ``nets.train`` as child processes of this machine,
:class:`selfplay.cluster.driver.RayPlacement` runs them in Ray actors on many nodes and
moves shards and checkpoints between them. Both get their children's configs from
:meth:`Orchestrator.child_configs`, the one config path (every knob of
:class:`selfplay.generation.loop.LoopConfig` is a flag of both commands).

Layout of DIR (both placements)::

    DIR/data/            shards (the trainer's replay window)
    DIR/train/           train_state.pt, models/model_XXXXXXXX.pt, tb/
    DIR/arena/games.jsonl, DIR/ratings.json, DIR/elo_curve.csv   the evaluation
    DIR/logs/            logs and the children's status files
    DIR/config/          the children's configs as JSON (local placement)
    DIR/<state file>     loop.json (local) or cluster.json (Ray): written atomically at
                         start, every status interval, after each evaluation and at the end

Time: the run time of every invocation adds up in the state file; a run ends when the
total reaches ``minutes`` (or ``max_evaluations`` checkpoints are rated), and the state
saved every status interval carries the current invocation's time too, so a resume after
kill -9 keeps the budget.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from typing import Protocol

from c4fast.cli import ConfigError, config_from_dict, config_to_dict
from c4fast.runtime import DirLock, atomic_write_json, check_interrupt, ignore_interrupts, restore_handlers

log = logging.getLogger("selfplay.generation.orchestrator")


class OrchestratorError(RuntimeError):
    """A child process or actor failed for good (the message says which and where its log is)."""


class _EvaluationStopped(Exception):
    """The run asked a background evaluation to stop (its games so far are kept)."""


class Placement(Protocol):
    """Where the self-play and trainer processes run (see the module docstring)."""

    #: the run directory's state file name ("loop.json", "cluster.json")
    state_file: str
    #: the lock holder's name for a second run on the directory
    lock_name: str

    def start(self, run: "Orchestrator", remaining_s: float) -> None:
        """Start self-play and the trainer for at most `remaining_s` seconds."""

    def poll(self) -> None:
        """Called about twice a second: move data, supervise; OrchestratorError on a failure."""

    def progress(self) -> dict:
        """Figures for the status line: ``games``, ``samples``, ``samples_per_s``,
        ``evals_per_s``, ``train_step``, ``train_samples_per_s`` (absent: unknown) and
        ``cores`` ({role: cores in use}); ``note``: extra text."""

    def stop(self) -> None:
        """Stop everything cleanly (finished games written, the trainer's state saved)."""

    def summary(self) -> dict:
        """The placement's own fields of the run summary."""


def stored_config(cls, run_dir: str, state_file: str):
    """The config recorded in ``DIR/state_file`` as a `cls`, or None for a new run."""
    path = os.path.join(run_dir, state_file)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            st = json.load(f)
        return config_from_dict(cls, st["config"], f"{state_file} config")
    except (OSError, ValueError, KeyError) as e:
        raise ConfigError(f"{path}: unreadable run state ({e}); move it away to start afresh") from None


def run_config(cls, args, presets: dict, state_file: str):
    """The config of the run in ``args.dir``: the one stored there (a resumed run keeps its
    preset; another ``--preset`` is a ConfigError) or ``presets[args.preset or "cpu"]``,
    with the flags given now applied (``c4fast.cli.config_from_args``)."""
    from c4fast.cli import config_from_args

    if os.path.isfile(args.dir):
        raise ConfigError(f"--dir {args.dir!r} is a file")
    stored = stored_config(cls, args.dir, state_file)
    if stored is not None and args.preset is not None and args.preset != stored.preset:
        raise ConfigError(f"{args.dir!r} holds a {stored.preset!r} run, not {args.preset!r}")
    return config_from_args(cls, args, stored if stored is not None else presets[args.preset or "cpu"])


class Orchestrator:
    """One invocation of a training run over `run_dir` with `cfg` (a
    :class:`selfplay.generation.loop.LoopConfig`) and a `placement`."""

    def __init__(self, cfg, run_dir: str, placement: Placement):
        self.cfg = cfg
        self.placement = placement
        self.dir = os.path.abspath(run_dir)
        self.data = os.path.join(self.dir, "data")
        self.train_dir = os.path.join(self.dir, "train")
        self.models = os.path.join(self.train_dir, "models")
        self.arena = os.path.join(self.dir, "arena", "games.jsonl")
        self.logs = os.path.join(self.dir, "logs")
        self.state_path = os.path.join(self.dir, placement.state_file)
        self.state = {"preset": cfg.preset, "config": config_to_dict(cfg), "elapsed": 0.0, "evaluated": [],
                      "latest_elo": None, "runs": 0}
        self.t_start: float | None = None  # monotonic start of this invocation's clock (None: stopped)
        self.lock: DirLock | None = None
        self._shard_cache: dict[str, tuple[int, int]] = {}  # shard path -> (games, samples)
        self._state_lock = threading.Lock()
        self._eval_thread: threading.Thread | None = None
        self._stop_eval = threading.Event()  # set: a running evaluation stops after its current pair
        self._next_status = 0.0

    # ------------------------------------------------------------- the state file
    def open(self) -> None:
        """Take the directory lock, create the layout, load the accumulated state."""
        os.makedirs(self.dir, exist_ok=True)
        self.lock = DirLock(self.dir, self.placement.lock_name)
        for d in (self.data, self.models, os.path.dirname(self.arena), self.logs):
            os.makedirs(d, exist_ok=True)
        if os.path.exists(self.state_path):
            with open(self.state_path) as f:
                st = json.load(f)
            if st.get("preset") not in (None, self.cfg.preset):
                raise ConfigError(f"{self.dir!r} holds a {st.get('preset')!r} run, not {self.cfg.preset!r}")
            self.state.update({k: st[k] for k in ("elapsed", "evaluated", "latest_elo", "runs") if k in st})
        self.state["config"] = config_to_dict(self.cfg)
        self.state["preset"] = self.cfg.preset

    def save_state(self) -> None:
        """The state file, atomically, with this invocation's run time so far included."""
        with self._state_lock:
            snapshot = dict(self.state, elapsed=self.state["elapsed"] + self.run_time(),
                            evaluated=list(self.state["evaluated"]))
        atomic_write_json(self.state_path, snapshot)

    def run_time(self) -> float:
        """Seconds of this invocation not yet added to ``state['elapsed']``."""
        return 0.0 if self.t_start is None else time.monotonic() - self.t_start

    def elapsed(self) -> float:
        """Run time of all invocations so far, this one included (seconds)."""
        return self.state["elapsed"] + self.run_time()

    # ------------------------------------------------------------- the children's configs
    def child_configs(self, remaining_s: float):
        """(RunConfig, TrainRunConfig) of this run: the preset's with the loop's seed,
        sizes, net and the directory's paths; a placement changes only where files go
        (a node's spool) and which devices serve."""
        c = self.cfg
        sp = dataclasses.replace(c.selfplay, model=self.models, out=self.data, seed=c.seed, sizes=c.sizes,
                                 preset=c.net, time=float(int(remaining_s) + 1),
                                 status_file=os.path.join(self.logs, "selfplay_status.json"))
        tr = dataclasses.replace(c.train, out=self.train_dir, follow=self.data, resume=True, sizes=c.sizes,
                                 status_file=os.path.join(self.logs, "train_status.json"),
                                 train=dataclasses.replace(c.train.train, seed=c.seed, preset=c.net))
        return sp, tr

    # ------------------------------------------------------------- evaluation
    def totals(self) -> tuple[int, int]:
        """(games, samples) in all finished shards of DIR/data (each shard's header read once)."""
        from nets.shards import shard_totals

        return shard_totals([self.data], self._shard_cache)

    def samples(self) -> int:
        """Samples in all finished shards of DIR/data."""
        return self.totals()[1]

    def evaluate_new(self) -> bool:
        """Rate the newest checkpoint against the anchors unless it is rated; True if it was."""
        from c4fast.board import RULES
        from nets.checkpoint import latest_checkpoint
        from selfplay.evaluation.periodic import rate_checkpoint

        path = latest_checkpoint(self.models)
        if path is None or path in self.state["evaluated"]:
            return False
        elo = rate_checkpoint(path, self.cfg.eval, RULES.parse_sizes(self.cfg.sizes),
                              self.cfg.selfplay.selfplay.forbidden_cell, self.cfg.seed, self.dir,
                              self.samples(), self.elapsed(), on_pair=self._after_pair)
        with self._state_lock:
            self.state["evaluated"].append(path)
            if elo is not None:
                self.state["latest_elo"] = elo
        self.save_state()
        return True

    def _after_pair(self) -> None:
        if self._stop_eval.is_set():
            raise _EvaluationStopped

    def _evaluate_safely(self) -> None:
        try:
            self.evaluate_new()
        except _EvaluationStopped:
            log.info("evaluation stopped: its games are kept, and the next start plays the rest")
        except Exception as e:  # noqa: BLE001 - an evaluation must not stop training
            log.warning("evaluation failed: %s: %s", type(e).__name__, e)

    def _unrated(self) -> str | None:
        """The newest checkpoint if it is not rated yet and the run may rate more, else None."""
        from nets.checkpoint import latest_checkpoint

        path = latest_checkpoint(self.models)
        if path is None or path in self.state["evaluated"] or not self._evaluations_left():
            return None
        return path

    def _final_evaluation(self) -> None:
        """Rate the newest checkpoint in this (the main) thread; a signal cuts it short, and
        the next start of the same command plays the pairs it did not."""
        path = self._unrated()
        if path is None:
            return
        ev = self.cfg.eval
        log.info("final evaluation of %s: %d pairs against each of %s at %d playouts (a signal cuts it "
                 "short; the same command finishes it)", os.path.basename(path), ev.pairs, ", ".join(ev.anchors),
                 ev.playouts)
        self._evaluate_safely()

    def _wait_for_evaluation(self) -> None:
        """Wait for a background evaluation (a signal ends the wait: the thread is a daemon)."""
        while self._eval_thread is not None and self._eval_thread.is_alive():
            self._eval_thread.join(0.2)

    def _maybe_evaluate(self, next_eval: float) -> float:
        """Start an evaluation in the background when one is due and none runs."""
        if (time.monotonic() < next_eval or (self._eval_thread is not None and self._eval_thread.is_alive())
                or not self._evaluations_left()):
            return next_eval
        self._eval_thread = threading.Thread(target=self._evaluate_safely, name="c4fast-eval", daemon=True)
        self._eval_thread.start()
        return time.monotonic() + self.cfg.eval.every_min * 60

    def _evaluations_left(self) -> bool:
        return self.cfg.max_evaluations == 0 or len(self.state["evaluated"]) < self.cfg.max_evaluations

    # ------------------------------------------------------------- status
    def status_line(self) -> str:
        """One line: run time, self-play and trainer progress, rates, latest Elo, cores per role."""
        p = self.placement.progress()
        cores = p.get("cores") or {}
        cores_text = ("  cores: " + " ".join(f"{k} {v:.2f}" for k, v in cores.items())
                      + f" of {os.cpu_count()}") if cores else ""
        elo = self.state.get("latest_elo")
        elo_text = f"Elo {elo['elo']:.0f} [{elo['lo']:.0f}, {elo['hi']:.0f}] @ step {elo['step']}" if elo else "Elo -"
        note = f"  {p['note']}" if p.get("note") else ""
        return (f"{self.elapsed() / 60:5.1f}/{self.cfg.minutes:g} min  games {p.get('games', 0)}  samples "
                f"{p.get('samples', 0)} ({p.get('samples_per_s', 0):.1f}/s)  evals {p.get('evals_per_s', 0):.0f}/s"
                f"  train step {p.get('train_step', 0)} ({p.get('train_samples_per_s', 0):.0f} samples/s)  "
                f"{elo_text}{cores_text}{note}")

    def _maybe_status(self) -> None:
        now = time.monotonic()
        if now >= self._next_status:
            log.info("%s", self.status_line())
            self.save_state()
            self._next_status = now + self.cfg.status_every

    # ------------------------------------------------------------- main
    def run(self) -> dict:
        """Run until the time budget or the evaluation count is used up, an interrupt, or a
        failure; returns the summary (with ``error`` after a failure)."""
        budget = self.cfg.minutes * 60 - self.state["elapsed"]
        if budget <= 0 or not self._evaluations_left():
            if self._unrated() is None:
                log.info("the run's budget (%g min, %d evaluations) is already used: nothing to do",
                         self.cfg.minutes, self.cfg.max_evaluations)
            else:  # the last start's final evaluation was cut short
                log.info("the run's budget (%g min) is used, but its newest checkpoint is not rated yet",
                         self.cfg.minutes)
                try:
                    self._final_evaluation()
                except KeyboardInterrupt:
                    log.warning("interrupted: the final evaluation is cut short (the same command finishes it)")
            return self.summary()
        self.state["runs"] = self.state.get("runs", 0) + 1
        interrupted, failure = False, None
        self.t_start = time.monotonic()
        self.save_state()
        try:
            self.placement.start(self, budget)
            next_eval = time.monotonic() + self.cfg.eval.every_min * 60
            self._next_status = time.monotonic() + min(5.0, self.cfg.status_every)
            while self.run_time() < budget and self._evaluations_left():
                time.sleep(0.1)
                check_interrupt()
                self.placement.poll()
                next_eval = self._maybe_evaluate(next_eval)
                self._maybe_status()
        except KeyboardInterrupt:
            interrupted = True
            log.warning("interrupted: stopping self-play and the trainer (the same command resumes)")
        except OrchestratorError as e:
            failure = str(e)
            log.error("%s", e)
        finally:
            handlers = ignore_interrupts()  # a second signal must not cut the clean-up short
            run_time = self.run_time()
            try:
                self.placement.stop()
            finally:
                with self._state_lock:
                    self.state["elapsed"] += run_time
                self.t_start = None
                self.save_state()
        # the clean-up is done: from here a signal cuts short what is left, the evaluations
        restore_handlers(handlers)
        try:
            if interrupted or failure is not None:
                self._stop_eval.set()  # a background evaluation stops after its current pair
            self._wait_for_evaluation()
            if not interrupted and failure is None:
                self._final_evaluation()
        except KeyboardInterrupt:
            self._stop_eval.set()
            interrupted = True
            log.warning("interrupted: the evaluation is cut short (its games are kept; the same command "
                        "finishes it)")
        self.save_state()
        out = self.summary()
        if failure:
            out["error"] = failure
        return out

    def summary(self) -> dict:
        from nets.checkpoint import checkpoint_step, latest_checkpoint

        latest = latest_checkpoint(self.models)
        return {"dir": self.dir, "preset": self.cfg.preset, "elapsed_s": round(self.state["elapsed"], 1),
                "samples": self.samples(), "steps": checkpoint_step(latest) if latest else 0,
                "latest_checkpoint": latest, "evaluated": len(self.state["evaluated"]),
                "latest_elo": self.state.get("latest_elo"), **self.placement.summary()}
