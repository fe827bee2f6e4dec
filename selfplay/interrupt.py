"""Ctrl-C handling shared by the long-running commands (run, loop, nets.train)."""

from __future__ import annotations

import signal


def raise_on_interrupt() -> None:
    """Make SIGINT (Ctrl-C) and SIGTERM raise KeyboardInterrupt in this process, even when
    it was started with SIGINT ignored (a background job of a non-interactive shell)."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
