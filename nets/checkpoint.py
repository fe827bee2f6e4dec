"""Atomic, self-describing network checkpoints.

A checkpoint is ``torch.save`` of a dict::

    {"format": "c4fast-net", "format_version": 1, "config": NetConfig.to_dict(),
     "encoding_version": int, "num_planes": int, "step": int,
     "state_dict": {name: CPU tensor}, "extra": anything torch.load(weights_only=True) reads}

Files are written to a temporary file in the target directory, fsynced and renamed over
the final name, so a reader never sees a partial file under ``model_{step:08d}.pt``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch

from c4fast.runtime import atomic_write
from nets.config import ENCODING_VERSION, NUM_PLANES, NetConfig, encoding_mismatch
from nets.model import Net

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CheckpointError",
    "checkpoint_name",
    "latest_checkpoint",
    "load_checkpoint",
    "save_checkpoint",
]

FORMAT = "c4fast-net"
FORMAT_VERSION = 1
_NAME_RE = re.compile(r"^model_(\d{8,})\.pt$")


class CheckpointError(ValueError):
    """A checkpoint file is unreadable or does not fit this code / the expected config."""


def checkpoint_name(step: int) -> str:
    """Canonical file name ``model_{step:08d}.pt``."""
    return f"model_{int(step):08d}.pt"


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    # torch.compile wraps in OptimizedModule._orig_mod; DDP/DataParallel in .module.
    while True:
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, torch.nn.Module):
            return model
        model = inner


def save_checkpoint(
    path: str | os.PathLike,
    model: torch.nn.Module,
    config: NetConfig,
    step: int,
    extra: Any = None,
) -> str:
    """Atomically write `model`'s weights with `config` and `step` to `path`; returns path.

    `extra` (e.g. optimizer state, training metadata) must consist of tensors and plain
    Python containers/scalars so that ``torch.load(weights_only=True)`` can read it.
    """
    if not isinstance(config, NetConfig):
        raise TypeError(f"config must be a NetConfig, got {type(config).__name__}")
    state = {
        k: v.detach().to("cpu").contiguous().clone()
        for k, v in _unwrap(model).state_dict().items()
    }
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": config.to_dict(),
        "encoding_version": ENCODING_VERSION,
        "num_planes": int(config.in_planes),
        "step": int(step),
        "state_dict": state,
        "extra": extra,
    }
    atomic_write(path, lambda f: torch.save(payload, f))
    return os.fspath(path)


def _read(path: str, map_location) -> dict:
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist or is not a file")
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated zip, not a torch file, disallowed pickle...
        raise CheckpointError(
            f"checkpoint {path!r} is unreadable or truncated ({type(e).__name__}: {e})"
        ) from e
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CheckpointError(f"{path!r} is not a c4fast checkpoint (no format={FORMAT!r})")
    return obj


def load_checkpoint(
    path: str | os.PathLike,
    expect_config: NetConfig | None = None,
    map_location="cpu",
) -> tuple[Net, NetConfig, dict]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Returns ``(model, config, meta)``: the model is built from the stored config, loaded
    strictly and put in eval mode on `map_location`; meta holds every stored key except
    ``state_dict`` plus ``"path"``. Raises :class:`CheckpointError` naming the mismatch for
    unreadable/foreign files, an encoding version c4fast cannot read or a plane count not its
    (version 2, the removed parity planes, included), a config outside
    :data:`nets.config.NET_LIMITS`, weights not fitting the config (names, shapes and dtypes
    are checked against a net built on the ``meta`` device, before the net is allocated) or
    a config different from `expect_config`.
    """
    path = os.fspath(path)
    obj = _read(path, map_location)
    version = obj.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path!r} has format_version {version!r}; this code reads {FORMAT_VERSION}"
        )
    stored = obj.get("config")
    why = encoding_mismatch(obj.get("encoding_version"), obj.get("num_planes"),
                            stored.get("in_planes", NUM_PLANES) if isinstance(stored, dict) else NUM_PLANES)
    if why:
        raise CheckpointError(f"checkpoint {path!r} does not fit: {why}")
    try:
        config = NetConfig.from_dict(stored)
    except ValueError as e:
        raise CheckpointError(f"checkpoint {path!r} has a bad config: {e}") from e
    if expect_config is not None:
        diff = expect_config.diff(config)
        if diff:
            desc = "; ".join(f"{k}: expected {a!r}, checkpoint has {b!r}" for k, (a, b) in diff.items())
            raise CheckpointError(f"checkpoint {path!r} config differs from the expected one: {desc}")
    state = obj.get("state_dict")
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path!r} has no state_dict")
    with torch.device("meta"):  # the expected names and shapes, nothing allocated
        own = Net(config).state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"checkpoint {path!r} state_dict does not fit config {config.name!r}: "
            f"missing {missing[:8]}, unexpected {unexpected[:8]}"
        )
    for k, v in own.items():
        got = state[k]
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(v.shape) or got.dtype != v.dtype:
            shape = f"{tuple(got.shape)} {got.dtype}" if isinstance(got, torch.Tensor) else type(got).__name__
            raise CheckpointError(
                f"checkpoint {path!r} parameter {k!r} has shape {shape} but config "
                f"{config.name!r} needs {tuple(v.shape)} {v.dtype}"
            )
        if got.is_floating_point() and not bool(torch.isfinite(got).all()):
            raise CheckpointError(f"checkpoint {path!r} parameter {k!r} holds non-finite values (NaN or inf)")
    model = Net(config)  # only now: the weights fit a config within nets.config's bounds
    model.load_state_dict(state, strict=True)
    if isinstance(map_location, (str, torch.device)):
        model.to(map_location)
    model.eval()
    meta = {k: v for k, v in obj.items() if k != "state_dict"}
    meta["path"] = path
    return model, config, meta


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """The step in a ``model_{step:08d}.pt`` file name, or None for any other name."""
    m = _NAME_RE.match(os.path.basename(os.fspath(path)))
    return int(m.group(1)) if m else None


def list_checkpoints(directory: str | os.PathLike) -> list[str]:
    """Paths of the ``model_{step:08d}.pt`` files in `directory`, by step ([] if none or no directory)."""
    directory = os.fspath(directory)
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        m = _NAME_RE.match(name)
        if m and os.path.isfile(os.path.join(directory, name)):
            found.append((int(m.group(1)), os.path.join(directory, name)))
    return [p for _, p in sorted(found)]


def latest_checkpoint(directory: str | os.PathLike) -> str | None:
    """Path of the ``model_{step:08d}.pt`` in `directory` with the largest step, or None."""
    found = list_checkpoints(directory)
    return found[-1] if found else None
