"""`python -m selfplay.loop`: the whole AlphaZero loop in one command.

Runs, as child processes, self-play (``selfplay.run`` following the trainer's
checkpoints), the trainer in follow mode (``nets.train --follow``), and, in this
process, a periodic arena evaluation of each new checkpoint against fixed anchors
(random, greedy, UCT), with Elo ratings fitted on all games so far. Everything lives
under ``--dir``::

    DIR/data/            self-play shards (HDF5)
    DIR/train/           train_state.pt, models/model_XXXXXXXX.pt, tb/ (TensorBoard)
    DIR/arena/games.jsonl  every evaluation game (selfplay.elo reads it)
    DIR/ratings.json     latest Elo fit;  DIR/elo_curve.csv  Elo per checkpoint
    DIR/loop.json        settings and accumulated run time (for resuming)

Ctrl-C stops everything cleanly (finished games and the trainer state are written);
the same command resumes where it stopped, until ``--minutes`` of run time in total.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

from selfplay.interrupt import raise_on_interrupt


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """One preset of the loop (CPU: tuned to learn on 2 cores within an hour)."""

    name: str
    net: str
    gpus: int
    selfplay_workers: int
    games_per_worker: int
    full_playouts: int
    fast_playouts: int
    full_prob: float
    server_threads: int
    train_threads: int
    per_size: int
    lr: float
    ratio: float
    window_c: int
    checkpoint_every: int
    eval_every_min: float
    eval_pairs: int
    eval_playouts: int
    anchors: tuple = ("random", "greedy", "uct:500")
    samples_per_shard: int = 2000
    reload_interval: float = 5.0


PRESETS = {
    "cpu": LoopConfig(name="cpu", net="cpu_small", gpus=0, selfplay_workers=1, games_per_worker=48,
                      full_playouts=200, fast_playouts=50, full_prob=0.25, server_threads=1,
                      train_threads=1, per_size=16, lr=0.02, ratio=6.0, window_c=25_000,
                      checkpoint_every=200, eval_every_min=10.0, eval_pairs=8, eval_playouts=100),
    "gpu": LoopConfig(name="gpu", net="b3c128nbt", gpus=1, selfplay_workers=8, games_per_worker=256,
                      full_playouts=800, fast_playouts=160, full_prob=0.25, server_threads=0,
                      train_threads=0, per_size=16, lr=0.02, ratio=4.0, window_c=250_000,
                      checkpoint_every=500, eval_every_min=10.0, eval_pairs=20, eval_playouts=200),
    "dummy": LoopConfig(name="dummy", net="tiny", gpus=0, selfplay_workers=1, games_per_worker=4,
                        full_playouts=16, fast_playouts=4, full_prob=0.5, server_threads=1,
                        train_threads=1, per_size=4, lr=0.02, ratio=1.0, window_c=1000,
                        checkpoint_every=5, eval_every_min=0.02, eval_pairs=1, eval_playouts=8,
                        anchors=("random",), samples_per_shard=100, reload_interval=1.0),
}


def _log(msg: str) -> None:
    print(f"[loop {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Loop:
    def __init__(self, cfg: LoopConfig, run_dir: str, minutes: float, seed: int, sizes: str):
        self.cfg = cfg
        self.dir = run_dir
        self.minutes = minutes
        self.seed = seed
        self.sizes = sizes
        self.data = os.path.join(run_dir, "data")
        self.train_dir = os.path.join(run_dir, "train")
        self.models = os.path.join(self.train_dir, "models")
        self.arena = os.path.join(run_dir, "arena", "games.jsonl")
        self.state_path = os.path.join(run_dir, "loop.json")
        self.procs: dict[str, subprocess.Popen] = {}
        self.t_start: float | None = None
        self.stop = threading.Event()
        for d in (self.data, self.models, os.path.dirname(self.arena)):
            os.makedirs(d, exist_ok=True)
        self.state = self._load_state()

    def _load_state(self) -> dict:
        if os.path.exists(self.state_path):
            with open(self.state_path) as f:
                st = json.load(f)
            if st.get("preset") != self.cfg.name:
                raise ValueError(f"{self.dir!r} holds a {st.get('preset')!r} run, not {self.cfg.name!r}")
            return st
        return {"preset": self.cfg.name, "config": dataclasses.asdict(self.cfg), "elapsed": 0.0,
                "evaluated": [], "seed": self.seed, "sizes": self.sizes}

    def _save_state(self) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, self.state_path)

    # ------------------------------------------------------------- children
    def _start_children(self, remaining_s: float) -> None:
        c = self.cfg
        py = sys.executable
        sp = [py, "-m", "selfplay.run", "--model", self.models, "--out", self.data,
              "--preset", c.net, "--seed", str(self.seed), "--gpus", str(c.gpus),
              "--workers", str(c.selfplay_workers), "--games-per-worker", str(c.games_per_worker),
              "--full-playouts", str(c.full_playouts), "--fast-playouts", str(c.fast_playouts),
              "--full-prob", str(c.full_prob), "--threads", str(c.server_threads),
              "--sizes", self.sizes, "--time", str(int(remaining_s) + 1), "--status-every", "30",
              "--samples-per-shard", str(c.samples_per_shard),
              "--reload-interval", str(c.reload_interval)]
        tr = [py, "-m", "nets.train", "--follow", self.data, "--out", self.train_dir, "--resume",
              "--preset", c.net, "--per-size", str(c.per_size), "--lr", str(c.lr),
              "--ratio", str(c.ratio), "--window-c", str(c.window_c),
              "--checkpoint-every", str(c.checkpoint_every), "--seed", str(self.seed)]
        if c.train_threads:
            tr += ["--threads", str(c.train_threads)]
        logs = os.path.join(self.dir, "logs")
        os.makedirs(logs, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for name, cmd in (("selfplay", sp), ("train", tr)):
            out = open(os.path.join(logs, f"{name}.log"), "a")
            self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                                start_new_session=True)
            _log(f"started {name} (pid {self.procs[name].pid}), log {out.name}")

    def _stop_children(self) -> None:
        for name, p in self.procs.items():
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
                _log(f"{name} did not stop in time: killing it")
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    # ------------------------------------------------------------- evaluation
    def evaluate_new(self) -> None:
        from nets.checkpoint import latest_checkpoint
        from selfplay.arena import play_match
        from selfplay.elo import fit_ratings, load_records

        path = latest_checkpoint(self.models)
        if path is None or path in self.state["evaluated"]:
            return
        step = int(os.path.basename(path)[6:14])
        spec = f"net:{path}:{self.cfg.eval_playouts}"
        t0 = time.monotonic()
        for anchor in self.cfg.anchors:
            play_match(spec, anchor, self.cfg.eval_pairs, workers=1, seed=step, out_path=self.arena,
                       sizes=None if self.sizes == "saiblo" else _sizes(self.sizes))
        self.state["evaluated"].append(path)
        try:
            ratings = fit_ratings(load_records([self.arena]), anchor="random" if "random" in self.cfg.anchors else None,
                                  prior_games=1.0)
        except ValueError as e:
            _log(f"rating fit failed: {e}")
            return
        with open(os.path.join(self.dir, "ratings.json"), "w") as f:
            json.dump(ratings.to_dict(), f, indent=1)
        lo, hi = ratings.interval(spec)
        samples = _count_samples(self.data)
        new = not os.path.exists(os.path.join(self.dir, "elo_curve.csv"))
        with open(os.path.join(self.dir, "elo_curve.csv"), "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(["step", "samples", "wall_s", "elo", "elo_lo", "elo_hi", "checkpoint"])
            w.writerow([step, samples, round(self.state["elapsed"] + self._run_time(), 1),
                        round(ratings.elo[spec], 1), round(lo, 1), round(hi, 1), path])
        _log(f"evaluated step {step} in {time.monotonic() - t0:.0f}s: Elo {ratings.elo[spec]:.0f} "
             f"[{lo:.0f}, {hi:.0f}] vs anchors {', '.join(self.cfg.anchors)}")

    def _run_time(self) -> float:
        """Seconds of the current run not yet added to state['elapsed']."""
        return 0.0 if self.t_start is None else time.monotonic() - self.t_start

    # ------------------------------------------------------------- main
    def run(self) -> dict:
        budget = self.minutes * 60 - self.state["elapsed"]
        if budget <= 0:
            _log(f"run time of {self.minutes} min already used: nothing to do")
            return self.summary()
        self.t_start = time.monotonic()
        self._save_state()
        self._start_children(budget)
        next_eval = time.monotonic() + self.cfg.eval_every_min * 60
        interrupted = False
        try:
            while self._run_time() < budget:
                time.sleep(1.0)
                for name, p in self.procs.items():
                    if p.poll() is not None and name == "train":
                        raise RuntimeError(f"the trainer exited with code {p.returncode}; see logs/train.log")
                if self.procs["selfplay"].poll() is not None and self._run_time() < budget - 5:
                    raise RuntimeError(f"self-play exited with code {self.procs['selfplay'].returncode}; "
                                       "see logs/selfplay.log")
                if time.monotonic() >= next_eval:
                    try:
                        self.evaluate_new()
                    except Exception as e:  # noqa: BLE001 - evaluation must not stop training
                        _log(f"evaluation failed: {type(e).__name__}: {e}")
                    next_eval = time.monotonic() + self.cfg.eval_every_min * 60
        except KeyboardInterrupt:
            interrupted = True
            _log("interrupted: stopping self-play and the trainer (the same command resumes)")
        finally:
            run_time = self._run_time()
            self._stop_children()
            self.state["elapsed"] += run_time
            self.t_start = None
            self._save_state()
        if not interrupted:
            try:
                self.evaluate_new()
            except Exception as e:  # noqa: BLE001
                _log(f"final evaluation failed: {type(e).__name__}: {e}")
            self._save_state()
        return self.summary()

    def summary(self) -> dict:
        from nets.checkpoint import latest_checkpoint

        return {"dir": self.dir, "preset": self.cfg.name, "elapsed_s": round(self.state["elapsed"], 1),
                "samples": _count_samples(self.data), "latest_checkpoint": latest_checkpoint(self.models),
                "evaluated": len(self.state["evaluated"])}


def _sizes(text):
    from selfplay.policy import parse_sizes

    return parse_sizes(text)


def _count_samples(data_dir: str) -> int:
    import h5py

    from selfplay.shards import list_shards

    n = 0
    for p in list_shards([data_dir]):
        try:
            with h5py.File(p, "r") as f:
                n += int(f.attrs["num_samples"])
        except (OSError, KeyError):
            pass
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.loop", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu", choices=sorted(PRESETS), help="loop preset (default cpu)")
    ap.add_argument("--dir", default="runs/loop", help="run directory (default runs/loop)")
    ap.add_argument("--minutes", type=float, default=60.0, help="total run time in minutes (default 60)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", default="saiblo", help="board sizes: 'saiblo' or e.g. 6x7")
    args = ap.parse_args(argv)
    raise_on_interrupt()
    try:
        if args.minutes <= 0:
            raise ValueError("--minutes must be > 0")
        _sizes(args.sizes)
        loop = Loop(PRESETS[args.preset], args.dir, args.minutes, args.seed, args.sizes)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        summary = loop.run()
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
