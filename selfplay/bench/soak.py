"""`c4fast soak`: run the loop and the web board for a long time and watch every process's
memory and open files (issue 37's one-hour soak).

Starts ``selfplay.generation.loop --preset PRESET --minutes M`` and ``selfplay.apps.web`` on loopback with
``--clients`` synthetic players (each: a new game on a random board against one of a few
engines, moves until the game ends, an analysis now and then, a pause of ``--pause``
seconds between requests: a bounded load), and samples every ``--every`` seconds each
process of both trees (``/proc``: resident memory, open file descriptors, threads).

Writes ``OUT/soak.csv`` (one row per process and sample: seconds, pid, role, rss_mb, fds,
threads), ``OUT/soak.png`` (RSS per role over time, when matplotlib is installed) and
``OUT/soak.json``: per role the RSS at the end of the warm-up and at the end, the peak, the slope of the
summed RSS from the end of the warm-up on (``--warmup``, MB per hour, least squares) and of the open files, and
``growth`` flags where a slope exceeds both ``--max-growth-mb`` per hour and 10 % of the
role's RSS per hour. Exit code 0 when nothing grew, 1 when something did or a child
failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

log = logging.getLogger("selfplay.bench.soak")

#: engines the synthetic clients play against (cheap enough for a 2-core machine)
CLIENT_ENGINES = ("greedy", "uct:2000", "alphabeta:0.05", "net:{model}:100", "net:{model}:0.1s")


# ------------------------------------------------------------------ /proc sampling
def _proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants that are alive now."""
    kids, out, todo = _proc_children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def role_of(pid: int, root_role: str) -> str:
    """A stable name for a process: the module it runs (``selfplay.generation.run``, ``nets.train``,
    ...), ``ROOT/mp`` for multiprocessing children, else the executable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return f"{root_role}/gone"
    if "-m" in argv and argv.index("-m") + 1 < len(argv):
        return argv[argv.index("-m") + 1]
    if any("multiprocessing" in a for a in argv):
        return f"{root_role}/mp"
    return os.path.basename(argv[0]) if argv and argv[0] else f"{root_role}/other"


def sample(pid: int) -> dict | None:
    """{'rss_mb', 'fds', 'threads'} of `pid`, None if it is gone or exiting (a process that
    has released its memory, a zombie among them, has no ``VmRSS`` line)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        return None
    if "VmRSS" not in status:
        return None
    rss_kb = int(status["VmRSS"].split()[0])
    return {"rss_mb": rss_kb / 1024.0, "fds": fds, "threads": int(status.get("Threads", "0").strip() or 0)}


# ------------------------------------------------------------------ analysis
def slope_per_hour(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over ts (seconds), per hour; 0 with fewer than 3 points."""
    n = len(ts)
    if n < 3:
        return 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    if var == 0:
        return 0.0
    return 3600.0 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var


def analyse(rows: list[dict], warmup_s: float, max_growth_mb: float) -> dict:
    """Per role: RSS (summed over the role's processes at each sample) at the end of the
    warm-up and at the end, peak, slopes of RSS and open files after the warm-up, and the
    growth flag (see the module docstring)."""
    by_role: dict[str, dict[float, list[dict]]] = {}
    for r in rows:
        by_role.setdefault(r["role"], {}).setdefault(r["t"], []).append(r)
    out = {}
    for role, samples in sorted(by_role.items()):
        ts = sorted(samples)
        rss = [sum(x["rss_mb"] for x in samples[t]) for t in ts]
        fds = [sum(x["fds"] for x in samples[t]) for t in ts]
        late = [i for i, t in enumerate(ts) if t >= warmup_s]
        at_warm = rss[late[0]] if late else None
        s_rss = slope_per_hour([ts[i] for i in late], [rss[i] for i in late])
        s_fds = slope_per_hour([ts[i] for i in late], [fds[i] for i in late])
        base = max(at_warm or 0.0, 1.0)
        out[role] = {"samples": len(ts), "processes": len({x["pid"] for t in ts for x in samples[t]}),
                     "rss_mb_at_warmup": None if at_warm is None else round(at_warm, 1),
                     "rss_mb_at_end": round(rss[-1], 1), "rss_mb_peak": round(max(rss), 1),
                     "rss_mb_per_hour": round(s_rss, 2), "fds_at_end": fds[-1], "fds_per_hour": round(s_fds, 2),
                     "growth": bool(late and s_rss > max_growth_mb and s_rss > 0.10 * base)
                     or bool(late and s_fds > 50)}
    return out


def plot(rows: list[dict], path: Path) -> bool:
    """RSS per role over time into `path` (PNG); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series: dict[str, dict[float, float]] = {}
    for r in rows:
        series.setdefault(r["role"], {}).setdefault(r["t"], 0.0)
        series[r["role"]][r["t"]] += r["rss_mb"]
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for role, pts in sorted(series.items()):
        ts = sorted(pts)
        ax.plot([t / 60 for t in ts], [pts[t] for t in ts], label=role)
    ax.set_xlabel("minutes")
    ax.set_ylabel("resident memory, MB (summed over the role's processes)")
    ax.set_title("c4fast soak: memory per process role")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------------ the synthetic clients
def _post(url: str, path: str, body: dict, timeout: float = 120.0) -> tuple[int, dict]:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except ValueError:
            return e.code, {}


def client(url: str, engines: list[str], seed: int, pause: float, stop: threading.Event, stats: dict) -> None:
    """Play games against the web board until `stop` (see the module docstring)."""
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            st, game = _post(url, "/api/new", {"engine": rng.choice(engines), "human_first": rng.random() < 0.5})
            stats["requests"] += 1
            if st != 200:
                stats["errors"] += 1
                stop.wait(pause)
                continue
            while game.get("result") is None and not stop.is_set():
                stop.wait(pause)
                if rng.random() < 0.15:
                    _post(url, "/api/analyse", {"game": game["game"]})
                    stats["requests"] += 1
                st, nxt = _post(url, "/api/move", {"game": game["game"], "col": rng.choice(game["legal"]),
                                                   "ply": len(game["moves"])})
                stats["requests"] += 1
                if st != 200:
                    stats["errors"] += 1
                    break
                game = nxt
            stats["games"] += 1
        except (OSError, ValueError) as e:  # the server restarting or gone: note it, go on
            stats["errors"] += 1
            stats["last_error"] = f"{type(e).__name__}: {e}"
            stop.wait(max(pause, 1.0))


# ------------------------------------------------------------------ main
def _start(args: list[str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "a") as out:
        return subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _stop(proc: subprocess.Popen, grace: float = 120.0) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _web_url(log_path: Path, proc: subprocess.Popen, timeout: float = 300.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the web board exited with code {proc.returncode}; see {log_path}")
        for line in log_path.read_text().splitlines():
            if "Uvicorn running on " in line:
                return line.split("Uvicorn running on ")[1].split()[0]
        time.sleep(0.2)
    raise RuntimeError(f"the web board did not start within {timeout:.0f} s; see {log_path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="c4fast soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/soak", help="output directory (default runs/soak)")
    ap.add_argument("--minutes", type=float, default=60.0, help="how long (default 60)")
    ap.add_argument("--preset", default="cpu", help="the loop's preset (default cpu)")
    ap.add_argument("--no-loop", action="store_true", help="soak only the web board")
    ap.add_argument("--no-web", action="store_true", help="soak only the loop")
    ap.add_argument("--clients", type=int, default=2, help="synthetic web clients (default 2)")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between a client's requests (default 1)")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples (default 10)")
    ap.add_argument("--warmup", type=float, default=12.0,
                    help="minutes before slopes are measured (default 12: after the loop's first evaluation, which "
                         "loads the evaluation players into the loop process once)")
    ap.add_argument("--max-growth-mb", type=float, default=20.0,
                    help="flag a role whose RSS grows faster than this many MB per hour (and 10 %% of it)")
    args = ap.parse_args(argv)
    if not (args.minutes > 0 and args.every > 0 and args.pause >= 0 and 0 <= args.clients <= 16
            and args.warmup >= 0 and not (args.no_loop and args.no_web)):
        print("error: need --minutes > 0, --every > 0, --pause >= 0, 0 <= --clients <= 16, --warmup >= 0 "
              "and something to soak", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from nets import MODELS_DIR

    engines = [e.format(model=MODELS_DIR / "c4fast_cpu.npz") for e in CLIENT_ENGINES]
    roots: dict[str, subprocess.Popen] = {}
    stop = threading.Event()
    stats = {"requests": 0, "errors": 0, "games": 0, "last_error": None}
    threads = []
    rows: list[dict] = []
    failed = None
    t0 = time.monotonic()
    try:
        if not args.no_loop:
            roots["loop"] = _start(["selfplay.generation.loop", "--preset", args.preset, "--dir", str(out / "loop"),
                                    "--minutes", str(args.minutes)], out / "loop.log")
        if not args.no_web:
            roots["web"] = _start(["selfplay.apps.web", "--port", "0", "--workers", "2"], out / "web.log")
            url = _web_url(out / "web.log", roots["web"])
            for i in range(args.clients):
                th = threading.Thread(target=client, args=(url, engines, i, args.pause, stop, stats), daemon=True)
                th.start()
                threads.append(th)
        with open(out / "soak.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["t", "pid", "role", "rss_mb", "fds", "threads"])
            w.writeheader()
            while time.monotonic() - t0 < args.minutes * 60:
                t = round(time.monotonic() - t0, 1)
                for name, root in roots.items():
                    if root.poll() is not None and name == "web":
                        raise RuntimeError(f"the web board exited with code {root.returncode}")
                    for pid in process_tree(root.pid):
                        s = sample(pid)
                        if s is not None:
                            row = {"t": t, "pid": pid, "role": f"{name}:{role_of(pid, name)}",
                                   "rss_mb": round(s["rss_mb"], 1), "fds": s["fds"], "threads": s["threads"]}
                            rows.append(row)
                            w.writerow(row)
                f.flush()
                if "loop" in roots and roots["loop"].poll() is not None:
                    break  # the loop ended its own run time
                time.sleep(max(0.0, args.every - (time.monotonic() - t0 - t)))
    except KeyboardInterrupt:
        failed = "interrupted"
    except RuntimeError as e:
        failed = str(e)
    finally:
        stop.set()
        for root in roots.values():
            _stop(root)
    loop_rc = roots["loop"].returncode if "loop" in roots else None
    if loop_rc not in (None, 0) and failed is None:
        failed = f"the loop exited with code {loop_rc}; see {out / 'loop.log'}"
    report = {"minutes": round((time.monotonic() - t0) / 60, 2), "preset": None if args.no_loop else args.preset,
              "clients": 0 if args.no_web else args.clients, "web": {k: v for k, v in stats.items()},
              "roles": analyse(rows, args.warmup * 60, args.max_growth_mb), "error": failed,
              "plot": str(out / "soak.png") if rows and plot(rows, out / "soak.png") else None}
    report["growth"] = sorted(r for r, v in report["roles"].items() if v["growth"])
    from c4fast.runtime import atomic_write_json

    atomic_write_json(str(out / "soak.json"), report)
    print(json.dumps(report, indent=1))
    return 1 if (failed or report["growth"]) else 0


if __name__ == "__main__":
    sys.exit(main())
