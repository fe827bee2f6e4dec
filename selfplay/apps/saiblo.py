"""`python -m selfplay.apps.saiblo`: the Saiblo ladder protocol player.

Protocol (stdin/stdout; rows are counted from the TOP on the platform):

* first line ``H W noX noY``: board height and width, forbidden cell (row from the top, col);
* then one line ``lastX lastY`` per turn: the opponent's last move, or ``-1 -1`` when we
  move first;
* we answer each turn with a 4-byte big-endian length followed by ``"x y"`` (our move,
  row from the top, column).

The default player is the shipped network (``models/c4fast_cpu.npz``, a torch-free numpy
export) with graph search under a time budget (``--time``, seconds per move, start-up
included on the first move). No torch is imported on this path. Malformed or illegal
input: a clear message on stderr and exit code 2.

``--bundle OUT.zip`` writes the archive the platform accepts: ``main.py`` at the root,
the c4fast package, the numpy network code and the model, plus Numba kernels compiled
for a generic x86-64 CPU so that the first move does not pay for compilation (the
platform must provide numpy and numba).
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # start-up is part of the first move's budget

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from nets import MODELS_DIR  # noqa: E402  (a path constant: no torch import)

DEFAULT_MODEL = str(MODELS_DIR / "c4fast_cpu.npz")


class ProtocolError(ValueError):
    """A malformed or illegal line from the platform."""


def _ints(line: str, n: int, what: str) -> list[int]:
    parts = line.split()
    if len(parts) != n:
        raise ProtocolError(f"expected {what} ({n} integers), got {line.strip()!r}")
    try:
        return [int(x) for x in parts]
    except ValueError:
        raise ProtocolError(f"expected {what} ({n} integers), got {line.strip()!r}") from None


def send(out, x: int, y: int) -> None:
    msg = f"{x} {y}".encode()
    out.write(len(msg).to_bytes(4, "big") + msg)
    out.flush()


def make_player(args):
    """The ladder player: ``--player SPEC``, else the net at ``--model`` with ``--time`` per move."""
    from nets.players import make_player as make

    if args.player:
        return make(args.player)
    path = args.model or DEFAULT_MODEL
    if not os.path.exists(path):
        raise FileNotFoundError(f"model {path!r} not found (use --model or --player)")
    return make(f"net:{path}:{max(0.05, args.time)}s")


def play(inp, out, args, log=sys.stderr) -> int:
    """Run one game over the protocol; returns the exit code."""
    import c4fast
    from c4fast.board import RULES
    from c4fast.evaluators import landing_row

    first = inp.readline()
    if not first:
        raise ProtocolError("no board line (expected 'H W noX noY')")
    h, w, nox, noy = _ints(first, 4, "'H W noX noY'")
    try:
        RULES.check_size(h, w)
    except ValueError as e:
        raise ProtocolError(f"board size {h}x{w}: {e}") from None
    if not (0 <= nox < h and 0 <= noy < w):
        raise ProtocolError(f"forbidden cell ({nox}, {noy}) is off the {h}x{w} board")
    game = c4fast.Game(h, w, c4fast.from_saiblo(nox, noy, h))
    player = make_player(args)
    player.reset(game)
    budget = args.time
    first_move = True
    while True:
        line = inp.readline()
        if not line:
            return 0  # the platform closed the pipe: the game is over
        lx, ly = _ints(line, 2, "'lastX lastY'")
        if (lx, ly) != (-1, -1):
            if not (0 <= ly < w) or ly not in game.legal_moves():
                raise ProtocolError(f"illegal opponent move {lx} {ly}: column {ly} is not playable")
            row = landing_row(game.state[0], ly)
            if c4fast.to_saiblo(row, ly, h)[0] != lx:
                raise ProtocolError(f"illegal opponent move {lx} {ly}: a stone in column {ly} lands "
                                    f"on row {c4fast.to_saiblo(row, ly, h)[0]} (from the top)")
            game.play(ly)
        elif not first_move or game.ply != 0:
            raise ProtocolError("'-1 -1' is only valid as the first turn line when we move first")
        if game.result is not None:
            return 0
        spent = time.perf_counter() - _T0 if first_move else 0.0
        if hasattr(player, "seconds") and player.seconds:
            player.seconds = max(0.05, budget - spent - args.margin)
        col = player.choose(game.copy())
        row = landing_row(game.state[0], col)
        x, y = c4fast.to_saiblo(row, col, h)
        send(out, x, y)
        a = player.analysis()
        if a.get("wdl"):
            print(f"move {x} {y}  wdl {tuple(round(v, 3) for v in a['wdl'])}  "
                  f"playouts {a.get('playouts', '-')}", file=log, flush=True)
        if first_move:
            print(f"first move after {time.perf_counter() - _T0:.2f}s (start-up included)", file=log, flush=True)
        first_move = False
        game.play(col)
        if game.result is not None:
            return 0


BUNDLE_MAIN = '''"""Saiblo entry point generated by `python -m selfplay.apps.saiblo --bundle`."""
import os, sys, time
_T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("NUMBA_CPU_NAME", "generic")  # kernels in the bundle were compiled generic
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _writable(d):
    probe = os.path.join(d, "c4fast", "__pycache__", ".w%d" % os.getpid())
    try:
        os.makedirs(os.path.dirname(probe), exist_ok=True)
        open(probe, "w").close()
        os.remove(probe)
        return True
    except OSError:
        return False


if not _writable(HERE):  # Numba would ignore a read-only cache: run from a writable copy
    import shutil, tempfile
    dst = os.path.join(tempfile.mkdtemp(prefix="c4fast_bundle_"), "b")
    shutil.copytree(HERE, dst)  # copy2 keeps the mtimes the shipped Numba cache is keyed on
    print("bundle directory is read-only: running from a copy at " + dst, file=sys.stderr, flush=True)
    HERE = dst  # left in the temp dir (the platform discards its container after the game)
sys.path.insert(0, HERE)
from selfplay.apps import saiblo
saiblo._T0 = _T0
sys.exit(saiblo.main(["--model", os.path.join(HERE, "model.npz"), "--time", "{time}"]))
'''


def bundle(out_zip: str, model: str, seconds: float) -> str:
    """Write the platform archive (see the module docstring); returns its path."""
    import shutil
    import subprocess
    import tempfile
    import zipfile

    from c4fast.runtime import atomic_write

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.exists(model):
        raise FileNotFoundError(f"model {model!r} not found")
    parent = os.path.dirname(os.path.abspath(out_zip))
    if os.path.isdir(out_zip) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise FileNotFoundError(f"--bundle {out_zip!r}: not a writable file path (checked before building)")
    with tempfile.TemporaryDirectory() as tmp:
        stage = os.path.join(tmp, "bundle")
        os.makedirs(stage)
        shutil.copytree(os.path.join(root, "c4fast"), os.path.join(stage, "c4fast"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.makedirs(os.path.join(stage, "nets"))
        for f in ("__init__.py", "numpy_net.py", "evaluator.py", "netplayer.py", "players.py", "config.py"):
            shutil.copy(os.path.join(root, "nets", f), os.path.join(stage, "nets", f))
        os.makedirs(os.path.join(stage, "selfplay", "apps"))
        shutil.copy(os.path.join(root, "selfplay", "apps", "saiblo.py"), os.path.join(stage, "selfplay", "apps"))
        for pkg in ("selfplay", os.path.join("selfplay", "apps")):
            with open(os.path.join(stage, pkg, "__init__.py"), "w") as fh:
                fh.write('"""Saiblo bundle."""\n')
        shutil.copy(model, os.path.join(stage, "model.npz"))
        with open(os.path.join(stage, "main.py"), "w") as fh:
            fh.write(BUNDLE_MAIN.replace("{time}", str(seconds)))
        # Numba's cache is keyed on each source file's mtime: give every file an even,
        # whole-second mtime that survives the zip round trip (zip stores 2 s steps)
        stamp = 1577836800  # 2020-01-01T00:00:00Z
        for d, _, files in os.walk(stage):
            for f in files:
                os.utime(os.path.join(d, f), (stamp, stamp))
        # compile every kernel once, generic CPU, in-tree cache (travels with the files)
        env = dict(os.environ, NUMBA_CPU_NAME="generic")
        env.pop("NUMBA_CACHE_DIR", None)
        warm = subprocess.run([sys.executable, os.path.join(stage, "main.py")], input="9 9 8 4\n-1 -1\n",
                              capture_output=True, text=True, env=env, cwd=stage, timeout=600)
        if warm.returncode != 0:
            raise RuntimeError(f"bundle self-test failed: {warm.stderr.strip()[-500:]}")
        out_zip = os.path.abspath(out_zip)

        def write(fh):
            with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as z:
                for d, _, files in os.walk(stage):
                    for f in sorted(files):
                        full = os.path.join(d, f)
                        z.write(full, os.path.relpath(full, stage))

        atomic_write(out_zip, write)  # a killed build never leaves a half archive
    return out_zip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.apps.saiblo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help=f"network (.npz numpy export or .pt); default {DEFAULT_MODEL}")
    ap.add_argument("--player", default=None, help="play with a player spec instead (e.g. uct:2000)")
    ap.add_argument("--time", type=float, default=2.8, help="seconds per move, start-up included (2.8)")
    ap.add_argument("--margin", type=float, default=0.25, help="safety margin in seconds (0.25)")
    ap.add_argument("--bundle", metavar="OUT.zip", default=None, help="write the platform archive and exit")
    args = ap.parse_args(argv)
    if args.time <= 0:
        print("error: --time must be > 0", file=sys.stderr)
        return 2
    if args.bundle:
        try:
            print(bundle(args.bundle, args.model or DEFAULT_MODEL, args.time))
        except (FileNotFoundError, RuntimeError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    try:
        return play(sys.stdin, sys.stdout.buffer, args)
    except ProtocolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
