"""Moving files between nodes: checksummed, idempotent, atomic (no Ray in here).

A file travels as a `Blob` (name, sha256 of the bytes, bytes). The sender reads it
from its directory; the receiver checks the sha256, writes a temporary file in the
target directory, fsyncs it, renames it onto the final name and fsyncs the directory.
Storing a name that is already there with the same sha256 is a no-op that succeeds
(so an upload may be retried any number of times); the same name with other bytes is
an error. The sender deletes its copy only when told (`Spool.ack`) that the receiver
holds those bytes, so a shard exists on the sender's disk, the receiver's, or both,
and never twice on the receiver's.

Temporary files are named ``.NAME.PID.tmp``: neither ``*.h5`` (shard readers) nor
``model_*.pt`` (checkpoint readers) match them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re

from c4fast.runtime import atomic_write_bytes, fsync_dir, remove_stale_temps

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")  # a plain file name, no path
MODEL_RE = re.compile(r"^model_(\d{8,})\.pt$")


class TransferError(ValueError):
    """A checksum mismatch, a bad name, or a name clash with different bytes."""


@dataclasses.dataclass(frozen=True)
class Blob:
    """One file in flight: its base name, the sha256 (hex) of `data`, and the bytes."""

    name: str
    sha256: str
    data: bytes


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_name(name: str) -> None:
    if not NAME_RE.match(name) or name.endswith(".tmp"):
        raise TransferError(f"bad file name {name!r}")


def read_blob(directory: str, name: str) -> Blob:
    """The file `directory/name` as a Blob (sha256 computed from the bytes read)."""
    _check_name(name)
    with open(os.path.join(directory, name), "rb") as f:
        data = f.read()
    return Blob(name, sha256_bytes(data), data)


def store_blob(directory: str, blob: Blob) -> bool:
    """Write `blob` as `directory/blob.name` (temp + fsync + rename + dir fsync).

    Returns True if written, False if that name already holds the same bytes.
    Raises TransferError if the bytes do not match the sha256 or the name holds other bytes.
    """
    _check_name(blob.name)
    if sha256_bytes(blob.data) != blob.sha256:
        raise TransferError(f"{blob.name}: sha256 mismatch in transit")
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, blob.name)
    if os.path.exists(final):
        have = sha256_file(final)
        if have == blob.sha256:
            return False
        raise TransferError(f"{final} exists with sha256 {have[:12]}, refusing {blob.sha256[:12]}")
    atomic_write_bytes(final, blob.data)
    return True


def remove_temporaries(directory: str) -> int:
    """Delete the temp files a receiver killed mid-write left (c4fast.runtime.atomic_write's
    ``NAME.XXXX.tmp``); returns how many."""
    return len(remove_stale_temps(directory))


class Spool:
    """A node-local directory of finished shards waiting for upload (the sender side)."""

    def __init__(self, directory: str):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)

    def ready(self) -> list[str]:
        """Names of finished shards (``*.h5``; a writer's ``*.h5.tmp`` is never listed), oldest first."""
        names = [n for n in os.listdir(self.dir) if n.endswith(".h5") and not n.startswith(".")]

        def mtime(n):
            try:
                return os.path.getmtime(os.path.join(self.dir, n))
            except OSError:
                return 0.0

        return sorted(names, key=lambda n: (mtime(n), n))

    def read(self, name: str) -> Blob:
        return read_blob(self.dir, name)

    def ack(self, name: str, sha256: str) -> bool:
        """The receiver holds `name` with `sha256`: delete the local copy. False if already gone."""
        _check_name(name)
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return False
        have = sha256_file(path)
        if have != sha256:
            raise TransferError(f"ack for {name} names sha256 {sha256[:12]}, the spool holds {have[:12]}")
        os.remove(path)
        fsync_dir(self.dir)
        return True


def latest_model(directory: str) -> str | None:
    """Base name of the ``model_XXXXXXXX.pt`` with the largest step in `directory`, or None."""
    try:
        names = [n for n in os.listdir(directory) if MODEL_RE.match(n)]
    except FileNotFoundError:
        return None
    return max(names, key=lambda n: int(MODEL_RE.match(n).group(1)), default=None)


def install_model(directory: str, blob: Blob, keep: int = 3) -> bool:
    """Store a checkpoint Blob in a node's models directory and delete all but the
    `keep` newest checkpoints (older ones may still be loading elsewhere, so keep >= 2)."""
    if not MODEL_RE.match(blob.name):
        raise TransferError(f"{blob.name!r} is not a checkpoint name")
    written = store_blob(directory, blob)
    names = sorted((n for n in os.listdir(directory) if MODEL_RE.match(n)),
                   key=lambda n: int(MODEL_RE.match(n).group(1)))
    for n in names[:-max(keep, 1)]:
        try:
            os.remove(os.path.join(directory, n))
        except FileNotFoundError:
            pass
    return written
