"""Averaged nets: a uniform (SWA) or exponential (EMA) weight average of checkpoints, with
the batch-norm statistics re-estimated on replay data (issue 35, item 5).

``c4fast average MODELS --last K | --ema DECAY --data SHARDS --out FILE.pt`` writes an ordinary
inference checkpoint (``nets.checkpoint``), loadable wherever one is (``net:`` specs, the server,
the Saiblo export). The trainer's ``TrainConfig.average`` serves the same average during a run
(:class:`RunningAverage`).

Conventions:

- Sources are ordered oldest to newest (by step). Their weights: uniform ``1/K``, or with decay
  d the newest has weight 1 and each older one d times the next, normalised (``w_i ∝ d^(K-1-i)``
  for i = 0 (oldest) .. K-1 (newest): the bias-corrected EMA of the checkpoint sequence, one decay
  per checkpoint; d = 1 is uniform).
- Floating tensors (parameters, running means and variances) are averaged in float64 and stored
  in their own dtype; integer buffers (batch norm's ``num_batches_tracked``) are the newest's.
- Batch-norm re-estimation (:func:`reestimate_bn`): every BatchNorm's running statistics are
  reset and, with ``momentum=None`` (torch's cumulative average, as
  ``torch.optim.swa_utils.update_bn`` does), become the equal-weight average over the batches
  of each batch's per-channel mean and unbiased variance of the layer's input; the net runs in
  train mode under ``no_grad``. The batches (:func:`bn_batches`) are ``batches`` per board size of
  the replay window, ``batch_size`` samples each, drawn uniformly with random flips by their own
  RNG (one size per batch, as the trainer's per-size passes and the inference servers see them).
- All sources must share one ``NetConfig`` (a :class:`~nets.checkpoint.CheckpointError` names
  the file and the difference otherwise).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections import deque
from dataclasses import field
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from c4fast.cli import ConfigError, add_config_arguments, config_from_args, config_to_dict, opt
from c4fast.runtime import raise_on_interrupt, setup_logging
from nets.checkpoint import CheckpointError, checkpoint_step, list_checkpoints, load_checkpoint, save_checkpoint
from nets.config import NetConfig
from nets.model import Net
from nets.replay import ReplayWindow, WindowConfig
from nets.shards import ShardError, list_shards

log = logging.getLogger("nets.averaging")

METHODS = ("swa", "ema")

__all__ = ["METHODS", "AverageConfig", "RunningAverage", "average_checkpoints", "average_state_dicts",
           "average_weights", "bn_batches", "load_sources", "reestimate_bn", "summarize"]


def average_weights(n: int, decay: float | None = None) -> np.ndarray:
    """The n sources' weights, oldest first, summing to 1: uniform (decay None), else
    ``d^(n-1-i)`` normalised (the newest weighs most)."""
    if n < 1:
        raise ValueError("averaging needs at least one checkpoint")
    if decay is None:
        return np.full(n, 1.0 / n)
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"the EMA decay must be in (0, 1], got {decay}")
    w = decay ** np.arange(n - 1, -1, -1, dtype=np.float64)
    return w / w.sum()


def _check_same_tensors(states: Sequence[dict]) -> None:
    ref = states[0]
    for i, s in enumerate(states[1:], 1):
        if set(s) != set(ref):
            raise ValueError(f"state dict {i} has other tensors than the first: "
                             f"{sorted(set(s) ^ set(ref))[:8]}")
        for k, v in ref.items():
            if s[k].shape != v.shape or s[k].dtype != v.dtype:
                raise ValueError(f"state dict {i}: {k!r} is {tuple(s[k].shape)} {s[k].dtype}, "
                                 f"the first has {tuple(v.shape)} {v.dtype}")


def average_state_dicts(states: Sequence[dict], weights: Sequence[float]) -> dict:
    """``sum_i weights[i] * states[i]`` per floating tensor (float64 accumulation, stored in the
    tensor's dtype, on the CPU); integer tensors are the last state's. `states` oldest first."""
    if len(states) != len(weights) or not states:
        raise ValueError(f"{len(states)} state dicts for {len(weights)} weights")
    _check_same_tensors(states)
    out = {}
    for k, last in states[-1].items():
        if last.is_floating_point():
            acc = torch.zeros(last.shape, dtype=torch.float64)
            for s, w in zip(states, weights):
                acc += float(w) * s[k].detach().to("cpu", torch.float64)
            out[k] = acc.to(last.dtype)
        else:
            out[k] = last.detach().to("cpu").clone()
    return out


def reestimate_bn(model: torch.nn.Module, batches: Iterable[torch.Tensor]) -> int:
    """Reset and re-estimate every BatchNorm's running statistics of `model` from `batches`
    (input planes, on the model's device) with momentum None (module docstring); returns the
    number of batches. The model's mode and the layers' momenta are restored. ValueError if
    there are no batches (the statistics would stay at their reset values, mean 0, variance 1)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    was_training = model.training
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    n = 0
    try:
        model.train()
        with torch.no_grad():
            for x in batches:
                model(x)
                n += 1
    finally:
        for m, mom in zip(norms, momenta):
            m.momentum = mom
        model.train(was_training)
    if n == 0:
        raise ValueError("batch-norm re-estimation got no batches (an empty replay window?)")
    return n


def bn_batches(window: ReplayWindow, rng: np.random.Generator, batches: int, batch_size: int,
               device="cpu") -> Iterator[torch.Tensor]:
    """`batches` float32 plane batches (B, C, H, W) of `batch_size` samples per board size of
    `window` (sizes in order), drawn with :meth:`ReplayWindow.sample` (uniform, random flips)."""
    for size in window.sizes:
        for _ in range(batches):
            yield torch.from_numpy(window.sample(rng, size, batch_size).planes).to(device)


def load_sources(paths: Sequence[str]) -> tuple[NetConfig, list[dict], list[dict]]:
    """Load checkpoints with :func:`nets.checkpoint.load_checkpoint` (its checks); returns
    (config, state dicts, metas), ordered by (step, path). CheckpointError if there are none or
    their configs differ (naming the file and the fields)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    loaded = []
    for p in paths:
        model, config, meta = load_checkpoint(p)
        loaded.append((int(meta.get("step", 0)), os.fspath(p), config, model.state_dict(), meta))
    loaded.sort(key=lambda t: (t[0], t[1]))
    config = loaded[-1][2]
    for _, p, c, _, _ in loaded:
        diff = config.diff(c)
        if diff:
            desc = "; ".join(f"{k}: {b!r} where {loaded[-1][1]!r} has {a!r}" for k, (a, b) in diff.items())
            raise CheckpointError(f"cannot average checkpoints of different nets: {p!r} has {desc}")
    return config, [t[3] for t in loaded], [t[4] for t in loaded]


def average_checkpoints(paths: Sequence[str], out: str, decay: float | None = None,
                        data: Sequence[str] = (), bn_batches_per_size: int = 4, batch_size: int = 64,
                        seed: int = 0, window: WindowConfig = WindowConfig(), device: str = "cpu") -> dict:
    """Average the checkpoints `paths` (uniform, or EMA with `decay`), re-estimate the batch-norm
    statistics on the replay window of the shards `data` (skipped when `bn_batches_per_size` is
    0: the averaged running statistics stay), write the result atomically to `out` (step: the
    newest source's) and return its metadata (also stored as the checkpoint's
    ``extra["average"]``)."""
    config, states, metas = load_sources(paths)
    weights = average_weights(len(states), decay)
    avg = average_state_dicts(states, weights)
    model = Net(config)
    model.load_state_dict(avg, strict=True)
    model.to(device)
    bn = {"batches": 0, "batch_size": batch_size, "seed": seed, "data": [os.path.abspath(d) for d in data]}
    if bn_batches_per_size > 0:
        if not data:
            raise ValueError("batch-norm re-estimation needs shard data (or 0 batches to keep the averaged "
                             "running statistics)")
        win = ReplayWindow(window)
        win.update(list_shards(list(data)))
        if not win.sizes:
            raise ValueError("no samples in " + ", ".join(map(str, data)))
        bn["batches"] = reestimate_bn(model, bn_batches(win, np.random.default_rng(seed), bn_batches_per_size,
                                                        batch_size, device))
        bn["window_samples"] = win.window_samples
        bn["sizes"] = [f"{h}x{w}" for h, w in win.sizes]
    model.eval()
    info = {"method": "swa" if decay is None else "ema", "decay": decay,
            "sources": [{"path": os.path.abspath(m["path"]), "step": int(m.get("step", 0)), "weight": float(w)}
                        for m, w in zip(metas, weights)],
            "bn": bn}
    newest = metas[-1].get("extra")
    extra = dict(newest) if isinstance(newest, dict) else {}
    if "average" in extra:
        log.warning("the newest source %s is itself an averaged net", metas[-1]["path"])
    extra["average"] = info
    save_checkpoint(out, model.to("cpu"), config, int(metas[-1].get("step", 0)), extra=extra)
    return info


def summarize(info: dict, newest: int = 4) -> dict:
    """The record ``c4fast average`` prints: `info` (:func:`average_checkpoints`) with its list of
    sources compressed to their ``count``, the ``steps`` of the oldest and the newest, the
    effective number of sources ``1 / sum(w^2)`` and the ``newest`` entries (path, step, weight;
    at most `newest`). The checkpoint's ``extra["average"]`` keeps the full list."""
    src = info["sources"]
    w = np.array([s["weight"] for s in src], dtype=np.float64)
    out = {k: v for k, v in info.items() if k != "sources"}
    out["sources"] = {"count": len(src), "steps": [src[0]["step"], src[-1]["step"]] if src else [],
                      "effective": float(1.0 / np.square(w).sum()) if len(w) else 0.0,
                      "newest": src[-newest:] if newest > 0 else []}
    return out


class RunningAverage:
    """The trainer's average of the checkpoints it commits, one :meth:`add` per checkpoint
    (a state dict). ``swa``: uniform over the newest `last`; ``ema``: the weights of
    :func:`average_weights` over every checkpoint added, kept as the decayed sums
    ``S <- d S + theta`` and ``Z <- d Z + 1`` in float64 (the average is S / Z).
    :meth:`preview` is the average with one more, uncommitted state. :meth:`state_dict` /
    :meth:`load_state_dict` carry it through the training state."""

    def __init__(self, method: str, last: int = 4, decay: float = 0.75):
        if method not in METHODS:
            raise ValueError(f"average method must be one of {METHODS}, got {method!r}")
        if last < 1 or not 0.0 < decay <= 1.0:
            raise ValueError(f"bad average window {last} or decay {decay}")
        self.method, self.last, self.decay = method, int(last), float(decay)
        self.step = -1  # the newest committed checkpoint's trainer step (-1: none yet)
        self.kept: deque = deque(maxlen=self.last)  # swa: the newest states, oldest first
        self.sums: dict | None = None  # ema: S (float tensors in float64; integer ones: the newest)
        self.norm = 0.0  # ema: Z
        self.added = 0  # checkpoints committed
        self.steps: list[int] = []  # the trainer steps of the checkpoints in the average, oldest first

    @property
    def count(self) -> int:
        """Checkpoints in the average (ema: every one added)."""
        return len(self.kept) if self.method == "swa" else self.added

    def _ema_with(self, state: dict) -> tuple[dict, float]:
        if self.sums is None:
            return {k: (v.to(torch.float64) if v.is_floating_point() else v.clone()) for k, v in state.items()}, 1.0
        if set(self.sums) != set(state) or any(self.sums[k].shape != v.shape for k, v in state.items()):
            raise ValueError("the state does not fit the running average's tensors")
        d = self.decay
        return ({k: (d * self.sums[k] + v.to(torch.float64) if v.is_floating_point() else v.clone())
                 for k, v in state.items()}, d * self.norm + 1.0)

    def add(self, state: dict, step: int) -> None:
        """Commit `state`, the trainer's weights at `step`."""
        state = {k: v.detach().to("cpu").clone() for k, v in state.items()}
        if self.method == "swa":
            self.kept.append(state)
        else:
            self.sums, self.norm = self._ema_with(state)
        self.added += 1
        self.step = int(step)
        self.steps = self.steps_with(self.step)

    def steps_with(self, step: int | None = None) -> list[int]:
        """The steps of the checkpoints in :meth:`preview`'s average (with `step` uncommitted)."""
        if step is None:
            return list(self.steps)
        return (self.steps + [step])[-self.last:] if self.method == "swa" else self.steps + [step]

    def preview(self, state: dict | None = None) -> dict:
        """The average, with `state` included (uncommitted) if given; floating tensors in
        `state`'s dtypes (float32 without one)."""
        state = None if state is None else {k: v.detach().to("cpu") for k, v in state.items()}
        if self.method == "swa":
            states = list(self.kept) + ([state] if state is not None else [])
            states = states[-self.last:]
            if not states:
                raise ValueError("no checkpoint in the average yet")
            return average_state_dicts(states, average_weights(len(states)))
        sums, norm = (self.sums, self.norm) if state is None else self._ema_with(state)
        if sums is None:
            raise ValueError("no checkpoint in the average yet")
        return {k: ((v / norm).to(torch.float32 if state is None else state[k].dtype)
                    if v.is_floating_point() else v.clone()) for k, v in sums.items()}

    def info(self) -> dict:
        return {"method": self.method, "last": self.last, "decay": self.decay}

    def state_dict(self) -> dict:
        """Plain containers and tensors (``torch.load(weights_only=True)`` reads them)."""
        return {**self.info(), "step": self.step, "added": self.added, "steps": list(self.steps),
                "kept": list(self.kept), "sums": self.sums, "norm": self.norm}

    def load_state_dict(self, d: dict) -> bool:
        """Restore from :meth:`state_dict`; returns False (and stays empty) when `d` was written
        with another method, window or decay."""
        if {k: d.get(k) for k in ("method", "last", "decay")} != self.info():
            return False
        self.step, self.added, self.steps = int(d["step"]), int(d["added"]), [int(s) for s in d["steps"]]
        self.kept = deque(d["kept"], maxlen=self.last)
        self.sums, self.norm = d["sums"], float(d["norm"])
        return True


# ------------------------------------------------------------------ command line
@dataclasses.dataclass(frozen=True)
class AverageConfig:
    """``c4fast average``: which checkpoints, how, and the batch-norm re-estimation."""

    last: int = field(default=0, metadata=opt(
        "average the newest K checkpoints (uniform, SWA, unless --ema; 0: all of them)"))
    ema: float = field(default=0.0, metadata=opt(
        "exponential average instead: the newest checkpoint weighs 1, each older one DECAY times the next, "
        "normalised (0: uniform)"))
    data: tuple[str, ...] = field(default=(), metadata=opt(
        "shard files or directories (comma-separated) whose replay window re-estimates the batch-norm "
        "statistics, e.g. RUN/data"))
    out: str = field(default="", metadata=opt("the averaged checkpoint to write (FILE.pt)"))
    bn_batches: int = field(default=8, metadata=opt(
        "batches per board size for the batch-norm re-estimation (0: keep the averaged running statistics)"))
    bn_batch_size: int = field(default=64, metadata=opt("samples per re-estimation batch"))
    seed: int = field(default=0, metadata=opt("seed of the re-estimation samples"))
    threads: int = field(default=0, metadata=opt("torch CPU threads (0: torch's default)"))
    window: WindowConfig = field(default=WindowConfig(), metadata=opt("replay window of --data"))

    def __post_init__(self):
        for f in ("last", "bn_batches", "threads"):
            if getattr(self, f) < 0:
                raise ValueError(f"--{f.replace('_', '-')} must be >= 0")
        if self.bn_batch_size < 1:
            raise ValueError("--bn-batch-size must be >= 1")
        if not 0.0 <= self.ema <= 1.0:
            raise ValueError(f"--ema must be in (0, 1] (0: uniform), got {self.ema}")

    def to_dict(self) -> dict:
        return config_to_dict(self)


def resolve_models(paths: Sequence[str]) -> list[str]:
    """Checkpoint files named by `paths`: files as given, a directory's ``model_*.pt`` files, or
    those of RUN/train/models (a loop's run directory) or RUN/models (a trainer's), oldest first."""
    found = []
    for p in paths:
        if os.path.isfile(p):
            found.append(p)
            continue
        for d in (p, os.path.join(p, "train", "models"), os.path.join(p, "models")):
            ckpts = list_checkpoints(d)
            if ckpts:
                found += ckpts
                break
        else:
            raise CheckpointError(f"{p!r} is not a checkpoint file and holds no model_*.pt "
                                  "(nor train/models/ or models/)")
    return found


def _step_of(path: str) -> tuple[int, str]:
    step = checkpoint_step(path)
    return (load_checkpoint(path)[2].get("step", 0) if step is None else step), path


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="c4fast average", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="checkpoint files, a models directory, or a run directory")
    add_config_arguments(ap, AverageConfig)
    return ap


def main(argv=None) -> int:
    setup_logging()
    args = build_parser().parse_args(argv)
    raise_on_interrupt()
    try:
        cfg = config_from_args(AverageConfig, args)
        if not cfg.out:
            raise ConfigError("give --out FILE.pt")
        if not cfg.last and not cfg.ema:
            raise ConfigError("give --last K (uniform over the newest K) and/or --ema DECAY")
        if cfg.bn_batches and not cfg.data:
            raise ConfigError("give --data RUN/data (shards for the batch-norm re-estimation), "
                              "or --bn-batches 0 to keep the averaged running statistics")
    except ConfigError as e:
        log.error("%s", e)
        return 2
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        paths = resolve_models(args.models)
        paths = sorted(paths, key=_step_of)
        if cfg.last:
            paths = paths[-cfg.last:]
        info = average_checkpoints(paths, cfg.out, decay=cfg.ema or None, data=cfg.data,
                                   bn_batches_per_size=cfg.bn_batches, batch_size=cfg.bn_batch_size,
                                   seed=cfg.seed, window=cfg.window)
    except (CheckpointError, ShardError, ValueError) as e:
        log.error("%s", e)
        return 2
    print(json.dumps({"out": os.path.abspath(cfg.out), "config": cfg.to_dict(), **summarize(info)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
