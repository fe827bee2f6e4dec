"""`python -m nets.train PATHS...`: train the network on self-play shards.

Each step draws ``per_size`` samples from every board size in the replay window,
runs forward/backward per size and accumulates the gradients (one optimizer step per
training step), with random horizontal flips. Loss (per sample, averaged over the
step): ``value_weight * CE(wdl) + policy_weight * softCE(policy over legal cells)``
(+ ``moves_left_weight * Huber(moves left)`` for a net with the moves-left head,
+ ``ownership_weight * CE(final board)`` with the training-only ownership head), plus L2
as SGD weight decay. SGD with momentum; learning rate 1/3 for the first 5 % of
``--steps``, full until 72 %, then 1/10. Without ``--steps`` (follow mode): 1/3 for
``--warmup-steps``, then full.

Every ``--checkpoint-every`` steps it writes, atomically, the training state
(``OUT/train_state.pt``: weights, optimizer, RNG states, step) and the inference
checkpoint ``OUT/models/model_XXXXXXXX.pt`` that ``selfplay.generation.run --model OUT/models``
follows. ``--resume`` continues from the training state so that a resumed run and an
uninterrupted one give identical weights on the CPU (same data).

``--average swa|ema`` (off by default) makes every inference checkpoint a weight average of
the trainer's checkpoints with batch norm re-estimated on the window (``nets.averaging``); the
training state keeps the raw weights and the average's state, so a resume continues it.

``--follow DIR`` keeps training as new shards appear in DIR, holding the number of
training samples at ``--ratio`` times the number of self-play samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
from dataclasses import field
import sys
import time

import numpy as np
from typing import ClassVar

import torch
import torch.nn.functional as F

from c4fast.board import RULES
from c4fast.cli import ConfigError, add_config_arguments, config_from_args, config_to_dict, flatten, load_config, opt
from c4fast.evaluators import column_plane
from c4fast.runtime import (DirLock, LockedError, atomic_write, atomic_write_json, check_interrupt,
                            forget_handled_interrupt, raise_on_interrupt, remove_stale_temps, setup_logging)
from nets.averaging import RunningAverage, bn_batches, reestimate_bn
from nets.checkpoint import checkpoint_name, save_checkpoint
from nets.config import NetConfig, get_preset
from nets.canvas import CanvasNet, canvas_batch
from nets.model import OwnershipHead, build_model
from nets.precision import PrecisionUnavailable
from nets.replay import Batch, ReplayWindow, WindowConfig
from nets.shards import ShardError, list_shards

log = logging.getLogger("nets.train")

STATE_FORMAT = "c4fast-train-state"
#: follow mode, a compiled padded step: seconds from the first data to the first step at most
#: while some of the run's sizes have no samples yet (TrainRunConfig.sizes)
SIZES_WAIT_S = 120.0
BENCH_CUDA_PER_SIZE = 128  # --bench on CUDA: samples per size per step (16 sizes: 2048 a step)
#: Huber threshold of the moves-left loss, in the head's unit (plies / (H * W)): quadratic
#: within a quarter of the board's cells, linear beyond
MOVES_LEFT_HUBER_DELTA = 0.25
#: the ownership head's classes per cell at the game's end (nets.model.OwnershipHead)
OWNERSHIP_CLASSES = ("the side to move's stone", "the opponent's stone", "empty")


class NonFiniteLossError(RuntimeError):
    """A training step produced a NaN or infinite loss (nothing is updated or saved)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Trainer settings (defaults from katac4 where it has them)."""

    #: switches of ablations that were not kept (docs/ABLATIONS.md; last present in commit
    #: 0f5c532, fast_value_weight in d16e224) with their off values: a config file that has
    #: them off still loads
    RETIRED_FIELDS: ClassVar[dict] = {"opp_policy_weight": 0.0, "surprise_weight": 0.0, "drop_planes": "",
                                      "follow_anneal": 0.0, "fast_value_weight": 1.0}

    preset: str = field(default="cpu_small", metadata=opt("network preset"))
    steps: int = field(default=0, metadata=opt("training steps: schedule horizon and stop (0: none; "
                                               "follow mode runs on)"))
    per_size: int = field(default=16, metadata=opt("samples per board size per step"))
    lr: float = field(default=0.02, metadata=opt("peak learning rate"))
    momentum: float = field(default=0.9, metadata=opt("SGD momentum"))
    l2: float = field(default=3e-5, metadata=opt("L2 weight decay"))
    value_weight: float = field(default=1.5, metadata=opt("weight of the value loss"))
    value_mix: float = field(default=0.0, metadata=opt(
        "share of the search's root (win, draw, loss) in the value target, the rest being the game's "
        "outcome (0: outcome only)"))
    value_distance: float = field(default=0.0, metadata=opt(
        "distance in the value target: a won or lost outcome moves the share d * plies left / cells of its "
        "mass to a draw (d this value, cells the board's H * W), so a nearer win and a farther loss are worth "
        "more (0: the outcome only)"))
    moves_left_weight: float = field(default=0.0, metadata=opt(
        "weight of the moves-left loss (Huber on plies left / cells; > 0 needs a net preset with the "
        "moves-left head, e.g. cpu_small_ml; 0: no moves-left loss)"))
    ownership_weight: float = field(default=0.0, metadata=opt(
        "weight of KataGo's ownership target: a training-only head on the trunk learns what each cell holds when "
        "the sample's game ends (the side to move's stone, the opponent's, empty; cross-entropy averaged over the "
        "board's cells; 0: no head)"))
    warmup_fraction: float = field(default=0.05, metadata=opt("share of --steps at lr/3"))
    anneal_fraction: float = field(default=0.72, metadata=opt("share of --steps before lr/10"))
    warmup_steps: int = field(default=200, metadata=opt("warm-up steps at lr/3 when --steps is 0"))
    checkpoint_every: int = field(default=500, metadata=opt("steps between checkpoints"))
    ratio: float = field(default=4.0, metadata=opt("follow mode: trained samples per self-play sample"))
    seed: int = field(default=0, metadata=opt("seed of the net and the sampling"))
    device: str = field(default="auto", metadata=opt("torch device: auto (cuda if available), cpu, cuda[:N]"))
    padded: bool = field(default=False, metadata=opt(
        "one padded canvas batch of all sizes per step (masked, nets.canvas; as large as the window's largest "
        "board) instead of one pass per size: the same maths (batch-norm statistics per size), one pass"))
    compile: bool = field(default=False, metadata=opt(
        "with --padded: torch.compile the canvas net's forward and backward (2.3x the padded step's samples/s "
        "at 256 per size on an H200; there static shapes, one compile per batch layout, so a follower compiles "
        "its run's layout before the data comes: TrainRunConfig.sizes; on the CPU dynamic shapes from the start)"))
    precision: str = field(default="auto", metadata=opt(
        "forward/backward precision (fp32 master weights either way): auto (bf16 autocast on CUDA and on CPUs "
        "with AVX512-BF16/AMX, where it trains 1.5x the samples/s and learns as fp32 does; else fp32), fp32, "
        "or bf16 (autocast; on the CPU only with AVX512-BF16/AMX, channels_last)"))
    window: WindowConfig = field(default=WindowConfig(), metadata=opt("replay window"))
    average: str = field(default="none", metadata=opt(
        "serve a weight average instead of the raw weights in every inference checkpoint (the training state "
        "keeps the raw ones): none, swa (uniform over the newest --average-last checkpoints) or ema (decay "
        "--average-decay per checkpoint); batch norm re-estimated on the window (nets.averaging)"))
    average_last: int = field(default=4, metadata=opt("swa: checkpoints in the served average"))
    average_decay: float = field(default=0.75, metadata=opt(
        "ema: each older checkpoint's weight is DECAY times the next one's (normalised)"))
    average_bn_batches: int = field(default=4, metadata=opt(
        "batches of --per-size samples per board size that re-estimate the served average's batch norm"))

    def __post_init__(self):
        get_preset(self.preset)
        if self.average not in ("none", "swa", "ema"):
            raise ValueError(f"--average must be none, swa or ema, got {self.average!r}")
        if self.average_last < 1 or self.average_bn_batches < 1:
            raise ValueError("--average-last and --average-bn-batches must be >= 1")
        if not 0.0 < self.average_decay <= 1.0:
            raise ValueError(f"--average-decay must be in (0, 1], got {self.average_decay}")
        if not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            raise ValueError(f"--device must be auto, cpu or cuda[:N], got {self.device!r}")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"--device {self.device}: CUDA is not available on this machine")
        for f in ("steps", "warmup_steps"):
            if getattr(self, f) < 0:
                raise ValueError(f"TrainConfig.{f} must be >= 0")
        for f in ("per_size", "checkpoint_every"):
            if getattr(self, f) < 1:
                raise ValueError(f"TrainConfig.{f} must be >= 1")
        for f in ("lr", "ratio"):
            if not getattr(self, f) > 0:
                raise ValueError(f"TrainConfig.{f} must be > 0")
        if not 0.0 <= self.value_mix <= 1.0:
            raise ValueError(f"TrainConfig.value_mix must be in [0, 1], got {self.value_mix}")
        if not (isinstance(self.value_distance, (int, float)) and 0.0 <= self.value_distance <= 1.0):
            raise ValueError(f"TrainConfig.value_distance must be in [0, 1], got {self.value_distance!r}")
        if self.compile and not self.padded:
            raise ValueError("--train.compile compiles the padded canvas step: it needs --train.padded")
        if not (isinstance(self.moves_left_weight, (int, float)) and math.isfinite(self.moves_left_weight)
                and self.moves_left_weight >= 0):
            raise ValueError(f"TrainConfig.moves_left_weight must be a finite number >= 0, got {self.moves_left_weight!r}")
        if not (isinstance(self.ownership_weight, (int, float)) and not isinstance(self.ownership_weight, bool)
                and math.isfinite(self.ownership_weight) and self.ownership_weight >= 0):
            raise ValueError(f"TrainConfig.ownership_weight must be a finite number >= 0, got {self.ownership_weight!r}")

    def check_net(self, net: NetConfig) -> None:
        """ValueError unless `net` fits these settings: a moves-left loss needs the head.
        (Checked by the Trainer, not here: a loop sets ``preset`` from its own ``--net``.)"""
        if self.moves_left_weight > 0 and not net.moves_left:
            raise ValueError(f"TrainConfig.moves_left_weight {self.moves_left_weight} needs a net with the moves-left "
                             f"head, and preset {net.name!r} has none (NetConfig.moves_left; e.g. cpu_small_ml)")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"--precision must be auto, fp32 or bf16, got {self.precision!r}")

    def lr_at(self, step: int) -> float:
        """The learning rate of step `step`. With ``--steps``: lr/3, lr, lr/10 at the
        fractions of the steps. Without: lr/3 for ``warmup_steps``, then lr."""
        if self.steps > 0:
            x = step / self.steps
            if x < self.warmup_fraction:
                return self.lr / 3
            return self.lr if x < self.anneal_fraction else self.lr / 10
        if step < self.warmup_steps:
            return self.lr / 3
        return self.lr

    def to_dict(self) -> dict:
        return config_to_dict(self)

    def resolved_precision(self) -> str:
        """fp32 or bf16 for the resolved device (PrecisionUnavailable for bf16 on a CPU
        without bf16 instructions)."""
        device = self.resolved_device()
        if self.precision == "auto":  # bf16 where it pays: CUDA, and CPUs with bf16 units (1.5x, docs/PERFORMANCE.md)
            if device.startswith("cuda"):
                return "bf16"
            from nets.precision import cpu_info

            return "bf16" if cpu_info().has("bf16") else "fp32"
        if self.precision == "bf16" and device == "cpu":
            from nets.precision import cpu_info

            cpu_info().require("bf16")
        return self.precision

    def resolved_device(self) -> str:
        """The device to use: ``auto`` is ``cuda`` when CUDA is available, else ``cpu``."""
        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device


@dataclasses.dataclass(frozen=True)
class TrainRunConfig:
    """One ``nets.train`` invocation: where it writes, what it follows, when it stops,
    and the trainer settings (:class:`TrainConfig`, recorded in the training state)."""

    #: the planned run length of the retired follow-mode lr schedule (TrainConfig.RETIRED_FIELDS)
    RETIRED_FIELDS: ClassVar[dict] = {"run_seconds": 0.0, "run_elapsed": 0.0}

    out: str = field(default="runs/train", metadata=opt("output directory (train_state.pt, models/, tb/)"))
    follow: str | None = field(default=None, metadata=opt("directory to watch for new shards"))
    resume: bool = field(default=False, metadata=opt("continue from OUT/train_state.pt"))
    stop_after: int = field(default=0, metadata=opt("end this run after N steps (0: no limit)"))
    max_wait: float = field(default=0.0, metadata=opt("follow mode: stop after waiting this many "
                                                     "seconds for data (0: never)"))
    sizes: str = field(default="", metadata=opt(
        "follow mode: the board sizes the followed self-play plays ('saiblo' or a list like 9x9,12x12; the loop "
        "sets it; empty: unknown). A compiled padded trainer compiles its step for them while it waits for data; "
        "with static shapes (CUDA: one compile per batch layout) it takes its first step once each has samples "
        "(at most SIZES_WAIT_S later), so one layout, one compile"))
    threads: int = field(default=0, metadata=opt("torch CPU threads (0: torch's default)"))
    poll: float = field(default=5.0, metadata=opt("seconds between scans for new shards"))
    log_every: int = field(default=20, metadata=opt("steps between metric logs"))
    status_file: str | None = field(default=None, metadata=opt(
        "write step and samples/s as JSON to this file at each metric log (atomically)"))
    train: TrainConfig = field(default=TrainConfig(), metadata=flatten("trainer settings"))

    def __post_init__(self):
        for f in ("stop_after", "threads"):
            if getattr(self, f) < 0:
                raise ValueError(f"--{f.replace('_', '-')} must be >= 0")
        if not (math.isfinite(self.max_wait) and self.max_wait >= 0):
            raise ValueError("--max-wait must be a finite number >= 0")
        if not (math.isfinite(self.poll) and self.poll > 0) or self.log_every < 1:
            raise ValueError("--poll must be > 0 and --log-every >= 1")
        if self.sizes:
            RULES.parse_sizes(self.sizes)  # ValueError naming the bad size

    def size_list(self) -> tuple[tuple[int, int], ...]:
        """The followed self-play's board sizes (empty: unknown)."""
        return tuple(RULES.parse_sizes(self.sizes)) if self.sizes else ()


def to_device(a: np.ndarray, device) -> torch.Tensor:
    """numpy -> tensor on `device`; on CUDA through pinned memory with a non-blocking copy
    (no host synchronisation)."""
    t = torch.from_numpy(a)
    device = torch.device(device)
    if device.type != "cuda":
        return t
    return t.pin_memory().to(device, non_blocking=True)


def losses(model, batch: Batch, device, value_weight: float, value_mix: float = 0.0, channels_last: bool = False,
           mask=None, moves_left_weight: float = 0.0, value_distance: float = 0.0, groups: int = 1,
           own_head=None, ownership_weight: float = 0.0):
    """Summed (not averaged) total loss, policy soft CE, value CE, policy entropy,
    moves-left loss and ownership loss of one batch (0-dim tensors on `device`; nothing here
    waits for the device).

    The value target is the game's outcome (win/draw/loss for the side to move) or, with
    ``value_mix`` m > 0, the distribution ``(1 - m) * onehot(outcome) + m * root_wdl``
    (the search's estimate at the sample's root, same side). With ``value_distance`` d > 0 the
    outcome's one-hot becomes, for a won or lost game, ``(1 - s) * onehot + s * draw`` with
    ``s = d * min(1, plies_left / cells)`` (cells each sample's H * W): a win nearer the end
    and a loss farther from it score higher (W - L = +-(1 - s)). With a board `mask` (a canvas
    batch, :func:`nets.canvas.canvas_batch`) `model` is a :class:`nets.canvas.CanvasNet`, its
    batch-norm statistics taken per each of `groups` equal consecutive groups (one per size).

    Moves left (a net with the head, ``NetConfig.moves_left``): ``Huber(m - plies_left /
    cells, delta=MOVES_LEFT_HUBER_DELTA)`` summed over the samples, m the net's 4th value
    output, cells each sample's H * W; added to the total times `moves_left_weight`. Without
    the head it is 0 (and `moves_left_weight` must be 0).

    Ownership (`own_head`, an :class:`nets.model.OwnershipHead` on `model`'s trunk; on a
    canvas the :class:`nets.canvas.CanvasNet` carries it and `own_head` only turns the loss
    on): each cell's cross-entropy against what it holds at the game's end
    (:data:`OWNERSHIP_CLASSES`, from ``batch.ownership``: +1, -1, 0), averaged over the
    board's H * W cells (the forbidden cell is always empty) and summed over the samples;
    added to the total times `ownership_weight`. Without the head it is 0."""
    x = to_device(batch.planes, device)
    if x.is_cuda or channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    own_logits = None
    if own_head is not None and batch.ownership is None:
        raise ValueError("the ownership head needs the batch's ownership targets (ReplayWindow(ownership=True))")
    if mask is not None:
        out = model(x, to_device(mask, device), groups)
        pol, val = out[:2]
        if own_head is not None:
            if len(out) != 3:
                raise ValueError("the canvas net carries no ownership head: build it as CanvasNet(net, own_head)")
            own_logits = out[2]
    elif own_head is not None:
        trunk = model.trunk(x)
        pol, val, own_logits = model.policy_head(trunk), model.value_head(trunk), own_head(trunk)
    else:
        pol, val = model(x)
    legal = to_device(batch.legal, device)
    target = to_device(batch.policy, device)
    w = to_device(batch.policy_weight, device)
    z = to_device(batch.outcome, device)
    logits = pol.float().flatten(1).masked_fill(~legal.flatten(1), -1e9)
    logp = F.log_softmax(logits, dim=1)
    p_ce = -(target.flatten(1) * logp).sum(1)
    policy_loss = (w * p_ce).sum()
    vlog = val[:, :3].float()  # win/draw/loss logits (a moves-left head's 4th column is not a class)
    cells = None  # each sample's cells, wherever plies_left is used (value distance, moves-left head)
    if batch.plies_left is not None and (value_distance > 0 or val.shape[1] == 4):
        if mask is None:
            cells = torch.full((len(z),), float(batch.height * batch.width), device=val.device)
        else:
            cells = to_device(mask, device).sum(dim=(1, 2, 3)).float()
    if value_mix > 0 or value_distance > 0:
        hard = F.one_hot(z, 3).float()
        if value_distance > 0:
            if batch.plies_left is None:
                raise ValueError("value_distance > 0 needs the samples' plies_left")
            left = to_device(batch.plies_left, device).float()
            shift = (value_distance * torch.clamp(left / cells, max=1.0) * (z != 1)).unsqueeze(1)
            hard = (1 - shift) * hard + shift * hard.new_tensor([0.0, 1.0, 0.0])  # to the draw
        if value_mix > 0:
            if batch.root_wdl is None:
                raise ValueError("value_mix > 0 needs the samples' root_wdl")
            hard = (1 - value_mix) * hard + value_mix * to_device(batch.root_wdl, device)
        value_loss = -(hard * F.log_softmax(vlog, dim=1)).sum()
    else:
        value_loss = F.cross_entropy(vlog, z, reduction="sum")
    with torch.no_grad():
        entropy = -(logp.exp() * logp.masked_fill(~legal.flatten(1), 0)).sum()
    total = value_weight * value_loss + policy_loss
    if val.shape[1] == 4 and (batch.plies_left is not None or moves_left_weight > 0):
        if batch.plies_left is None:
            raise ValueError("moves_left_weight > 0 needs the samples' plies_left")
        target = to_device(batch.plies_left, device).float() / cells
        ml_loss = F.huber_loss(val[:, 3].float(), target, reduction="sum", delta=MOVES_LEFT_HUBER_DELTA)
        if moves_left_weight > 0:
            total = total + moves_left_weight * ml_loss
    else:
        if moves_left_weight > 0:
            raise ValueError("moves_left_weight > 0 needs a net with the moves-left head (NetConfig.moves_left)")
        ml_loss = torch.zeros((), device=val.device)  # no head (or no targets): not part of the loss
    if own_logits is not None:
        own = to_device(batch.ownership, device)
        cls = torch.where(own > 0, 0, torch.where(own < 0, 1, 2)).long()  # OWNERSHIP_CLASSES
        ce = F.cross_entropy(own_logits.float(), cls, reduction="none")  # (B, H, W)
        if mask is None:
            own_loss = ce.flatten(1).mean(1).sum()
        else:  # the board's cells only
            on = to_device(mask, device)[:, 0]
            own_loss = ((ce * on).sum(dim=(1, 2)) / on.sum(dim=(1, 2))).sum()
        total = total + ownership_weight * own_loss
    else:
        own_loss = torch.zeros((), device=val.device)
    return total, policy_loss, value_loss, entropy, ml_loss, own_loss


class Trainer:
    def __init__(self, cfg: TrainConfig, out_dir: str):
        self.cfg = cfg
        self.out = out_dir
        self.device = torch.device(cfg.resolved_device())
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(f"device {cfg.device!r} asked for, but CUDA is not available "
                                 f"(torch {torch.__version__})")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = True
        torch.manual_seed(cfg.seed)
        self.net_config: NetConfig = get_preset(cfg.preset)
        cfg.check_net(self.net_config)
        self.model = build_model(self.net_config).to(self.device)
        self.precision = cfg.resolved_precision()
        # channels_last on every device and precision: the CPU's fp32 step too (1.09-1.22x the
        # samples/s of the contiguous layout on the AVX2 Zen 3, docs/PERFORMANCE.md), same maths
        self.channels_last = True
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.l2)
        self.own_head = self.own_opt = None  # the training-only ownership head (TrainConfig.ownership_weight)
        if cfg.ownership_weight > 0:
            self.own_head = OwnershipHead(self.net_config.channels, self.net_config.policy_channels).to(self.device)
            if self.channels_last:
                self.own_head = self.own_head.to(memory_format=torch.channels_last)
            self.own_opt = torch.optim.SGD(self.own_head.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                                           weight_decay=cfg.l2)
        # the same weights (and ownership head) on the masked canvas (TrainConfig.padded)
        self.canvas = CanvasNet(self.model, self.own_head)
        # On the CPU dynamic shapes from the first compile: one or two cold compiles (~1.5 min each on 2
        # cores) for the run instead of one for each new batch size and canvas until automatic dynamic
        # shapes take over (a 12-minute loop's first step came after 1.7 instead of 2.8 minutes). On CUDA
        # static shapes (automatic dynamic: a second layout compiles once more as dynamic, a third change of
        # a dimension once again); a follower compiles its run's one layout in advance (warm_up, _Session).
        self.static_shapes = cfg.compile and self.device.type != "cpu"  # a new batch layout compiles again
        self.canvas_fwd = (torch.compile(self.canvas, dynamic=None if self.static_shapes else True)
                           if cfg.compile else self.canvas)
        self.rng = np.random.default_rng(cfg.seed)
        self.step = 0
        self.samples_trained = 0
        self.tb = None
        self.last_metrics: dict = {}
        self.average = (None if cfg.average == "none"
                        else RunningAverage(cfg.average, cfg.average_last, cfg.average_decay))
        self.served = None  # the net that carries the served average (built at its first save)

    # ----------------------------------------------------------- state
    @property
    def state_path(self) -> str:
        return os.path.join(self.out, "train_state.pt")

    def save(self, window: ReplayWindow | None = None) -> str:
        """Write the training state and the inference checkpoint (both atomic); refuses
        (NonFiniteLossError) to write weights that hold NaN or infinity. With
        ``TrainConfig.average`` the checkpoint is the average (:meth:`_save_average`; batch norm
        re-estimated on `window`) and the training state carries the average's state."""
        modules = [self.model] + ([self.own_head] if self.own_head is not None else [])
        for name, t in ((n, t) for m in modules for n, t in m.state_dict().items()):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise NonFiniteLossError(f"step {self.step}: {name} holds non-finite values; not saving")
        os.makedirs(os.path.join(self.out, "models"), exist_ok=True)
        if self.average is not None:
            return self._save_average(window)
        state = self._state({k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()})
        atomic_write(self.state_path, lambda f: torch.save(state, f))
        path = os.path.join(self.out, "models", checkpoint_name(self.step))
        save_checkpoint(path, self.model, self.net_config, self.step,
                        extra={"samples_trained": self.samples_trained})
        return path

    def _state(self, raw: dict) -> dict:
        return {
            "format": STATE_FORMAT,
            "config": self.cfg.to_dict(),
            "net_config": self.net_config.to_dict(),
            "step": self.step,
            "samples_trained": self.samples_trained,
            "model": raw,
            "optimizer": self.opt.state_dict(),
            "numpy_rng": json.dumps(self.rng.bit_generator.state),
            "torch_rng": torch.get_rng_state(),
            "own_head": None if self.own_head is None else {
                "model": {k: v.detach().cpu().clone() for k, v in self.own_head.state_dict().items()},
                "optimizer": self.own_opt.state_dict()},
        }

    def _save_average(self, window: ReplayWindow | None) -> str:
        """The training state (raw weights and the average's state) and the served average.
        A checkpoint at a multiple of ``checkpoint_every`` enters the average (once per step);
        one at another step (an interrupted or ended run's last) is served with the current
        weights included but not committed, so a resumed run's averages equal an uninterrupted
        run's. Batch norm: ``average_bn_batches`` batches of ``per_size`` samples per board size
        of `window`, drawn by an RNG seeded with (seed, step) (the training RNG is not touched);
        with an empty window the averaged running statistics stay."""
        avg_state = self.average
        raw = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        if self.step == avg_state.step:
            weights, steps = avg_state.preview(), avg_state.steps_with()
        elif self.step > 0 and self.step % self.cfg.checkpoint_every == 0:
            avg_state.add(raw, self.step)
            weights, steps = avg_state.preview(), avg_state.steps_with()
        else:
            weights, steps = avg_state.preview(raw), avg_state.steps_with(self.step)
        state = self._state(raw)
        state["average"] = avg_state.state_dict()
        atomic_write(self.state_path, lambda f: torch.save(state, f))
        if self.served is None:
            with torch.random.fork_rng(devices=[]):  # its init must not move the saved torch RNG
                self.served = build_model(self.net_config).to(self.device)
        self.served.load_state_dict(weights)
        bn = {"batches": 0, "batch_size": self.cfg.per_size}
        if window is not None and window.sizes:
            rng = np.random.default_rng([self.cfg.seed, self.step])
            bn["batches"] = reestimate_bn(self.served, bn_batches(window, rng, self.cfg.average_bn_batches,
                                                                  self.cfg.per_size, self.device))
        self.served.eval()
        path = os.path.join(self.out, "models", checkpoint_name(self.step))
        save_checkpoint(path, self.served, self.net_config, self.step,
                        extra={"samples_trained": self.samples_trained,
                               "average": {**avg_state.info(), "steps": steps, "bn": bn}})
        return path

    def load(self) -> None:
        """Restore from OUT/train_state.pt (raises ValueError naming the problem). States
        written before the opponent-policy head was removed (commit 0f5c532 has it) carry an
        ``opp_head`` key, None unless the head was on; it is ignored, and a state trained
        with the head or with ``drop_planes`` resumes as a plain net. The ownership head
        (``own_head``) resumes where the run has it on; a state without it starts a fresh
        head (with a warning), and a run with it off ignores a saved one."""
        try:
            state = torch.load(self.state_path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"cannot resume from {self.state_path!r}: {e}") from None
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"{self.state_path!r} is not a c4fast training state")
        if state["net_config"] != self.net_config.to_dict():
            raise ValueError(f"{self.state_path!r} was trained with preset "
                             f"{state['net_config'].get('name')!r}, not {self.cfg.preset!r}")
        self.model.load_state_dict(state["model"])
        opt_state = state["optimizer"]
        if state.get("opp_head") is not None:  # the head's parameters followed the net's: drop their slots
            n = len(list(self.model.parameters()))
            opt_state = {"state": {i: v for i, v in opt_state["state"].items() if i < n},
                         "param_groups": [{**g, "params": g["params"][:n]} for g in opt_state["param_groups"]]}
        self.opt.load_state_dict(opt_state)
        self.rng.bit_generator.state = json.loads(state["numpy_rng"])
        torch.set_rng_state(state["torch_rng"])
        self.step = int(state["step"])
        self.samples_trained = int(state["samples_trained"])
        if self.own_head is not None:
            saved = state.get("own_head")
            if saved is None:
                log.warning("%s holds no ownership head: it starts fresh at step %d", self.state_path, self.step)
            else:
                self.own_head.load_state_dict(saved["model"])
                self.own_opt.load_state_dict(saved["optimizer"])
        if self.average is not None:  # the average's state travels in the training state
            saved = state.get("average")
            if saved is None or not self.average.load_state_dict(saved):
                log.warning("%s holds no average made with --average %s (last %d, decay %s): the served "
                            "average starts again from step %d", self.state_path, self.cfg.average,
                            self.cfg.average_last, self.cfg.average_decay, self.step)

    # ----------------------------------------------------------- training
    def train_step(self, window: ReplayWindow) -> dict:
        """One optimizer step with per-board-size gradient accumulation (bf16 autocast where
        ``precision`` resolves to bf16). The loss sums stay on the device; the step reads them
        back once, at its end."""
        sizes = window.sizes
        if not sizes:
            raise ValueError("the replay window is empty")
        self.model.train()
        lr = self.cfg.lr_at(self.step)
        opts = [self.opt] + ([self.own_opt] if self.own_opt is not None else [])
        for opt_ in opts:
            for g in opt_.param_groups:
                g["lr"] = lr
            opt_.zero_grad(set_to_none=True)
        n_total = self.cfg.per_size * len(sizes)
        sums = torch.zeros(6, dtype=torch.float64, device=self.device)  # loss, policy, value, entropy, moves left, own
        mlw = self.cfg.moves_left_weight
        use_amp = self.precision == "bf16"
        if self.cfg.padded:  # one pass: every size's samples on the masked canvas (same draws, BN per size)
            sums += self._padded_pass([window.sample(self.rng, size, self.cfg.per_size) for size in sizes], n_total)
        for size in () if self.cfg.padded else sizes:
            batch = window.sample(self.rng, size, self.cfg.per_size)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=use_amp):
                loss, p, v, e, ml, own = losses(self.model, batch, self.device, self.cfg.value_weight,
                                                self.cfg.value_mix, self.channels_last,
                                                moves_left_weight=mlw, value_distance=self.cfg.value_distance,
                                                own_head=self.own_head, ownership_weight=self.cfg.ownership_weight)
            (loss / n_total).backward()
            sums += torch.stack([loss.detach(), p.detach(), v.detach(), e, ml.detach(), own.detach()]).double()
        tot, pol, val, ent, mll, own_l = sums.tolist()  # the step's only host synchronisation
        if not math.isfinite(tot):  # before the step: the weights stay as they were
            raise NonFiniteLossError(f"step {self.step}: the loss is {tot / n_total} (value {val / n_total}, "
                                     f"policy {pol / n_total}); the data or the learning rate is bad; "
                                     "nothing was updated or saved")
        for opt_ in opts:
            opt_.step()
        self.step += 1
        self.samples_trained += n_total
        out = {"loss": tot / n_total, "policy_loss": pol / n_total, "value_loss": val / n_total,
               "policy_entropy": ent / n_total, "lr": lr, "sizes": len(sizes)}
        if self.net_config.moves_left:  # Huber loss per sample, in plies / cells (MOVES_LEFT_HUBER_DELTA)
            out["moves_left_loss"] = mll / n_total
        if self.own_head is not None:  # cross-entropy per cell, averaged over the board
            out["ownership_loss"] = own_l / n_total
        return out

    def _padded_pass(self, batches: list[Batch], n_total: int) -> torch.Tensor:
        """Forward and backward of one canvas batch of `batches` (one per board size, each a
        batch-norm group; the canvas as large as their largest board, no larger); gradients
        accumulate scaled by 1 / `n_total`. Returns the summed (loss, policy, value, entropy,
        moves left, ownership) on the device, float64."""
        batch, mask = canvas_batch(batches, side=None)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            loss, p, v, e, ml, own = losses(self.canvas_fwd, batch, self.device, self.cfg.value_weight,
                                            self.cfg.value_mix, self.channels_last, mask,
                                            self.cfg.moves_left_weight, self.cfg.value_distance, groups=len(batches),
                                            own_head=self.own_head, ownership_weight=self.cfg.ownership_weight)
        (loss / n_total).backward()
        return torch.stack([loss.detach(), p.detach(), v.detach(), e, ml.detach(), own.detach()]).double()

    def warm_up(self, sizes) -> float:
        """Compile the padded step (``TrainConfig.compile``) for a window of `sizes` ((H, W)
        pairs; ``per_size`` samples each) before any data exists: one forward and backward of
        synthetic positions of that layout, then the weights, batch-norm statistics and
        gradients are put back as they were (no optimizer step, no RNG draw), so a run with a
        warm-up trains exactly as one without. With static shapes (CUDA) a window of these
        sizes then compiles nothing more. Returns the seconds taken (0: nothing to compile)."""
        if not (self.cfg.padded and self.cfg.compile) or not sizes:
            return 0.0
        t0 = time.monotonic()
        n, c = self.cfg.per_size, self.net_config.in_planes
        batches = []
        for h, w in sorted(set(sizes)):
            batches.append(Batch(h, w, np.zeros((n, c, h, w), np.float32),
                                 np.full((n, h, w), 1.0 / (h * w), np.float32), np.ones(n, np.float32),
                                 np.ones(n, np.int64), np.ones((n, h, w), bool),
                                 np.tile(np.float32([0.0, 1.0, 0.0]), (n, 1)), np.ones(n, np.float32),
                                 None if self.own_head is None else np.zeros((n, h, w), np.float32)))
        modules = [self.model] + ([self.own_head] if self.own_head is not None else [])
        kept = [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in modules]
        self.model.train()
        self._padded_pass(batches, n * len(batches)).tolist()  # waits for the device: the compile is done
        with torch.no_grad():
            for m, saved in zip(modules, kept):
                for k, v in m.state_dict().items():
                    v.copy_(saved[k])  # in place: the compiled graphs keep their tensors
        for opt_ in [self.opt] + ([self.own_opt] if self.own_opt is not None else []):
            opt_.zero_grad(set_to_none=True)
        return time.monotonic() - t0

    def log(self, metrics: dict, window: ReplayWindow, samples_per_s: float) -> None:
        if self.tb is None:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(os.path.join(self.out, "tb"))
        for k in ("loss", "policy_loss", "value_loss", "policy_entropy", "lr", "moves_left_loss", "ownership_loss"):
            if k in metrics:
                self.tb.add_scalar(f"train/{k}", metrics[k], self.step)
        self.tb.add_scalar("train/samples_per_s", samples_per_s, self.step)
        self.tb.add_scalar("data/window_samples", window.window_samples, self.step)
        self.tb.add_scalar("data/total_samples", window.total_samples, self.step)
        if window.num_games:
            self.tb.add_scalar("data/game_length", window.game_length_sum / window.num_games, self.step)
        self.tb.flush()


def train(paths, run: TrainRunConfig, quiet: bool = False) -> dict:
    """Run the trainer as `run` says; returns a summary dict. See the module docstring.

    ``run.stop_after`` > 0 ends this run after that many steps (the schedule still
    follows ``run.train.steps``), e.g. to continue later with ``resume``.
    """
    os.makedirs(run.out, exist_ok=True)
    lock = DirLock(run.out, "nets.train")  # one trainer per directory (LockedError otherwise)
    remove_stale_temps(run.out)  # state/checkpoint temp files of a killed writer
    remove_stale_temps(os.path.join(run.out, "models"))
    trainer = Trainer(run.train, run.out)
    if run.resume and os.path.exists(trainer.state_path):
        trainer.load()
        log.info("resumed at step %d", trainer.step)
    session = _Session(trainer, list(paths), run, quiet)
    t0 = time.monotonic()
    start_step = trainer.step
    try:
        session.loop()
    except KeyboardInterrupt:
        log.info("interrupted at step %d: saving", trainer.step)
    finally:
        session.close()  # a NonFiniteLossError propagates: nothing is saved
    metrics = trainer.last_metrics
    final = trainer.save(session.window) if trainer.step > start_step or not os.path.exists(trainer.state_path) else None
    lock.release()
    elapsed = time.monotonic() - t0
    window = session.window
    return {"steps": trainer.step, "steps_this_run": trainer.step - start_step,
            "samples_trained": trainer.samples_trained, "seconds": round(elapsed, 2),
            "samples_per_s": round((trainer.step - start_step) * session.step_samples() / max(elapsed, 1e-9), 1),
            "window_samples": window.window_samples, "total_samples": window.total_samples,
            "sizes": [f"{h}x{w}" for h, w in window.sizes], "checkpoint": final,
            **{k: round(v, 5) for k, v in metrics.items() if isinstance(v, float)}}


class _Session:
    """The step loop of one :func:`train` call: replay window refreshes, follow-mode
    pacing, logging and periodic checkpoints."""

    def __init__(self, trainer: "Trainer", paths: list, run: TrainRunConfig, quiet: bool):
        self.trainer, self.paths, self.run, self.quiet = trainer, paths, run, quiet
        self.cfg = run.train
        self.window = ReplayWindow(self.cfg.window, ownership=self.cfg.ownership_weight > 0)
        self.sources = paths + ([run.follow] if run.follow else [])
        # the followed run's sizes, for a compiled padded step: compiled for before the data comes and,
        # with static shapes, awaited (at most SIZES_WAIT_S from the first data) before the first step
        self.expected = run.size_list() if run.follow and self.cfg.padded and self.cfg.compile else ()
        self.await_sizes = bool(self.expected) and trainer.static_shapes
        self.first_data: float | None = None
        self.refresh()
        self.bar = None
        if self.cfg.steps and not quiet and not run.follow:
            from tqdm import tqdm

            self.bar = tqdm(total=self.cfg.steps, initial=trainer.step, unit="step", dynamic_ncols=True)

    def refresh(self) -> None:
        self.window.update(list_shards(self.sources))
        self.last_refresh = time.monotonic()

    def step_samples(self) -> int:
        return self.cfg.per_size * max(1, len(self.window.sizes))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def _wait_for_data(self, now: float) -> bool:
        """Follow mode: True if the next step must wait for more self-play data."""
        if now - self.last_refresh >= self.run.poll:
            self.refresh()
        allowed = self.cfg.ratio * self.window.total_samples
        if not self.window.sizes or self.trainer.samples_trained + self.step_samples() > allowed:
            return True
        return bool(self.missing_sizes(now))

    def missing_sizes(self, now: float) -> list[tuple[int, int]]:
        """Before the first step: the expected sizes the window lacks (empty once all are
        there, or SIZES_WAIT_S after the first data, when the step starts with those it has)."""
        if not self.await_sizes or not self.window.sizes:
            return []
        missing = sorted(set(self.expected) - set(self.window.sizes))
        self.first_data = self.first_data or now
        if missing and now - self.first_data > SIZES_WAIT_S:
            log.warning("no samples of %s after %.0f s: starting with the %d sizes there (a new batch layout "
                        "later compiles again)", ", ".join(f"{h}x{w}" for h, w in missing), SIZES_WAIT_S,
                        len(self.window.sizes))
            self.await_sizes = False
            return []
        return missing

    def loop(self) -> None:
        trainer, cfg, run, window = self.trainer, self.cfg, self.run, self.window
        start_step = trainer.step
        waiting_since = None
        last_status = 0.0
        rate_t, rate_n = time.monotonic(), trainer.samples_trained
        if self.expected:
            log.info("compiling the padded step for %d sizes (%d samples each) before the data comes",
                     len(self.expected), cfg.per_size)
            log.info("compiled in %.1f s", trainer.warm_up(self.expected))
        while not (cfg.steps and trainer.step >= cfg.steps):
            check_interrupt()
            if run.stop_after and trainer.step - start_step >= run.stop_after:
                break
            if run.follow:
                now = time.monotonic()
                if self._wait_for_data(now):
                    waiting_since = waiting_since or now
                    if run.max_wait and now - waiting_since > run.max_wait:
                        break
                    if not self.quiet and now - last_status > 10:
                        missing = self.missing_sizes(now)
                        log.info("step %d: waiting for self-play data (%d samples, %d trained, ratio %s%s)",
                                 trainer.step, window.total_samples, trainer.samples_trained, cfg.ratio,
                                 f"; no {len(missing)} of the run's sizes yet" if missing else "")
                        last_status = now
                    time.sleep(min(run.poll, 1.0))
                    self.refresh()
                    continue
                waiting_since = None
            elif not window.sizes:
                raise ValueError("no training samples found in " + ", ".join(map(str, self.paths)))
            metrics = trainer.train_step(window)
            self.await_sizes = False
            trainer.last_metrics = metrics
            if trainer.step % run.log_every == 0 or trainer.step == cfg.steps:
                now = time.monotonic()
                sps = (trainer.samples_trained - rate_n) / max(now - rate_t, 1e-9)
                rate_t, rate_n = now, trainer.samples_trained
                trainer.log(metrics, window, sps)
                if run.status_file:
                    atomic_write_json(run.status_file, {"step": trainer.step, "samples_per_s": round(sps, 1),
                                                        "loss": round(metrics["loss"], 5)})
                if self.bar is not None:
                    self.bar.set_postfix(loss=f"{metrics['loss']:.3f}", pol=f"{metrics['policy_loss']:.3f}",
                                         val=f"{metrics['value_loss']:.3f}", sps=f"{sps:.0f}")
                elif not self.quiet and now - last_status > 10:
                    log.info("step %d loss %.4f (policy %.4f, value %.4f) lr %.4g window %d/%d %.0f samples/s",
                             trainer.step, metrics["loss"], metrics["policy_loss"], metrics["value_loss"],
                             metrics["lr"], window.window_samples, window.total_samples, sps)
                    last_status = now
            if self.bar is not None:
                self.bar.update(1)
            if trainer.step % cfg.checkpoint_every == 0:
                trainer.save(window)


def synthetic_window(sizes, seed: int = 0, ownership: bool = False) -> ReplayWindow:
    """A window of 512-odd samples per board size of uniformly random games (uniform policy
    targets, random outcomes) for :func:`bench`; with `ownership`, each game's final board."""
    import c4fast

    rng = np.random.default_rng(seed)
    window = ReplayWindow(ownership=ownership)
    for h, w in sizes:
        rows = {f: [] for f in ("stones", "forbidden", "last", "ply", "policy", "policy_weight",
                                "outcome", "root_wdl", "game_id")}
        final = []
        while len(rows["ply"]) < 512:
            gid = len(rows["ply"])
            g = c4fast.Game(h, w, RULES.draw_cell(rng, h, w))
            while g.result is None:
                s = g.state[0]
                legal = g.legal_moves()
                share = np.zeros(w)
                share[legal] = 1.0 / len(legal)
                pol = column_plane(share, s, h, w)
                for f, v in (("stones", s["stones"]), ("forbidden", s["forbidden"]), ("last", s["last"]),
                             ("ply", s["ply"]), ("policy", pol), ("policy_weight", 1.0),
                             ("outcome", int(rng.integers(3))), ("root_wdl", np.ones(3) / 3), ("game_id", gid)):
                    rows[f].append(v)
                g.play(int(rng.choice(legal)))
            final += [np.maximum(g.board(), 0).astype(np.int8)] * (len(rows["ply"]) - gid)
        window.data[(h, w)] = {f: np.asarray(v) for f, v in rows.items()}
        if window.ownership:
            window.data[(h, w)]["final"] = np.stack(final)
    return window


def bench(preset: str, steps: int, per_size: int, sizes, seed: int = 0, device: str = "cpu",
          precision: str = "auto", padded: bool = False, compile: bool = False,
          ownership_weight: float = 0.0) -> dict:
    """Training samples/s on synthetic self-play-like data (random games), no files, on
    `device` (ValueError if it is CUDA and CUDA is not available); with `ownership_weight`
    > 0 the step trains the ownership head too, on each random game's final board."""
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device} asked for, but CUDA is not available (torch {torch.__version__})")

    window = synthetic_window(sizes, seed, ownership=ownership_weight > 0)
    cfg = TrainConfig(preset=preset, per_size=per_size, seed=seed, device=device, precision=precision, padded=padded,
                      compile=compile, ownership_weight=ownership_weight)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, tmp)
        for _ in range(2 if tr.device.type == "cuda" else 1):  # warm-up (cuDNN autotuning on CUDA)
            tr.train_step(window)
        t0 = time.perf_counter()
        for _ in range(steps):
            tr.train_step(window)  # ends with a host sync: the timing includes the GPU work
        dt = time.perf_counter() - t0
        t1 = time.perf_counter()  # the step's host share: drawing the samples (and padding them)
        for _ in range(steps):
            drawn = [window.sample(tr.rng, size, per_size) for size in window.sizes]
            if padded:
                canvas_batch(drawn, side=None)
        sample_ms = (time.perf_counter() - t1) / steps * 1e3
        gpu = {}
        if tr.device.type == "cuda":
            gpu = {"gpu": torch.cuda.get_device_name(tr.device),
                   "max_memory_mb": round(torch.cuda.max_memory_allocated(tr.device) / 2**20, 1)}
    n = steps * per_size * len(sizes)
    from nets.precision import cpu_info

    return {"bench": "train", "preset": preset, "device": cfg.resolved_device(), "precision": tr.precision,
            "padded": padded, "compile": compile, "ownership_weight": ownership_weight,
            "cpu_model": cpu_info().model, "threads": torch.get_num_threads(),
            "sizes": len(sizes), "per_size": per_size, "steps": steps,
            "samples_per_s": round(n / dt, 1), "step_ms": round(dt / steps * 1e3, 1),
            "sample_ms": round(sample_ms, 1), **gpu}


def build_parser() -> argparse.ArgumentParser:
    """Flags derived from :class:`TrainRunConfig` (and the nested :class:`TrainConfig`)."""
    ap = argparse.ArgumentParser(prog="python -m nets.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="shard files, globs or directories")
    ap.add_argument("--config", metavar="FILE.json", default=None,
                    help="start from this TrainRunConfig JSON (flags given as well override it)")
    ap.add_argument("--bench", action="store_true", help="print training samples/s on synthetic data")
    ap.add_argument("--bench-sizes", default="saiblo", help="--bench: board sizes of the synthetic window "
                                                            "('saiblo' or a list like 6x7,9x9)")
    add_config_arguments(ap, TrainRunConfig)
    return ap


def main(argv=None) -> int:
    setup_logging()
    args = build_parser().parse_args(argv)
    raise_on_interrupt()
    try:
        base = load_config(TrainRunConfig, args.config) if args.config else TrainRunConfig()
        run = config_from_args(TrainRunConfig, args, base)
    except ConfigError as e:
        log.error("%s", e)
        return 2
    if run.threads > 0:
        torch.set_num_threads(run.threads)
    if args.bench:
        from c4fast.game import parse_sizes

        sizes = list(parse_sizes(args.bench_sizes))
        steps = max(run.train.steps, 5) if run.train.steps else 10
        device = run.train.resolved_device()
        given = any(k == "cfg__train__per_size" for k in vars(args))
        per_size = run.train.per_size if given or device == "cpu" else BENCH_CUDA_PER_SIZE
        try:
            out = bench(run.train.preset, steps, per_size, sizes, device=device, precision=run.train.precision,
                        padded=run.train.padded, compile=run.train.compile,
                        ownership_weight=run.train.ownership_weight)
        except (ValueError, RuntimeError) as e:
            log.error("%s", e)
            return 2
        print(json.dumps(out))
        return 0
    try:
        if not args.paths and not run.follow:
            raise ValueError("give shard paths and/or --follow DIR")
        if run.follow and not os.path.isdir(run.follow):
            os.makedirs(run.follow, exist_ok=True)
        summary = train(args.paths, run)
    except (ValueError, ShardError) as e:
        log.error("%s", e)
        return 2
    except (NonFiniteLossError, LockedError, PrecisionUnavailable) as e:
        log.error("%s", e)
        return 1
    print(json.dumps(summary))
    forget_handled_interrupt()
    return 0


if __name__ == "__main__":
    sys.exit(main())
