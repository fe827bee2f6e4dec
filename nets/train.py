"""`python -m nets.train PATHS...`: train the network on self-play shards.

Each step draws ``per_size`` samples from every board size in the replay window,
runs forward/backward per size and accumulates the gradients (one optimizer step per
training step), with random horizontal flips. Loss (per sample, averaged over the
step): ``value_weight * CE(wdl) + policy_weight * softCE(policy over legal cells)``,
plus L2 as SGD weight decay. SGD with momentum; learning rate 1/3 for the first 5 %
of ``--steps``, full until 72 %, then 1/10.

Every ``--checkpoint-every`` steps it writes, atomically, the training state
(``OUT/train_state.pt``: weights, optimizer, RNG states, step) and the inference
checkpoint ``OUT/models/model_XXXXXXXX.pt`` that ``selfplay.run --model OUT/models``
follows. ``--resume`` continues from the training state so that a resumed run and an
uninterrupted one give identical weights on the CPU (same data).

``--follow DIR`` keeps training as new shards appear in DIR, holding the number of
training samples at ``--ratio`` times the number of self-play samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from nets.checkpoint import atomic_write, checkpoint_name, save_checkpoint
from nets.config import NetConfig, get_preset
from nets.model import build_model
from nets.replay import Batch, ReplayWindow, WindowConfig
from selfplay.interrupt import raise_on_interrupt
from selfplay.shards import ShardError, list_shards

STATE_FORMAT = "c4fast-train-state"
BENCH_CUDA_PER_SIZE = 128  # --bench on CUDA: samples per size per step (16 sizes: 2048 a step)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Trainer settings (defaults from katac4 where it has them)."""

    preset: str = "cpu_small"
    steps: int = 0  # schedule horizon and stop (0: no horizon; follow mode runs on)
    per_size: int = 16  # samples per board size per step
    lr: float = 0.02
    momentum: float = 0.9
    l2: float = 3e-5
    value_weight: float = 1.5
    warmup_fraction: float = 0.05
    anneal_fraction: float = 0.72
    warmup_steps: int = 200  # warm-up length when steps == 0
    checkpoint_every: int = 500
    ratio: float = 4.0  # follow mode: training samples per self-play sample
    seed: int = 0
    device: str = "cpu"
    window: WindowConfig = WindowConfig()

    def __post_init__(self):
        get_preset(self.preset)
        for f in ("steps", "warmup_steps"):
            if getattr(self, f) < 0:
                raise ValueError(f"TrainConfig.{f} must be >= 0")
        for f in ("per_size", "checkpoint_every"):
            if getattr(self, f) < 1:
                raise ValueError(f"TrainConfig.{f} must be >= 1")
        for f in ("lr", "ratio"):
            if not getattr(self, f) > 0:
                raise ValueError(f"TrainConfig.{f} must be > 0")

    def lr_at(self, step: int) -> float:
        if self.steps > 0:
            x = step / self.steps
            if x < self.warmup_fraction:
                return self.lr / 3
            return self.lr if x < self.anneal_fraction else self.lr / 10
        return self.lr / 3 if step < self.warmup_steps else self.lr

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["window"] = dataclasses.asdict(self.window)
        return d


def to_device(a: np.ndarray, device) -> torch.Tensor:
    """numpy -> tensor on `device`; on CUDA through pinned memory with a non-blocking copy
    (no host synchronisation)."""
    t = torch.from_numpy(a)
    device = torch.device(device)
    if device.type != "cuda":
        return t
    return t.pin_memory().to(device, non_blocking=True)


def losses(model, batch: Batch, device, value_weight: float):
    """Summed (not averaged) value CE, policy soft CE and policy entropy of one batch
    (0-dim tensors on `device`; nothing here waits for the device)."""
    x = to_device(batch.planes, device)
    if x.is_cuda:
        x = x.contiguous(memory_format=torch.channels_last)
    pol, val = model(x)
    legal = to_device(batch.legal, device)
    target = to_device(batch.policy, device)
    w = to_device(batch.policy_weight, device)
    z = to_device(batch.outcome, device)
    logits = pol.float().flatten(1).masked_fill(~legal.flatten(1), -1e9)
    logp = F.log_softmax(logits, dim=1)
    p_ce = -(target.flatten(1) * logp).sum(1)
    policy_loss = (w * p_ce).sum()
    value_loss = F.cross_entropy(val.float(), z, reduction="sum")
    with torch.no_grad():
        entropy = -(logp.exp() * logp.masked_fill(~legal.flatten(1), 0)).sum()
    return value_weight * value_loss + policy_loss, policy_loss, value_loss, entropy


class Trainer:
    def __init__(self, cfg: TrainConfig, out_dir: str):
        self.cfg = cfg
        self.out = out_dir
        self.device = torch.device(cfg.device)
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
        self.model = build_model(self.net_config).to(self.device)
        if self.device.type == "cuda":
            self.model = self.model.to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                                   weight_decay=cfg.l2)
        self.rng = np.random.default_rng(cfg.seed)
        self.step = 0
        self.samples_trained = 0
        self.tb = None
        self.last_metrics: dict = {}

    # ----------------------------------------------------------- state
    @property
    def state_path(self) -> str:
        return os.path.join(self.out, "train_state.pt")

    def save(self) -> str:
        """Write the training state and the inference checkpoint (both atomic)."""
        os.makedirs(os.path.join(self.out, "models"), exist_ok=True)
        state = {
            "format": STATE_FORMAT,
            "config": self.cfg.to_dict(),
            "net_config": self.net_config.to_dict(),
            "step": self.step,
            "samples_trained": self.samples_trained,
            "model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.opt.state_dict(),
            "numpy_rng": json.dumps(self.rng.bit_generator.state),
            "torch_rng": torch.get_rng_state(),
        }
        atomic_write(self.state_path, lambda f: torch.save(state, f))
        path = os.path.join(self.out, "models", checkpoint_name(self.step))
        save_checkpoint(path, self.model, self.net_config, self.step,
                        extra={"samples_trained": self.samples_trained})
        return path

    def load(self) -> None:
        """Restore from OUT/train_state.pt (raises ValueError naming the problem)."""
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
        self.opt.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = json.loads(state["numpy_rng"])
        torch.set_rng_state(state["torch_rng"])
        self.step = int(state["step"])
        self.samples_trained = int(state["samples_trained"])

    # ----------------------------------------------------------- training
    def train_step(self, window: ReplayWindow) -> dict:
        """One optimizer step with per-board-size gradient accumulation (bf16 autocast on
        CUDA). The loss sums stay on the device; the step reads them back once, at its end."""
        sizes = window.sizes
        if not sizes:
            raise ValueError("the replay window is empty")
        self.model.train()
        lr = self.cfg.lr_at(self.step)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        n_total = self.cfg.per_size * len(sizes)
        sums = torch.zeros(4, dtype=torch.float64, device=self.device)  # loss, policy, value, entropy
        use_amp = self.device.type == "cuda"
        for size in sizes:
            batch = window.sample(self.rng, size, self.cfg.per_size)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
                loss, p, v, e = losses(self.model, batch, self.device, self.cfg.value_weight)
            (loss / n_total).backward()
            sums += torch.stack([loss.detach(), p.detach(), v.detach(), e]).double()
        self.opt.step()
        self.step += 1
        self.samples_trained += n_total
        tot, pol, val, ent = sums.tolist()  # the step's only host synchronisation
        return {"loss": tot / n_total, "policy_loss": pol / n_total, "value_loss": val / n_total,
                "policy_entropy": ent / n_total, "lr": lr, "sizes": len(sizes)}

    def log(self, metrics: dict, window: ReplayWindow, samples_per_s: float) -> None:
        if self.tb is None:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(os.path.join(self.out, "tb"))
        for k in ("loss", "policy_loss", "value_loss", "policy_entropy", "lr"):
            self.tb.add_scalar(f"train/{k}", metrics[k], self.step)
        self.tb.add_scalar("train/samples_per_s", samples_per_s, self.step)
        self.tb.add_scalar("data/window_samples", window.window_samples, self.step)
        self.tb.add_scalar("data/total_samples", window.total_samples, self.step)
        if window.num_games:
            self.tb.add_scalar("data/game_length", window.game_length_sum / window.num_games, self.step)
        self.tb.flush()


def train(paths, cfg: TrainConfig, out: str, follow: str | None = None, resume: bool = False,
          poll: float = 5.0, max_wait: float = 0.0, quiet: bool = False, log_every: int = 20,
          stop_after: int = 0) -> dict:
    """Run the trainer; returns a summary dict. See the module docstring.

    `stop_after` > 0 ends this run after that many steps (the schedule still follows
    cfg.steps), e.g. to continue later with `resume`.
    """
    os.makedirs(out, exist_ok=True)
    trainer = Trainer(cfg, out)
    if resume and os.path.exists(trainer.state_path):
        trainer.load()
        if not quiet:
            print(f"[train] resumed at step {trainer.step}", flush=True)
    window = ReplayWindow(cfg.window)
    sources = list(paths) + ([follow] if follow else [])

    def refresh():
        return window.update(list_shards(sources))

    refresh()
    step_samples = lambda: cfg.per_size * max(1, len(window.sizes))  # noqa: E731
    bar = None
    if cfg.steps and not quiet and not follow:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=trainer.step, unit="step", dynamic_ncols=True)
    t0 = time.monotonic()
    start_step = trainer.step
    try:
        _train_loop(trainer, window, cfg, refresh, follow, paths, stop_after, start_step, bar, poll,
                    max_wait, quiet, log_every, step_samples)
    except KeyboardInterrupt:
        if not quiet:
            print(f"[train] interrupted at step {trainer.step}: saving", file=sys.stderr, flush=True)
    metrics = trainer.last_metrics
    if bar is not None:
        bar.close()
    final = trainer.save() if trainer.step > start_step or not os.path.exists(trainer.state_path) else None
    elapsed = time.monotonic() - t0
    return {"steps": trainer.step, "steps_this_run": trainer.step - start_step,
            "samples_trained": trainer.samples_trained, "seconds": round(elapsed, 2),
            "samples_per_s": round((trainer.step - start_step) * step_samples() / max(elapsed, 1e-9), 1),
            "window_samples": window.window_samples, "total_samples": window.total_samples,
            "sizes": [f"{h}x{w}" for h, w in window.sizes], "checkpoint": final,
            **{k: round(v, 5) for k, v in metrics.items() if isinstance(v, float)}}


def _train_loop(trainer, window, cfg, refresh, follow, paths, stop_after, start_step, bar, poll,
                max_wait, quiet, log_every, step_samples):
    last_refresh = time.monotonic()
    waiting_since = None
    last_status = 0.0
    rate_t, rate_n = time.monotonic(), trainer.samples_trained
    sps = 0.0
    while not (cfg.steps and trainer.step >= cfg.steps):
        if stop_after and trainer.step - start_step >= stop_after:
            break
        if follow:
            now = time.monotonic()
            if now - last_refresh >= poll:
                refresh()
                last_refresh = now
            allowed = cfg.ratio * window.total_samples
            if not window.sizes or trainer.samples_trained + step_samples() > allowed:
                if waiting_since is None:
                    waiting_since = now
                if max_wait and now - waiting_since > max_wait:
                    break
                if not quiet and now - last_status > 10:
                    print(f"[train] step {trainer.step}: waiting for self-play data "
                          f"({window.total_samples} samples, {trainer.samples_trained} trained, "
                          f"ratio {cfg.ratio})", flush=True)
                    last_status = now
                time.sleep(min(poll, 1.0))
                refresh()
                last_refresh = time.monotonic()
                continue
            waiting_since = None
        elif not window.sizes:
            raise ValueError("no training samples found in " + ", ".join(map(str, paths)))
        metrics = trainer.train_step(window)
        trainer.last_metrics = metrics
        if trainer.step % log_every == 0 or trainer.step == cfg.steps:
            now = time.monotonic()
            sps = (trainer.samples_trained - rate_n) / max(now - rate_t, 1e-9)
            rate_t, rate_n = now, trainer.samples_trained
            trainer.log(metrics, window, sps)
            if bar is not None:
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", pol=f"{metrics['policy_loss']:.3f}",
                                val=f"{metrics['value_loss']:.3f}", sps=f"{sps:.0f}")
            elif not quiet and now - last_status > 10:
                print(f"[train] step {trainer.step} loss {metrics['loss']:.4f} (policy "
                      f"{metrics['policy_loss']:.4f}, value {metrics['value_loss']:.4f}) "
                      f"lr {metrics['lr']:.4g} window {window.window_samples}/{window.total_samples} "
                      f"{sps:.0f} samples/s", flush=True)
                last_status = now
        if bar is not None:
            bar.update(1)
        if trainer.step % cfg.checkpoint_every == 0:
            trainer.save()


def bench(preset: str, steps: int, per_size: int, sizes, seed: int = 0, device: str = "cpu") -> dict:
    """Training samples/s on synthetic self-play-like data (random games), no files, on
    `device` (ValueError if it is CUDA and CUDA is not available)."""
    import c4fast

    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device} asked for, but CUDA is not available (torch {torch.__version__})")

    rng = np.random.default_rng(seed)
    window = ReplayWindow()
    for h, w in sizes:
        rows = {f: [] for f in ("stones", "forbidden", "last", "ply", "policy", "policy_weight",
                                "outcome", "root_wdl")}
        while len(rows["ply"]) < 512:
            g = c4fast.Game(h, w, (int(rng.integers(h)), int(rng.integers(w))))
            while g.result is None:
                s = g.state[0]
                pol = np.zeros((h, w), np.float32)
                legal = g.legal_moves()
                for c in legal:
                    pol[int(s["top"][c]), c] = 1.0 / len(legal)
                for f, v in (("stones", s["stones"]), ("forbidden", s["forbidden"]), ("last", s["last"]),
                             ("ply", s["ply"]), ("policy", pol), ("policy_weight", 1.0),
                             ("outcome", int(rng.integers(3))), ("root_wdl", np.ones(3) / 3)):
                    rows[f].append(v)
                g.play(int(rng.choice(legal)))
        window.data[(h, w)] = {f: np.asarray(v) for f, v in rows.items()}
    cfg = TrainConfig(preset=preset, per_size=per_size, seed=seed, device=device)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, tmp)
        for _ in range(2 if tr.device.type == "cuda" else 1):  # warm-up (cuDNN autotuning on CUDA)
            tr.train_step(window)
        t0 = time.perf_counter()
        for _ in range(steps):
            tr.train_step(window)  # ends with a host sync: the timing includes the GPU work
        dt = time.perf_counter() - t0
        gpu = {}
        if tr.device.type == "cuda":
            gpu = {"gpu": torch.cuda.get_device_name(tr.device),
                   "max_memory_mb": round(torch.cuda.max_memory_allocated(tr.device) / 2**20, 1)}
    n = steps * per_size * len(sizes)
    return {"bench": "train", "preset": preset, "device": cfg.device, "threads": torch.get_num_threads(),
            "sizes": len(sizes), "per_size": per_size, "steps": steps,
            "samples_per_s": round(n / dt, 1), "step_ms": round(dt / steps * 1e3, 1), **gpu}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nets.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="shard files, globs or directories")
    ap.add_argument("--follow", default=None, help="directory to watch for new shards")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/train_state.pt")
    ap.add_argument("--steps", type=int, default=0, help="training steps (schedule horizon; 0: none)")
    ap.add_argument("--preset", default="cpu_small", help="network preset (default cpu_small)")
    ap.add_argument("--out", default="runs/train", help="output directory (default runs/train)")
    ap.add_argument("--per-size", type=int, default=None,
                    help="samples per board size per step (16; --bench on CUDA: 128)")
    ap.add_argument("--lr", type=float, default=0.02, help="peak learning rate (0.02)")
    ap.add_argument("--checkpoint-every", type=int, default=500, help="steps between checkpoints (500)")
    ap.add_argument("--ratio", type=float, default=4.0, help="follow mode: trained/self-play samples (4)")
    ap.add_argument("--window-c", type=float, default=250_000, help="replay window constant c (250000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="torch device (default cuda when available, else cpu); CUDA trains in "
                         "bf16 autocast with channels_last")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="end this run after N steps (resume later with --resume; 0: no limit)")
    ap.add_argument("--max-wait", type=float, default=0.0,
                    help="follow mode: stop after waiting this many seconds for data (0: never)")
    ap.add_argument("--bench", action="store_true", help="print training samples/s on synthetic data")
    args = ap.parse_args(argv)
    raise_on_interrupt()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.bench:
        sizes = [(h, w) for h in range(9, 13) for w in range(9, 13)]
        per_size = args.per_size or (BENCH_CUDA_PER_SIZE if args.device.startswith("cuda") else TrainConfig.per_size)
        try:
            out = bench(args.preset, max(args.steps, 5) if args.steps else 10, per_size, sizes,
                        device=args.device)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(out))
        return 0
    if args.per_size is None:
        args.per_size = TrainConfig.per_size
    try:
        if not args.paths and not args.follow:
            raise ValueError("give shard paths and/or --follow DIR")
        cfg = TrainConfig(preset=args.preset, steps=args.steps, per_size=args.per_size, lr=args.lr,
                          checkpoint_every=args.checkpoint_every, ratio=args.ratio, seed=args.seed,
                          device=args.device, window=WindowConfig(c=args.window_c))
        if args.follow and not os.path.isdir(args.follow):
            os.makedirs(args.follow, exist_ok=True)
        summary = train(args.paths, cfg, args.out, follow=args.follow, resume=args.resume,
                        max_wait=args.max_wait, stop_after=args.stop_after)
    except (ValueError, ShardError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[train] interrupted", file=sys.stderr)
        return 130
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
