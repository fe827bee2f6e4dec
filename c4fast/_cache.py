"""Numba's on-disk kernel cache must live somewhere writable.

``@njit(cache=True)`` writes next to the source file by default, which fails at
import when the package is installed read-only. If ``NUMBA_CACHE_DIR`` is unset and
the package directory is not writable, point it at a per-user cache directory.
Must run before the first kernel is compiled (``c4fast/__init__`` calls it first).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def ensure_numba_cache_dir() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    pkg = Path(__file__).resolve().parent
    if os.access(pkg, os.W_OK):
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    target = Path(base) / "c4fast-numba"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        target = Path(tempfile.gettempdir()) / f"c4fast-numba-{os.getuid()}"
        target.mkdir(parents=True, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = str(target)
